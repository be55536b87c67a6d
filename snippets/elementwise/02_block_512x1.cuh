//! @file 02_block_512x1.cuh
//! @brief Element-wise step 2: (512, 1) blocks, one thread per element along x.
//!
//! Fixes step 1's access pattern: a block now spans 512 consecutive columns
//! of one row, so a warp reads 32 consecutive floats (four 32-byte sectors)
//! instead of 32 sectors, and the load/store units stop being the bottleneck.
//! The odd/even branch stays: within a warp, every other lane takes the
//! other side, so each warp executes both `logf` and `cosf`.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::block_512x1 {

constexpr int block_x = 512;  //!< threads per block along x, the launch shape of the update kernel

//! @brief `v + sqrt(log(v) + 1)`: the update of an odd column.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(logf(v) + 1.f); }

//! @brief `v + sqrt(cos(v) + 1)`: the update of an even column.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(cosf(v) + 1.f); }

//! @brief One thread per element; a block is 512 consecutive columns of one row.
static __global__ void update_kernel(float* d_data, int dimx, int dimy)
{
    const int ix = blockIdx.x * blockDim.x + threadIdx.x;
    const int iy = blockIdx.y;
    if (ix >= dimx || iy >= dimy) {
        return;
    }
    const std::size_t idx = static_cast<std::size_t>(iy) * dimx + ix;

    const float value = d_data[idx];
    d_data[idx] = (ix % 2) ? odd_column_update(value) : even_column_update(value);
}

//! @brief Updates a `dimx` x `dimy` row-major array in place.
//! @param[in,out] d_data device array of `dimx * dimy` floats
//! @param[in] dimx   number of columns (the fast index)
//! @param[in] dimy   number of rows, at most 65535 (one grid row per array row)
//! @param[in] stream stream to launch on
//! @pre `dimx > 0`, `0 < dimy <= 65535`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t update(float* d_data, int dimx, int dimy, cudaStream_t stream = 0)
{
    if (d_data == nullptr || dimx <= 0 || dimy <= 0 || dimy > 65535) {
        return cudaErrorInvalidValue;
    }
    const dim3 block(block_x, 1);
    const dim3 grid((dimx + block_x - 1) / block_x, dimy);
    update_kernel<<<grid, block, 0, stream>>>(d_data, dimx, dimy);
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise::block_512x1
