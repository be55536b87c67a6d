// What the GEMM chapters' GPU tests share (SGEMM, tensor cores): a problem's shape, its text, the shapes a step
// accepts.
#pragma once

#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "support/large_problem.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::testing {

//! @brief C (M x N) = A (M x K) B (K x N).
struct GemmShape {
    int M, N, K;
};

inline std::string shape_text(GemmShape s)
{
    return std::to_string(s.M) + " x " + std::to_string(s.N) + " x " + std::to_string(s.K);
}

//! @brief The shapes of `all` that `step`'s launcher accepts (`step.accepts(M, N, K)`), in their order.
template <class Step>
std::vector<GemmShape> accepted_shapes(const Step& step, const std::vector<GemmShape>& all)
{
    return kept(all, [&](const GemmShape& s) { return step.accepts(s.M, s.N, s.K); });
}

//! @brief C (M x N, row-major, of `TC`) = A (M x K, row-major) B (K x N; `b_column_major`: stored N rows of K) for a
//!        shape at a launcher's limit (a dimension near INT_MAX, billions of elements). A and B are signed powers of
//!        two made on the GPU from a fresh seed, so every product and sum is exact; `launch(d_A, d_B, d_C)` must
//!        succeed, write every element of C and nothing past it, and the elements indices_to_check() picks must equal
//!        the exact product rounded to `TC`. Skips, with the reason, where large_problem_skip_reason() says so.
template <class TIn, class TC, class Launch>
void expect_exact_product(GemmShape shape, bool b_column_major, Launch launch)
{
    const std::size_t M = shape.M, N = shape.N, K = shape.K;
    constexpr std::size_t guard = 256;  // poisoned elements after C
    const std::size_t bytes = (M * K + K * N) * sizeof(TIn) + (M * N + guard) * sizeof(TC);
    if (const std::string why = large_problem_skip_reason(bytes); !why.empty()) {
        GTEST_SKIP() << why;
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(shape_text(shape) + ", seed " + std::to_string(seed));
    DeviceBuffer<TIn> d_A(M * K);
    DeviceBuffer<TIn> d_B(K * N);
    DeviceBuffer<TC> d_C(M * N + guard);
    fill_hashed(d_A.data(), d_A.size(), Hashed::powers_of_two, seed);
    fill_hashed(d_B.data(), d_B.size(), Hashed::powers_of_two, seed + 1);
    d_C.fill_bytes(0xFF, 0);  // NaN in fp32 and bf16
    ASSERT_EQ(launch(d_A.data(), d_B.data(), d_C.data()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<TC> C = d_C.download();
    EXPECT_EQ(count_where(M * N, [&](std::size_t i) { return std::isnan(static_cast<float>(C[i])); }), 0u)
        << "elements of C left unwritten (NaN)";
    for (std::size_t i = M * N; i < C.size(); ++i) {
        ASSERT_TRUE(std::isnan(static_cast<float>(C[i]))) << "wrote past C, at element " << i;
    }
    std::size_t wrong = 0;
    std::size_t first = 0;
    for (const std::size_t i : indices_to_check(M * N, seed)) {
        const std::size_t m = i / N, n = i % N;
        const double exact = parallel_sum<double>(K, [&](std::size_t k) {
            return static_cast<double>(hashed_value(Hashed::powers_of_two, seed, m * K + k)) *
                   hashed_value(Hashed::powers_of_two, seed + 1, b_column_major ? n * K + k : k * N + n);
        });
        const float expected = static_cast<float>(TC(static_cast<float>(exact)));
        if (!(static_cast<float>(C[i]) == expected)) {
            first = wrong++ == 0 ? i : first;
        }
    }
    EXPECT_EQ(wrong, 0u) << "elements not the exact product; the first at (" << first / N << ", " << first % N << ")";
}

//! @brief A step's product of random n x n matrices against a library's (the GEMM chapters' MatchesCublasAt4096):
//!        A and B are `random(n, n, seed)` and `random(n, n, seed + 1)`; `library(d_A, d_B, d_C)` and
//!        `step(d_A, d_B, d_C)` each write a C poisoned first. The library's C is checked at the elements
//!        `sample(n, n, 1024, seed)` picks against double by `check_library(A, B, sampled, where)` (a comparison:
//!        within_tolerance(), describe()), then handed, with the step's, to `expect(step_C, library_C)`, both as floats.
template <class Random, class Sample, class Library, class Step, class CheckLibrary, class Expect>
void expect_step_matches_library(int n, Random random, Sample sample, Library library, Step step,
                                 CheckLibrary check_library, Expect expect)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const auto A = random(n, n, seed);
    const auto B = random(n, n, seed + 1);
    using T = typename decltype(A)::value_type;
    DeviceBuffer<T> d_A(A.size());
    DeviceBuffer<T> d_B(B.size());
    DeviceBuffer<T> d_C(static_cast<std::size_t>(n) * n);
    d_A.upload(A);
    d_B.upload(B);
    const auto product = [&](const auto& call) {
        d_C.fill_bytes(0xFF, 0);  // NaN in fp32 and bf16
        EXPECT_EQ(call(d_A.data(), d_B.data(), d_C.data()), cudaSuccess);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> C;
        for (const T& c : d_C.download()) {
            C.push_back(static_cast<float>(c));
        }
        return C;
    };
    const std::vector<float> expected = product(library);
    const std::vector<std::size_t> where = sample(n, n, 1024, seed);
    std::vector<float> sampled;
    for (const std::size_t i : where) {
        sampled.push_back(expected[i]);
    }
    const auto check = check_library(A, B, sampled, where);
    EXPECT_TRUE(check.within_tolerance()) << "the library against double: " << check.describe(1);
    expect(product(step), expected);
}

}  // namespace stepwise::testing
