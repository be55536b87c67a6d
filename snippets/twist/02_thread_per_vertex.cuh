//! @file 02_thread_per_vertex.cuh
//! @brief y-twist step 2: one thread per vertex, blocks of 512.
//!
//! Step 1's loop becomes the grid: thread `k` twists vertex `k`, the body
//! unchanged. The source computed `k` from a 1-D grid of 2-D blocks and had
//! no bound check, so it only worked for a multiple of its block size; here
//! the blocks are 1-D, with the same 512 threads, and threads past the last
//! vertex return.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::twist::thread_per_vertex {

constexpr int block_threads = 512;  //!< threads per block, one vertex each

//! @brief Thread `k` twists vertex `k`.
static __global__ void twist_kernel(float4* d_points, int num_points, float magnitude, float env)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= num_points) {
        return;
    }
    const float ff = magnitude * d_points[k].y * env;
    if (ff != 0.0f) {
        const double cct = __cosf(ff);
        const double cst = __sinf(ff);
        const double tt = d_points[k].x * cct - d_points[k].z * cst;
        d_points[k].z = d_points[k].x * cst + d_points[k].z * cct;
        d_points[k].x = tt;
    }
}

//! @brief Rotates every vertex about the y axis by `magnitude * y * env` radians, in place.
//! @param[in,out] d_points   `num_points` vertices (x, y, z, w); y and w are left unchanged
//! @param[in]     num_points number of vertices
//! @param[in]     magnitude  twist per unit of y
//! @param[in]     env        envelope: scales the whole twist
//! @param[in]     stream     stream to launch on
//! @pre `d_points` not null and 16-byte aligned (cudaMalloc's are), `num_points > 0`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t twist(float4* d_points, int num_points, float magnitude, float env, cudaStream_t stream = 0)
{
    if (d_points == nullptr || num_points <= 0 || reinterpret_cast<std::uintptr_t>(d_points) % alignof(float4) != 0) {
        return cudaErrorInvalidValue;
    }
    const int blocks = (num_points + block_threads - 1) / block_threads;
    twist_kernel<<<blocks, block_threads, 0, stream>>>(d_points, num_points, magnitude, env);
    return cudaGetLastError();
}

}  // namespace stepwise::twist::thread_per_vertex
