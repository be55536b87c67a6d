//! @file 01_original_kernel_a.cuh
//! @brief Element-wise step 1: the assignment's kernel A, launched as given
//!        with (1, 512) blocks.
//!
//! Every element of a 2-D row-major array is updated in place: odd columns
//! get `v += sqrt(log(v) + 1)`, even columns `v += sqrt(cos(v) + 1)`.
//! Each block is one column wide, so the 32 threads of a warp touch 32
//! different rows: 32 memory sectors for 128 useful bytes.
//! Our changes to the assignment's code: the grid rounds up and the kernel
//! guards its rows, so `dimy` need not be a multiple of 512; the index is
//! 64-bit; the two updates are named functions, spelled the same in every
//! step, so that the diff between two steps shows only the optimization.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::original_kernel_a {

constexpr int block_y = 512;  //!< threads per block along y, the launch shape of the update kernel

//! @brief `v + sqrt(log(v) + 1)`: the update of an odd column.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(logf(v) + 1.f); }

//! @brief `v + sqrt(cos(v) + 1)`: the update of an even column.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(cosf(v) + 1.f); }

//! @brief Kernel A: one thread per element; a block is one column of 512 rows.
static __global__ void update_kernel(float* d_data, int dimx, int dimy)
{
    const int ix = blockIdx.x;
    const int iy = blockIdx.y * blockDim.y + threadIdx.y;
    if (iy >= dimy) {
        return;
    }
    const std::size_t idx = static_cast<std::size_t>(iy) * dimx + ix;

    float value = d_data[idx];
    if (ix % 2) {
        value = odd_column_update(value);
    } else {
        value = even_column_update(value);
    }
    d_data[idx] = value;
}

//! @brief Updates a `dimx` x `dimy` row-major array in place.
//! @param[in,out] d_data device array of `dimx * dimy` floats
//! @param[in] dimx   number of columns (the fast index)
//! @param[in] dimy   number of rows
//! @param[in] stream stream to launch on
//! @pre `dimx > 0`, `dimy > 0`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t update(float* d_data, int dimx, int dimy, cudaStream_t stream = 0)
{
    if (d_data == nullptr || dimx <= 0 || dimy <= 0) {
        return cudaErrorInvalidValue;
    }
    const dim3 block(1, block_y);
    const dim3 grid(dimx, (dimy + block_y - 1) / block_y);
    update_kernel<<<grid, block, 0, stream>>>(d_data, dimx, dimy);
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise::original_kernel_a
