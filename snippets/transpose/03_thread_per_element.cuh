//! @file 03_thread_per_element.cuh
//! @brief Transpose step 3: one thread per element, in 32 x 32 blocks.
//!
//! Step 2 had one thread per row, too few to fill the GPU, each walking a
//! whole column. Here every element gets a thread: a block of 32 x 32
//! threads covers a 32 x 32 tile and thread (x, y) moves element
//! (row y, column x) of it. Reads stay coalesced (a warp reads one row of the
//! tile); writes still are not: a warp writes one column of the output tile,
//! 32 floats a row apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::transpose::thread_per_element {

constexpr int tile_dim = 32;  //!< a block is tile_dim x tile_dim threads, one per element of its tile

//! @brief What every launcher checks: buffers given and not overlapping (the transpose is not in place),
//!        both dimensions positive.
inline bool valid_arguments(const float* d_in, const float* d_out, int num_rows, int num_cols)
{
    if (d_in == nullptr || d_out == nullptr || num_rows <= 0 || num_cols <= 0) {
        return false;
    }
    const std::size_t bytes = static_cast<std::size_t>(num_rows) * num_cols * sizeof(float);
    const auto in = reinterpret_cast<std::uintptr_t>(d_in);
    const auto out = reinterpret_cast<std::uintptr_t>(d_out);
    return in + bytes <= out || out + bytes <= in;
}

//! @brief Thread (x, y) of block (bx, by) moves input element (by * tile_dim + y, bx * tile_dim + x).
static __global__ void transpose_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    const int col = blockIdx.x * tile_dim + threadIdx.x;
    const int row = blockIdx.y * tile_dim + threadIdx.y;
    if (row < num_rows && col < num_cols) {
        d_out[static_cast<std::size_t>(col) * num_rows + row] = d_in[static_cast<std::size_t>(row) * num_cols + col];
    }
}

//! @brief Writes the transpose of `d_in` to `d_out`.
//! @param[in]  d_in     `num_rows` x `num_cols` floats, row-major
//! @param[out] d_out    `num_cols` x `num_rows` floats, row-major: `d_out[c][r] = d_in[r][c]`
//! @param[in]  num_rows rows of `d_in`, at most 65535 * tile_dim
//! @param[in]  num_cols columns of `d_in`
//! @param[in]  stream   stream to launch on
//! @pre `0 < num_rows <= 65535 * tile_dim`, `num_cols > 0`; `d_in` and `d_out` do not overlap
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t transpose(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (!valid_arguments(d_in, d_out, num_rows, num_cols) || num_rows > 65535 * tile_dim) {
        return cudaErrorInvalidValue;
    }
    const dim3 block(tile_dim, tile_dim);
    const dim3 grid((num_cols + tile_dim - 1) / tile_dim, (num_rows + tile_dim - 1) / tile_dim);
    transpose_kernel<<<grid, block, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::transpose::thread_per_element
