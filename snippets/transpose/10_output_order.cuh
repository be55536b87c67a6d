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
//!
//! As the chapter's final step it also takes any shape and any 4-byte-aligned
//! pointers: where a dimension is not a multiple of 4 or a pointer not 16-byte
//! aligned, the rows do not start on float4 boundaries, and a kernel with
//! the same block order moves single floats, in tiles taller than wide.
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

//! The single-float kernel's tile: 128 input rows by 32 columns, so that each block writes 512-byte runs of the
//! output's rows. Rows that start on no 16-byte boundary split sectors at both ends of every run a block writes;
//! long runs make those splits rare.
constexpr int scalar_tile_rows = 128;
constexpr int scalar_tile_cols = 32;
constexpr int scalar_threads = 256;

//! @brief transpose_kernel for any shape and 4-byte-aligned rows, one float at a time: block (bx, by) reads the
//!        input tile at rows bx * scalar_tile_rows.., columns by * scalar_tile_cols.., all loads issued before the
//!        first shared-memory store.
static __global__ void __launch_bounds__(scalar_threads)
    transpose_scalar_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    constexpr int rows_at_once = scalar_threads / scalar_tile_cols;  // reading: a warp reads 32 floats of a row
    constexpr int cols_at_once = scalar_threads / scalar_tile_rows;  // writing: a warp writes 32 floats of a row
    static_assert(scalar_tile_cols == 32 && scalar_threads % scalar_tile_rows == 0, "whole warps per row");
    __shared__ float tile[scalar_tile_rows][scalar_tile_cols + 1];
    const int row0 = blockIdx.x * scalar_tile_rows;
    const int col0 = blockIdx.y * scalar_tile_cols;

    const int col = threadIdx.x % scalar_tile_cols;
    const int row = threadIdx.x / scalar_tile_cols;
    float v[scalar_tile_rows / rows_at_once];
#pragma unroll
    for (int k = 0; k < scalar_tile_rows / rows_at_once; ++k) {
        const int in_row = row0 + row + k * rows_at_once;
        v[k] = in_row < num_rows && col0 + col < num_cols
                   ? d_in[static_cast<std::size_t>(in_row) * num_cols + col0 + col]
                   : 0.f;
    }
#pragma unroll
    for (int k = 0; k < scalar_tile_rows / rows_at_once; ++k) {
        tile[row + k * rows_at_once][col] = v[k];
    }
    __syncthreads();

    const int out_col = threadIdx.x % scalar_tile_rows;  // the input row this thread writes out as an output column
    const int first = threadIdx.x / scalar_tile_rows;
#pragma unroll
    for (int k = 0; k < scalar_tile_cols / cols_at_once; ++k) {
        const int c = first + k * cols_at_once;
        if (col0 + c < num_cols && row0 + out_col < num_rows) {
            d_out[static_cast<std::size_t>(col0 + c) * num_rows + row0 + out_col] = tile[out_col][c];
        }
    }
}

//! @brief Whether `p` is a multiple of `bytes`.
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief The tiles of `tile` that cover `count` elements, counted in 64 bits: `count + tile - 1` overflows an int
//!        near INT_MAX.
constexpr unsigned tiles_of(int count, int tile)
{
    return static_cast<unsigned>((static_cast<long long>(count) + tile - 1) / tile);
}
static_assert(tiles_of(2147483647, tile_dim) == (1u << 25), "INT_MAX rows: 2^25 tiles of 64, no overflow");

//! @brief Writes the transpose of `d_in` to `d_out`.
//! @param[in]  d_in     `num_rows` x `num_cols` floats, row-major
//! @param[out] d_out    `num_cols` x `num_rows` floats, row-major: `d_out[c][r] = d_in[r][c]`
//! @param[in]  num_rows rows of `d_in`, any up to INT_MAX
//! @param[in]  num_cols columns of `d_in`, at most 65535 * scalar_tile_cols (the grid's y limit)
//! @param[in]  stream   stream to launch on
//! @pre `num_rows` and `num_cols` positive, `num_cols <= 65535 * scalar_tile_cols`; `d_in` and `d_out` 4-byte
//!      aligned and not overlapping. Both dimensions multiples of 4 and both pointers 16-byte aligned (cudaMalloc's
//!      are) take the float4 kernel; anything else the single-float one.
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t transpose(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (!valid_arguments(d_in, d_out, num_rows, num_cols) || num_cols > 65535 * scalar_tile_cols ||
        !aligned(d_in, alignof(float)) || !aligned(d_out, alignof(float))) {
        return cudaErrorInvalidValue;
    }
    const bool float4_rows = num_rows % 4 == 0 && num_cols % 4 == 0 && aligned(d_in, alignof(float4)) &&
                             aligned(d_out, alignof(float4));
    if (float4_rows) {
        const dim3 grid(tiles_of(num_rows, tile_dim), tiles_of(num_cols, tile_dim));
        transpose_kernel<<<grid, block_threads, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    } else {
        const dim3 grid(tiles_of(num_rows, scalar_tile_rows), tiles_of(num_cols, scalar_tile_cols));
        transpose_scalar_kernel<<<grid, scalar_threads, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    }
    return cudaGetLastError();
}

}  // namespace stepwise::transpose::output_order
