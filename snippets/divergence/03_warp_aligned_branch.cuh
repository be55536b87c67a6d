//! @file 03_warp_aligned_branch.cuh
//! @brief Warp divergence, step 3 (the source's mathKernel2): the branch is chosen per warp, not per thread.
//!
//! Steps 1 and 2 decide by `index % 2`, on which the 32 lanes of a warp
//! disagree, so each warp runs both loops at half width. Deciding by
//! `(index / warpSize) % 2` gives every lane of a warp the same answer:
//! even warps run only the sine loop, odd warps only the cosine loop, each
//! at full width. Same work per thread; a different assignment of work to
//! items, which is the real change (see the chapter's page).
#pragma once

#include <cuda_runtime.h>

namespace stepwise::divergence::warp_aligned_branch {

constexpr int block_threads = 256;      //!< threads per block, one item each
constexpr int work_iterations = 256;    //!< terms each thread sums, on either branch
constexpr float angle_step = 0.01f;     //!< the angle between two terms, in radians

//! @brief Thread `index` sums `__sinf` (even warp) or `__cosf` (odd warp) of `d_in[index] + i * angle_step`.
static __global__ void __launch_bounds__(block_threads)
    branch_kernel(const float* __restrict__ d_in, float* __restrict__ d_out, int num_items)
{
    const int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= num_items) {
        return;
    }
    const float x = d_in[index];
    float sum = 0.0f;
    if ((index / warpSize) % 2 == 0) {
        for (int i = 0; i < work_iterations; ++i) {
            sum += __sinf(x + i * angle_step);
        }
    } else {
        for (int i = 0; i < work_iterations; ++i) {
            sum += __cosf(x + i * angle_step);
        }
    }
    d_out[index] = sum;
}

//! @brief Writes, for every item, the sum of `work_iterations` sines or cosines chosen by the item's warp.
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

}  // namespace stepwise::divergence::warp_aligned_branch
