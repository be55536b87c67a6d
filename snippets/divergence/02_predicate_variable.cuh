//! @file 02_predicate_variable.cuh
//! @brief Warp divergence, step 2 (mathKernel3 of the textbook the source follows): the condition kept in a predicate variable.
//!
//! The textbook suggests computing the condition once into a `bool`
//! and testing it in two separate `if`s, so that the compiler may predicate
//! each short branch instead of branching around it. The threads of a warp
//! still disagree on the condition: predication or not, a warp issues both
//! loops, each at half its width. Step 1's flaw is the data layout of the
//! decision, and this step leaves it where it was.
#pragma once

#include <cuda_runtime.h>

namespace stepwise::divergence::predicate_variable {

constexpr int block_threads = 256;      //!< threads per block, one item each
constexpr int work_iterations = 256;    //!< terms each thread sums, on either branch
constexpr float angle_step = 0.01f;     //!< the angle between two terms, in radians

//! @brief Thread `index` sums `__sinf` (even index) or `__cosf` (odd index) of `d_in[index] + i * angle_step`.
static __global__ void __launch_bounds__(block_threads)
    branch_kernel(const float* __restrict__ d_in, float* __restrict__ d_out, int num_items)
{
    const int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= num_items) {
        return;
    }
    const float x = d_in[index];
    float sum = 0.0f;
    const bool even = index % 2 == 0;
    if (even) {
        for (int i = 0; i < work_iterations; ++i) {
            sum += __sinf(x + i * angle_step);
        }
    }
    if (!even) {
        for (int i = 0; i < work_iterations; ++i) {
            sum += __cosf(x + i * angle_step);
        }
    }
    d_out[index] = sum;
}

//! @brief Writes, for every item, the sum of `work_iterations` sines or cosines chosen by the item's index.
//! @param[in]  d_in      `num_items` angles, in radians
//! @param[out] d_out     `num_items` sums (must not overlap `d_in`)
//! @param[in]  num_items number of items, any positive count
//! @param[in]  stream    stream to launch on
//! @pre `d_in` and `d_out` not null, `num_items > 0`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t branch(const float* d_in, float* d_out, int num_items, cudaStream_t stream = 0)
{
    if (d_in == nullptr || d_out == nullptr || num_items <= 0) {
        return cudaErrorInvalidValue;
    }
    const int blocks = (num_items + block_threads - 1) / block_threads;
    branch_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_out, num_items);
    return cudaGetLastError();
}

}  // namespace stepwise::divergence::predicate_variable
