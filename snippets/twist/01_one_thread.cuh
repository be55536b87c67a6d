//! @file 01_one_thread.cuh
//! @brief y-twist step 1: one GPU thread deforms every vertex.
//!
//! The source's first version: a loop over all vertices in a single GPU
//! thread. Each vertex (x, y, z, w) is rotated about the y axis by the angle
//! `magnitude * y * env`, so the mesh twists more the higher it goes. The
//! body is the source's own: `__cosf`/`__sinf` (fast, approximate), the
//! rotation in `double`, each coordinate read from global memory where it is
//! used, and vertices whose angle is exactly zero left as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::twist::one_thread {

//! @brief The only thread twists every vertex in turn.
static __global__ void twist_kernel(float4* d_points, int num_points, float magnitude, float env)
{
    for (int k = 0; k < num_points; ++k) {
        const float ff = magnitude * d_points[k].y * env;
        if (ff != 0.0f) {
            const double cct = __cosf(ff);
            const double cst = __sinf(ff);
            const double tt = d_points[k].x * cct - d_points[k].z * cst;
            d_points[k].z = d_points[k].x * cst + d_points[k].z * cct;
            d_points[k].x = tt;
        }
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
    twist_kernel<<<1, 1, 0, stream>>>(d_points, num_points, magnitude, env);
    return cudaGetLastError();
}

}  // namespace stepwise::twist::one_thread
