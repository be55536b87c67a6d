//! @file 05_float_math.cuh
//! @brief y-twist step 5 (beyond the source): the rotation in float, not double.
//!
//! The source's `double` temporaries make every product a conversion to
//! double and a double multiply-add, and every result a conversion back: the
//! inputs and `__cosf`/`__sinf` are float, so double buys no accuracy a
//! float result can keep. In float the rotation is four multiply-adds. Where
//! the data come from DRAM this changes nothing measurable; where they sit in
//! L2, the instructions are what is left to save.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::twist::float_math {

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
        const float cct = __cosf(ff);
        const float cst = __sinf(ff);
        const float tt = pt.x * cct - pt.z * cst;
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

}  // namespace stepwise::twist::float_math
