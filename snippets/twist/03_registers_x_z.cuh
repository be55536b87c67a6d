//! @file 03_registers_x_z.cuh
//! @brief y-twist step 3: x and z read once, into registers.
//!
//! Step 2 names each coordinate at every use (`d_points[k].x` and
//! `d_points[k].z` twice each), and the source's compiler loaded them again
//! each time. Copying x and z into local variables asks for one load each.
//! (nvcc 13 already merges step 2's reads of x and z into one 16-byte load,
//! as no store comes between them, so here the change is small.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::twist::registers_x_z {

constexpr int block_threads = 512;  //!< threads per block, one vertex each

//! @brief Thread `k` twists vertex `k`.
static __global__ void twist_kernel(float4* d_points, int num_points, float magnitude, float env)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= num_points) {
        return;
    }
    const float ptX = d_points[k].x;
    const float ptZ = d_points[k].z;
    const float ff = magnitude * d_points[k].y * env;
    if (ff != 0.0f) {
        const double cct = __cosf(ff);
        const double cst = __sinf(ff);
        const double tt = ptX * cct - ptZ * cst;
        d_points[k].z = ptX * cst + ptZ * cct;
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

}  // namespace stepwise::twist::registers_x_z
