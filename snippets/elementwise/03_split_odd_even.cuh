//! @file 03_split_odd_even.cuh
//! @brief Element-wise step 3: two kernels, one per column parity, stride 2.
//!
//! Removes step 2's divergence: each kernel evaluates only one of the two
//! functions, so no warp runs both `logf` and `cosf`. The price: a warp now
//! touches every other float, so each kernel pulls whole sectors of which it
//! uses half, and the two launches together move every sector twice.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::split_odd_even {

constexpr int block_x = 512;  //!< threads per block along x, the launch shape of both kernels

//! @brief `v + sqrt(log(v) + 1)`: the update of an odd column.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(logf(v) + 1.f); }

//! @brief `v + sqrt(cos(v) + 1)`: the update of an even column.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(cosf(v) + 1.f); }

//! @brief Updates the odd columns only: thread `p` of a row handles column `2p + 1`.
static __global__ void update_odd_columns_kernel(float* d_data, int dimx, int dimy)
{
    const int ix = 2 * (blockIdx.x * blockDim.x + threadIdx.x) + 1;
    const int iy = blockIdx.y;
    if (ix >= dimx || iy >= dimy) {
        return;
    }
    const std::size_t idx = static_cast<std::size_t>(iy) * dimx + ix;
    d_data[idx] = odd_column_update(d_data[idx]);
}

//! @brief Updates the even columns only: thread `p` of a row handles column `2p`.
static __global__ void update_even_columns_kernel(float* d_data, int dimx, int dimy)
{
    const int ix = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    const int iy = blockIdx.y;
    if (ix >= dimx || iy >= dimy) {
        return;
    }
    const std::size_t idx = static_cast<std::size_t>(iy) * dimx + ix;
    d_data[idx] = even_column_update(d_data[idx]);
}

//! @brief Updates a `dimx` x `dimy` row-major array in place with two launches.
//! @param[in,out] d_data device array of `dimx * dimy` floats
//! @param[in] dimx   number of columns (the fast index)
//! @param[in] dimy   number of rows, at most 65535
//! @param[in] stream stream to launch on
//! @pre `dimx > 0`, `0 < dimy <= 65535`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the first launch error
inline cudaError_t update(float* d_data, int dimx, int dimy, cudaStream_t stream = 0)
{
    if (d_data == nullptr || dimx <= 0 || dimy <= 0 || dimy > 65535) {
        return cudaErrorInvalidValue;
    }
    const int column_pairs = (dimx + 1) / 2;
    const dim3 block(block_x, 1);
    const dim3 grid((column_pairs + block_x - 1) / block_x, dimy);
    update_odd_columns_kernel<<<grid, block, 0, stream>>>(d_data, dimx, dimy);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) {
        return error;
    }
    update_even_columns_kernel<<<grid, block, 0, stream>>>(d_data, dimx, dimy);
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise::split_odd_even
