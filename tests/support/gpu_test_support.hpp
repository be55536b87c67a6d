// What every GPU test needs: a skip with the reason when there is no GPU, fresh seeds, and whether
// compute-sanitizer runs it.
#pragma once

#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace stepwise::testing {

//! A new seed for every test run; tests print it with SCOPED_TRACE so a failure can be replayed.
inline std::uint64_t fresh_seed()
{
    std::random_device entropy;
    return (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
}

//! Whether compute-sanitizer runs the tests (conf/measure.py sets STEPWISE_UNDER_SANITIZER): tests of timings or
//! register counts, and the largest problems, are left out there.
inline bool under_sanitizer() { return std::getenv("STEPWISE_UNDER_SANITIZER") != nullptr; }

//! The shapes a test runs: `shapes`, and `large` too unless compute-sanitizer runs the tests (slow there).
template <class Shape>
std::vector<Shape> shapes_to_run(std::vector<Shape> shapes, const std::vector<Shape>& large)
{
    if (!under_sanitizer()) {
        shapes.insert(shapes.end(), large.begin(), large.end());
    }
    return shapes;
}

//! Calls a two-phase launcher (CUB's convention) as a program would: `call(nullptr, temp_bytes)` for the workspace's
//! size, then `call(d_temp, temp_bytes)` with a workspace of that size (at least a byte) poisoned with 0xFF, since a
//! step must not rely on a zeroed one; then expects no error left behind and synchronizes.
//! @return the first phase's error, else the launch's
template <class Call>
cudaError_t launch_with_poisoned_workspace(const Call& call)
{
    std::size_t temp_bytes = 0;
    if (const cudaError_t e = call(nullptr, temp_bytes); e != cudaSuccess) {
        return e;
    }
    EXPECT_GE(temp_bytes, 1u) << "a workspace of 0 bytes would be asked for again, not used";
    DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));
    d_temp.fill_bytes(0xFF, 0);
    const cudaError_t launch = call(d_temp.data(), temp_bytes);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return launch;
}

//! The elements of `all` that `keep` accepts, in their order: the sizes or shapes a step's launcher takes.
template <class T, class Keep>
std::vector<T> kept(const std::vector<T>& all, Keep keep)
{
    std::vector<T> out;
    for (const T& x : all) {
        if (keep(x)) {
            out.push_back(x);
        }
    }
    return out;
}

//! What `launch` writes into `d_out`, one element longer than its output: `d_out` is poisoned with NaN first, the
//! launch and the device's synchronization must succeed, and the last element (a guard) must stay NaN. The guard is
//! not returned.
inline std::vector<float> run_poisoned(DeviceBuffer<float>& d_out, const std::function<cudaError_t()>& launch)
{
    d_out.fill_bytes(0xFF, 0);
    EXPECT_EQ(launch(), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> out = d_out.download();
    EXPECT_TRUE(std::isnan(out.back())) << "wrote past the end";
    out.pop_back();
    return out;
}

//! @brief A launcher that takes a workspace, `call(d_temp, temp_bytes)` (CUB's convention: with a null `d_temp` it
//!        sets the bytes it needs), refuses one a byte short of them, and leaves no launch error behind.
template <class Call>
void expect_refuses_a_workspace_one_byte_short(Call call)
{
    std::size_t temp_bytes = 0;
    ASSERT_EQ(call(nullptr, temp_bytes), cudaSuccess);
    ASSERT_GT(temp_bytes, 1u);
    DeviceBuffer<unsigned char> d_temp(temp_bytes);
    std::size_t short_bytes = temp_bytes - 1;
    EXPECT_EQ(call(d_temp.data(), short_bytes), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace stepwise::testing

//! Skips the current test, with a one-line reason, when no CUDA GPU is usable.
#define STEPWISE_SKIP_WITHOUT_GPU()                                                              \
    do {                                                                                         \
        if (const std::string reason = ::stepwise::cuda_unavailable_reason(); !reason.empty()) { \
            GTEST_SKIP() << "no usable CUDA GPU: " << reason;                                    \
        }                                                                                        \
    } while (0)
