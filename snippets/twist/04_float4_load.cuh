//! @file 04_float4_load.cuh
//! @brief y-twist step 4: the vertex read with one 16-byte load and written with one store.
//!
//! Step 3 still reads y with a 4-byte load of its own and writes x and z
//! with two 4-byte stores. Reading the whole `float4` (16 bytes, aligned to
//! 16) into one variable and storing it back whole makes one load and one
//! store per vertex, and a warp's accesses cover 512 consecutive bytes each
//! time. In the source this cost two registers (6 became 8) and saved time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::twist::float4_load {

constexpr int block_threads = 512;  //!< threads per block, one vertex each

//! @brief Thread `k` twists vertex `k`.
static __global__ void twist_kernel(float4* d_points, int num_points, float magnitude, float env)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= num_points) {
        return;
    }
    float4 pt = d_points[k];
    const float ff = magnitude * pt.y * env;
    if (ff != 0.0f) {
        const double cct = __cosf(ff);
        const double cst = __sinf(ff);
        const double tt = pt.x * cct - pt.z * cst;
        pt.z = pt.x * cst + pt.z * cct;
        pt.x = tt;
    }
    d_points[k] = pt;
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

}  // namespace stepwise::twist::float4_load
