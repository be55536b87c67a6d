// What the tests at the final launchers' limits share: problems of billions of elements (a dimension at INT_MAX),
// whose inputs are made on the GPU from a seed and whose outputs are checked against the same values made on the
// host, and the one rule for when such a test cannot run here.
#pragma once

#include "support/gpu_test_support.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace stepwise::testing {

//! @brief What `fill_hashed` writes: values uniform in [-1, 1) on a grid of 2^-23 (distinct neighbours, for data
//!        that is moved), or signed powers of two, +-{1/4, 1/2, 1, 2} (for products: exact in fp32, TF32 and bf16,
//!        and so are their sums while they stay below 2^20, whatever their order).
enum class Hashed { uniform, powers_of_two };

//! @brief The value of kind `kind` at an element's index for a seed (splitmix64): what `fill_hashed` writes there,
//!        and what the host computes to check it.
__host__ __device__ inline float hashed_value(Hashed kind, std::uint64_t seed, std::uint64_t index)
{
    std::uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    if (kind == Hashed::powers_of_two) {
        return ((z >> 63) != 0 ? -0.25f : 0.25f) * static_cast<float>(1u << (z & 3));
    }
    return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
static __global__ void fill_hashed_kernel(T* d, std::size_t count, Hashed kind, std::uint64_t seed)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        d[i] = T(hashed_value(kind, seed, i));
    }
}

//! @brief Writes `hashed_value(kind, seed, i)`, as a `T`, to the `count` elements at `d`, and waits for it.
template <class T>
void fill_hashed(T* d, std::size_t count, Hashed kind, std::uint64_t seed)
{
    fill_hashed_kernel<<<4096, 256>>>(d, count, kind, seed);
    STEPWISE_CUDA_CHECK(cudaGetLastError());
    STEPWISE_CUDA_CHECK(cudaDeviceSynchronize());
}

//! @brief Where to check a result of `count` elements that is too large to compute whole on the host: the first and
//!        the last 2^20 and 2^20 more drawn from `seed` (every index where `count` is smaller than that).
inline std::vector<std::size_t> indices_to_check(std::size_t count, std::uint64_t seed)
{
    constexpr std::size_t part = std::size_t{1} << 20;
    std::vector<std::size_t> out;
    if (count <= 3 * part) {
        for (std::size_t i = 0; i < count; ++i) {
            out.push_back(i);
        }
        return out;
    }
    std::mt19937_64 random(seed);
    for (std::size_t i = 0; i < part; ++i) {
        out.push_back(i);
        out.push_back(count - 1 - i);
        out.push_back(part + random() % (count - 2 * part));
    }
    return out;
}

//! @brief `term(0) + ... + term(count - 1)`, over the host's threads where `count` is large (2^31 elements of an
//!        output at INT_MAX take one thread seconds). Exact for counts, and for doubles where the terms are products
//!        of Hashed::powers_of_two values.
template <class Sum, class Term>
Sum parallel_sum(std::size_t count, Term term)
{
    const std::size_t threads =
        count < (std::size_t{1} << 22) ? 1 : std::max(1u, std::thread::hardware_concurrency());
    std::vector<Sum> sums(threads, Sum{});
    const auto add = [&](std::size_t t) {
        for (std::size_t i = count * t / threads; i < count * (t + 1) / threads; ++i) {
            sums[t] += term(i);
        }
    };
    std::vector<std::thread> workers;
    for (std::size_t t = 1; t < threads; ++t) {
        workers.emplace_back(add, t);
    }
    add(0);
    for (std::thread& worker : workers) {
        worker.join();
    }
    Sum sum{};
    for (const Sum s : sums) {
        sum += s;
    }
    return sum;
}

//! @brief How many of the indices 0 .. count - 1 `holds(i)` is true for (parallel_sum()).
template <class Predicate>
std::size_t count_where(std::size_t count, Predicate holds)
{
    return parallel_sum<std::size_t>(count, [&](std::size_t i) -> std::size_t { return holds(i) ? 1 : 0; });
}

//! @brief Why a test of a problem taking `bytes` of device memory does not run here, or empty where it does: one of
//!        over 1 GiB is left out under compute-sanitizer (seconds plain, far longer instrumented), and any where the
//!        GPU has less free memory than it needs (plus 1 GiB for the libraries and the launch).
inline std::string large_problem_skip_reason(std::size_t bytes)
{
    const double gib = static_cast<double>(bytes) / (1u << 30);
    if (under_sanitizer() && bytes > (std::size_t{1} << 30)) {
        return "left out under compute-sanitizer: a problem of " + std::to_string(gib) + " GiB";
    }
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    STEPWISE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (free_bytes < bytes + (std::size_t{1} << 30)) {
        return "needs " + std::to_string(gib) + " GiB of GPU memory and 1 GiB more; this GPU has " +
               std::to_string(static_cast<double>(free_bytes) / (1u << 30)) + " GiB free";
    }
    return "";
}

}  // namespace stepwise::testing
