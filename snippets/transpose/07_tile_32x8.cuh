//! @file 07_tile_32x8.cuh
//! @brief Transpose step 7 (beyond the source): a padded 32 x 32 tile moved by 32 x 8 threads, four
//!        elements each.
//!
//! Step 6's small tile means a warp reads and writes only 64-byte pieces of
//! a row: half a 128-byte line, so sectors of a line are fetched by two
//! blocks at different times. Back to 32 x 32 tiles, whole lines, but with
//! 256 threads a block: each thread moves four elements, eight rows apart,
//! so it has four loads in flight before the barrier instead of one. The
//! tile keeps step 6's padding: reading a column of `tile[32][33]`, the 32
//! lanes hit 32 different banks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::transpose::tile_32x8 {

constexpr int tile_dim = 32;    //!< a block holds one tile_dim x tile_dim tile
constexpr int block_rows = 8;   //!< a block is tile_dim x block_rows threads
static_assert(tile_dim % block_rows == 0, "each thread moves tile_dim / block_rows elements");

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

//! @brief Block (bx, by) reads the input tile at rows by * tile_dim.., columns bx * tile_dim.. and writes it,
//!        transposed, at output rows bx * tile_dim.., columns by * tile_dim...
static __global__ void transpose_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    __shared__ float tile[tile_dim][tile_dim + 1];
    const int x = threadIdx.x;
    const int y = threadIdx.y;

    const int in_col = blockIdx.x * tile_dim + x;
    const int in_row = blockIdx.y * tile_dim + y;
#pragma unroll
    for (int k = 0; k < tile_dim; k += block_rows) {
        if (in_row + k < num_rows && in_col < num_cols) {
            tile[y + k][x] = d_in[static_cast<std::size_t>(in_row + k) * num_cols + in_col];
        }
    }
    __syncthreads();

    const int out_col = blockIdx.y * tile_dim + x;
    const int out_row = blockIdx.x * tile_dim + y;
#pragma unroll
    for (int k = 0; k < tile_dim; k += block_rows) {
        if (out_row + k < num_cols && out_col < num_rows) {
            d_out[static_cast<std::size_t>(out_row + k) * num_rows + out_col] = tile[x][y + k];
        }
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
    const dim3 block(tile_dim, block_rows);
    const dim3 grid((num_cols + tile_dim - 1) / tile_dim, (num_rows + tile_dim - 1) / tile_dim);
    transpose_kernel<<<grid, block, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::transpose::tile_32x8
