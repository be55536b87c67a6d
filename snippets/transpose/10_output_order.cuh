//! @file 10_output_order.cuh
//! @brief Transpose step 10 (beyond the source): blocks ordered along the output's rows.
//!
//! The GPU starts blocks roughly in the order of `blockIdx.x`. In step 9,
//! neighbouring blocks read neighbouring tiles of the same input rows and
//! write them to output rows 64 apart. Swapping the roles of `blockIdx.x` and
//! `blockIdx.y` makes neighbouring blocks write neighbouring tiles of the same
//! output rows (and read tiles of the same input columns): the writes of the
//! blocks running at one time land close together, where the DRAM can merge
//! them. Everything else is step 9.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::transpose::output_order {

constexpr int tile_dim = 64;                               //!< a block holds one tile_dim x tile_dim tile
constexpr int block_threads = 128;                         //!< threads per block
constexpr int quads_per_row = tile_dim / 4;                //!< float4s in a tile row: the threads reading it
constexpr int rows_per_pass = block_threads / quads_per_row;  //!< tile rows the block reads at once
constexpr int passes = tile_dim / rows_per_pass;           //!< float4s each thread moves
static_assert(block_threads % quads_per_row == 0 && tile_dim % rows_per_pass == 0, "whole rows, whole passes");

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

//! @brief Block (bx, by) reads the input tile at rows bx * tile_dim.., columns by * tile_dim.. and writes it,
//!        transposed, at output rows by * tile_dim.., columns bx * tile_dim...
static __global__ void __launch_bounds__(block_threads)
    transpose_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    __shared__ float tile[tile_dim][tile_dim + 1];
    const int quad = (threadIdx.x % quads_per_row) * 4;  // reading: this thread's tile column; writing: tile row
    const int row = threadIdx.x / quads_per_row;         // reading: tile row; writing: tile column
    const int row0 = blockIdx.x * tile_dim;  // consecutive blocks: consecutive input row tiles, that is,
    const int col0 = blockIdx.y * tile_dim;  // consecutive column tiles of the same output rows

    float4 v[passes];  // every load issued before the first shared-memory store
#pragma unroll
    for (int k = 0; k < passes; ++k) {
        const int in_row = row0 + row + k * rows_per_pass;
        v[k] = in_row < num_rows && col0 + quad < num_cols
                   ? *reinterpret_cast<const float4*>(d_in + static_cast<std::size_t>(in_row) * num_cols + col0 + quad)
                   : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int k = 0; k < passes; ++k) {
        float* t = &tile[row + k * rows_per_pass][quad];
        t[0] = v[k].x;
        t[1] = v[k].y;
        t[2] = v[k].z;
        t[3] = v[k].w;
    }
    __syncthreads();

#pragma unroll
    for (int k = 0; k < passes; ++k) {
        const int c = row + k * rows_per_pass;  // the input column this thread writes out as an output row
        const int out_row = col0 + c;
        if (out_row < num_cols && row0 + quad < num_rows) {
            const float4 w = make_float4(tile[quad][c], tile[quad + 1][c], tile[quad + 2][c], tile[quad + 3][c]);
            *reinterpret_cast<float4*>(d_out + static_cast<std::size_t>(out_row) * num_rows + row0 + quad) = w;
        }
    }
}

//! @brief Writes the transpose of `d_in` to `d_out`.
//! @param[in]  d_in     `num_rows` x `num_cols` floats, row-major, 16-byte aligned
//! @param[out] d_out    `num_cols` x `num_rows` floats, row-major: `d_out[c][r] = d_in[r][c]`, 16-byte aligned
//! @param[in]  num_rows rows of `d_in`: a multiple of 4
//! @param[in]  num_cols columns of `d_in`: a multiple of 4, at most 65535 * tile_dim
//! @param[in]  stream   stream to launch on
//! @pre `num_rows` and `num_cols` positive multiples of 4, `num_cols <= 65535 * tile_dim`; `d_in` and `d_out`
//!      16-byte aligned (cudaMalloc's are) and not overlapping
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t transpose(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (!valid_arguments(d_in, d_out, num_rows, num_cols) || num_rows % 4 != 0 || num_cols % 4 != 0 ||
        num_cols > 65535 * tile_dim || reinterpret_cast<std::uintptr_t>(d_in) % alignof(float4) != 0 ||
        reinterpret_cast<std::uintptr_t>(d_out) % alignof(float4) != 0) {
        return cudaErrorInvalidValue;
    }
    const dim3 grid((num_rows + tile_dim - 1) / tile_dim, (num_cols + tile_dim - 1) / tile_dim);
    transpose_kernel<<<grid, block_threads, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::transpose::output_order
