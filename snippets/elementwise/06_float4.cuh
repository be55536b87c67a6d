//! @file 06_float4.cuh
//! @brief Element-wise step 6 (beyond the article): float4, four elements per thread.
//!
//! Widens step 5's 8-byte accesses to 16 bytes, the widest a thread can
//! load in one instruction. Because `dimx` is a multiple of 4, rows start on
//! a float4 boundary and the array can be walked as one flat vector: element
//! `i` is in an odd column exactly when `i` is odd, so each float4 holds
//! columns (even, odd, even, odd). Half as many load and store instructions
//! as step 5, a quarter of step 2's, and no 2-D index arithmetic.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::float4_vectors {

constexpr int block_x = 256;  //!< threads per block along x, the launch shape of the update kernel

//! @brief `v + sqrt(log(v) + 1)`: the update of an odd column.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(logf(v) + 1.f); }

//! @brief `v + sqrt(cos(v) + 1)`: the update of an even column.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(cosf(v) + 1.f); }

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

//! @brief Updates a `dimx` x `dimy` row-major array in place, float4 at a time.
//! @param[in,out] d_data device array of `dimx * dimy` floats, 16-byte aligned
//! @param[in] dimx   number of columns (the fast index), a multiple of 4
//! @param[in] dimy   number of rows
//! @param[in] stream stream to launch on
//! @pre `dimx > 0` and a multiple of 4, `dimy > 0`, `d_data` 16-byte aligned
//!      (cudaMalloc gives 256)
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

}  // namespace stepwise::elementwise::float4_vectors
