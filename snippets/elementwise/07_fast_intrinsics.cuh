//! @file 07_fast_intrinsics.cuh
//! @brief Element-wise step 7 (beyond the article; NOT the same operation):
//!        step 6 with the hardware's approximate `__logf` and `__cosf`.
//!
//! Step 6 moves the same bytes as the memory floor, yet takes about a tenth
//! longer: its accurate `logf` and `cosf` cost some 25 instructions each, and
//! the last wave of every launch computes after memory has gone quiet. The
//! special-function unit's approximations take a handful. They are accurate
//! only near zero (`__cosf` to 2^-21.41 absolute on [-pi, pi]), so the
//! argument of the cosine is first reduced to [-pi, pi] in three FMAs.
//! The result is a different function: within a few units in the last
//! place of `logf`/`cosf`, not within their 1 to 2. The guide measures how
//! far the final values move.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::fast_intrinsics {

constexpr int block_x = 256;  //!< threads per block along x, the launch shape of the update kernel

//! @brief `v + sqrt(log(v) + 1)` with the approximate logarithm.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(__logf(v) + 1.f); }

//! @brief `cos(v)` from `__cosf` on `v` reduced to [-pi, pi] (2 pi split in three parts, Cody and Waite).
__device__ __forceinline__ float reduced_cos(float v)
{
    const float k = rintf(v * 0.159154936671f);      // nearest multiple of 2 pi
    float r = fmaf(-k, 6.28125f, v);                 // 2 pi's leading 8 bits: exact product
    r = fmaf(-k, 1.93530717e-3f, r);                 // the next 24 bits
    r = fmaf(-k, 1.02531317e-11f, r);                // the rest
    return __cosf(r);
}

//! @brief `v + sqrt(cos(v) + 1)` with the approximate cosine.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(reduced_cos(v) + 1.f); }

//! @brief Updates columns (even, odd, even, odd).
__device__ __forceinline__ float4 update_quad(float4 v)
{
    return make_float4(even_column_update(v.x), odd_column_update(v.y), even_column_update(v.z),
                       odd_column_update(v.w));
}

//! @brief One thread per float4 of the flattened array.
static __global__ void update_kernel(float4* d_quads, std::size_t num_quads)
{
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < num_quads) {
        d_quads[i] = update_quad(d_quads[i]);
    }
}

//! @brief Updates a `dimx` x `dimy` row-major array in place, float4 at a time, with approximate functions.
//! @param[in,out] d_data device array of `dimx * dimy` floats, 16-byte aligned
//! @param[in] dimx   number of columns (the fast index), a multiple of 4
//! @param[in] dimy   number of rows
//! @param[in] stream stream to launch on
//! @pre `dimx > 0` and a multiple of 4, `dimy > 0`, `d_data` 16-byte aligned
//!      (cudaMalloc gives 256); the cosine's argument reduction is exact for
//!      |v| < 400000 (fewer than 2^16 periods) and degrades beyond
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t update(float* d_data, int dimx, int dimy, cudaStream_t stream = 0)
{
    static_assert(sizeof(float4) == 4 * sizeof(float), "a float4 covers columns 4k .. 4k+3");
    if (d_data == nullptr || dimx <= 0 || dimx % 4 != 0 || dimy <= 0 ||
        reinterpret_cast<std::size_t>(d_data) % alignof(float4) != 0) {
        return cudaErrorInvalidValue;
    }
    const std::size_t num_quads = static_cast<std::size_t>(dimx / 4) * dimy;
    const std::size_t blocks = (num_quads + block_x - 1) / block_x;
    update_kernel<<<static_cast<unsigned>(blocks), block_x, 0, stream>>>(reinterpret_cast<float4*>(d_data),
                                                                          num_quads);
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise::fast_intrinsics
