//! @file 02_column_partials.cuh
//! @brief Normalization backward step 2 (beyond the sources): the parameters' gradients summed by tiles of rows and
//!        columns, every SM busy, then a second small kernel that adds each column's partial sums in a fixed order.
//!
//! Step 1 gives each column of dgamma and dbeta one thread, which walks down all the rows: `num_cols` threads in
//! all, 128 at 65536 x 128, a few warps for a GPU of 132 SMs, each waiting on one load after another. Here the
//! matrix is cut into tiles of 32 columns by `partial_rows` rows. A block of 32 x 8 threads sums one tile: each
//! warp reads 32 neighbouring columns of a row (128 contiguous bytes of fp32), the 8 warps take every 8th row of the
//! tile, and the block adds its warps' sums through shared memory into one partial sum per column. A second kernel
//! adds each column's partial sums, tile after tile in order: the same bits on every run, where atomics would add in
//! the order the blocks finish. dx is computed as in step 1.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace stepwise::normalization_backward::column_partials {

constexpr int row_block_threads = 256;     //!< threads of a row's block (the means)
constexpr int value_block_threads = 256;   //!< threads of the blocks of dx
constexpr int tile_columns = 32;           //!< columns of a tile: a warp's, 128 bytes of fp32 a row
constexpr int tile_warps = 8;              //!< warps of a tile's block, each taking every 8th row of the tile
constexpr int partial_rows = 256;          //!< rows of a tile: one partial sum per column of each
constexpr int column_block_threads = 256;  //!< threads (columns) of the blocks that add the partial sums

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

//! @brief (x - center) rstd, 0 where x is the center and rstd infinite (epsilon 0 and a row of equal values: the
//!        forward gave beta there, and its gradient has no xhat term).
__device__ __forceinline__ float normalized(float x, float center, float rstd)
{
    const float difference = x - center;
    return difference == 0.0f && isinf(rstd) ? 0.0f : difference * rstd;
}

//! @brief Row `blockIdx.x`'s mean(g) (LayerNorm; `d_mean` nullptr: RMSNorm, 0) and mean(g xhat), into `d_terms`
//!        (two floats a row), reduced by a tree in shared memory.
template <typename T>
__global__ void __launch_bounds__(row_block_threads)
    row_terms_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean, const float* d_rstd,
                     float* d_terms, int num_cols)
{
    __shared__ float sums_g[row_block_threads];
    __shared__ float sums_g_xhat[row_block_threads];
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float center = d_mean != nullptr ? d_mean[blockIdx.x] : 0.0f, rstd = d_rstd[blockIdx.x];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += row_block_threads) {
        const float g = to_float(d_dy[first + j]) * d_gamma[j];
        sum_g += g;
        sum_g_xhat += g * normalized(to_float(d_x[first + j]), center, rstd);
    }
    sums_g[threadIdx.x] = sum_g;
    sums_g_xhat[threadIdx.x] = sum_g_xhat;
    __syncthreads();
    for (int half = row_block_threads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            sums_g[threadIdx.x] += sums_g[threadIdx.x + half];
            sums_g_xhat[threadIdx.x] += sums_g_xhat[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        d_terms[2 * blockIdx.x] = d_mean != nullptr ? sums_g[0] / num_cols : 0.0f;
        d_terms[2 * blockIdx.x + 1] = sums_g_xhat[0] / num_cols;
    }
}

//! @brief dx of every value, a thread each (a grid-stride loop over the matrix).
template <typename T>
__global__ void __launch_bounds__(value_block_threads)
    dx_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean, const float* d_rstd,
              const float* d_terms, T* d_dx, int num_rows, int num_cols)
{
    const std::int64_t total = std::int64_t{num_rows} * num_cols;
    for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
         i += std::int64_t{gridDim.x} * blockDim.x) {
        const std::int64_t row = i / num_cols;
        const int col = static_cast<int>(i - row * num_cols);
        const float center = d_mean != nullptr ? d_mean[row] : 0.0f, rstd = d_rstd[row];
        const float g = to_float(d_dy[i]) * d_gamma[col];
        const float xhat = normalized(to_float(d_x[i]), center, rstd);
        d_dx[i] = from_float<T>(rstd * (g - d_terms[2 * row] - xhat * d_terms[2 * row + 1]));
    }
}

//! @brief The partial sums of dgamma (and, `with_beta`, dbeta) over tile `blockIdx.x` (the tiles row by row, each row
//!        of tiles `column_tiles` long): into `d_partials`, a `tiles` x `num_cols` matrix of dgamma's partial sums,
//!        one row per row of tiles, followed by one of dbeta's.
template <typename T>
__global__ void __launch_bounds__(tile_columns * tile_warps)
    partials_kernel(const T* d_x, const T* d_dy, const float* d_mean, const float* d_rstd, float* d_partials,
                    bool with_beta, int num_rows, int num_cols, int tiles, int column_tiles)
{
    __shared__ float sums[2][tile_warps][tile_columns];
    const int tile_row = static_cast<int>(blockIdx.x / column_tiles);
    const int tile_col = static_cast<int>(blockIdx.x % column_tiles);
    const int col = tile_col * tile_columns + static_cast<int>(threadIdx.x);
    const int first_row = tile_row * partial_rows;
    const int last_row = min(first_row + partial_rows, num_rows);
    float dgamma = 0.0f, dbeta = 0.0f;
    if (col < num_cols) {
        for (int row = first_row + static_cast<int>(threadIdx.y); row < last_row; row += tile_warps) {
            const std::size_t at = static_cast<std::size_t>(row) * num_cols + col;
            const float dy = to_float(d_dy[at]);
            dgamma += dy * normalized(to_float(d_x[at]), d_mean != nullptr ? d_mean[row] : 0.0f, d_rstd[row]);
            dbeta += dy;
        }
    }
    sums[0][threadIdx.y][threadIdx.x] = dgamma;
    sums[1][threadIdx.y][threadIdx.x] = dbeta;
    __syncthreads();
    if (threadIdx.y == 0 && col < num_cols) {
        for (int w = 1; w < tile_warps; ++w) {  // the warps in order: the same bits on every run
            dgamma += sums[0][w][threadIdx.x];
            dbeta += sums[1][w][threadIdx.x];
        }
        d_partials[static_cast<std::size_t>(tile_row) * num_cols + col] = dgamma;
        if (with_beta) {
            d_partials[static_cast<std::size_t>(tiles + tile_row) * num_cols + col] = dbeta;
        }
    }
}

//! @brief dgamma (and, `d_dbeta` not nullptr, dbeta) of column `blockIdx.x * blockDim.x + threadIdx.x`: its `tiles`
//!        partial sums added in order.
__global__ void __launch_bounds__(column_block_threads)
    add_partials_kernel(const float* d_partials, float* d_dgamma, float* d_dbeta, int tiles, int num_cols)
{
    const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (col >= num_cols) {
        return;
    }
    float dgamma = 0.0f, dbeta = 0.0f;
    for (int t = 0; t < tiles; ++t) {
        dgamma += d_partials[static_cast<std::size_t>(t) * num_cols + col];
        if (d_dbeta != nullptr) {
            dbeta += d_partials[static_cast<std::size_t>(tiles + t) * num_cols + col];
        }
    }
    d_dgamma[col] = dgamma;
    if (d_dbeta != nullptr) {
        d_dbeta[col] = dbeta;
    }
}

//! @brief The four launches; `d_mean` and `d_dbeta` nullptr: RMSNorm.
template <typename T>
cudaError_t backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x, const T* d_dy,
                     const float* d_gamma, const float* d_mean, const float* d_rstd, T* d_dx, float* d_dgamma,
                     float* d_dbeta, int num_rows, int num_cols, cudaStream_t stream)
{
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (d_x == nullptr || d_dy == nullptr || d_gamma == nullptr || d_rstd == nullptr || d_dx == nullptr ||
        d_dgamma == nullptr || num_rows < 1 || num_cols < 1 || !aligned(d_x, sizeof(T)) || !aligned(d_dy, sizeof(T)) ||
        !aligned(d_dx, sizeof(T)) || !aligned(d_gamma, sizeof(float)) || !aligned(d_rstd, sizeof(float)) ||
        !aligned(d_dgamma, sizeof(float)) || (d_mean != nullptr && !aligned(d_mean, sizeof(float))) ||
        (d_dbeta != nullptr && !aligned(d_dbeta, sizeof(float))) ||
        (d_temp_storage != nullptr && !aligned(d_temp_storage, sizeof(float)))) {
        return cudaErrorInvalidValue;
    }
    // The workspace: each row's two means, then the tiles' partial sums (dgamma's, and dbeta's for LayerNorm).
    const int tiles = (num_rows + partial_rows - 1) / partial_rows;
    const int column_tiles = (num_cols + tile_columns - 1) / tile_columns;
    const std::int64_t tile_blocks = std::int64_t{tiles} * column_tiles;
    if (tile_blocks > std::numeric_limits<int>::max()) {
        return cudaErrorInvalidValue;  // more tiles than a grid takes (a matrix of some 2^44 values)
    }
    const std::size_t terms_bytes = static_cast<std::size_t>(num_rows) * 2 * sizeof(float);
    const std::size_t partial_bytes =
        static_cast<std::size_t>(tiles) * num_cols * (d_dbeta != nullptr ? 2 : 1) * sizeof(float);
    const std::size_t needed = terms_bytes + partial_bytes;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    float* d_terms = static_cast<float*>(d_temp_storage);
    row_terms_kernel<T><<<num_rows, row_block_threads, 0, stream>>>(d_x, d_dy, d_gamma, d_mean, d_rstd, d_terms,
                                                                    num_cols);
    const std::int64_t values = std::int64_t{num_rows} * num_cols;
    const unsigned value_blocks = static_cast<unsigned>(std::min<std::int64_t>(
        (values + value_block_threads - 1) / value_block_threads, std::int64_t{1} << 20));
    dx_kernel<T><<<value_blocks, value_block_threads, 0, stream>>>(d_x, d_dy, d_gamma, d_mean, d_rstd, d_terms, d_dx,
                                                                   num_rows, num_cols);
    float* d_partials = d_terms + static_cast<std::size_t>(num_rows) * 2;
    partials_kernel<T><<<static_cast<unsigned>(tile_blocks), dim3(tile_columns, tile_warps), 0, stream>>>(
        d_x, d_dy, d_mean, d_rstd, d_partials, d_dbeta != nullptr, num_rows, num_cols, tiles, column_tiles);
    const unsigned column_blocks = static_cast<unsigned>((num_cols + column_block_threads - 1) / column_block_threads);
    add_partials_kernel<<<column_blocks, column_block_threads, 0, stream>>>(d_partials, d_dgamma, d_dbeta, tiles,
                                                                           num_cols);
    return cudaGetLastError();
}

//! @brief LayerNorm's backward pass over a row-major `num_rows` x `num_cols` matrix (CUB's two phases).
//! @param d_temp_storage workspace, or nullptr to ask for its size in `temp_storage_bytes`
//! @param temp_storage_bytes the workspace's size in bytes (set on the first phase, checked on the second)
//! @param d_x the forward's input, `num_rows` x `num_cols`, row-major
//! @param d_dy the gradient of the forward's output, as `d_x`
//! @param d_gamma the `num_cols` scales, fp32
//! @param d_mean each row's mean, as the forward saved it (fp32)
//! @param d_rstd each row's 1 / sqrt(var + epsilon), as the forward saved it (fp32)
//! @param d_dx the gradient of x, as `d_x`, apart from every input
//! @param d_dgamma the gradient of gamma (`num_cols`, fp32), overwritten (not added to)
//! @param d_dbeta the gradient of beta (`num_cols`, fp32), overwritten
//! @param num_rows rows (tokens)
//! @param num_cols values a row
//! @param stream the stream of every launch
//! @pre `num_rows >= 1`, `num_cols >= 1`; pointers non-null and aligned to their element type, the workspace to 4
//!      bytes; outputs do not overlap inputs or each other. A NaN or infinity in a row makes its dx NaN and reaches
//!      the parameters' gradients of its columns; a row of equal values saved with an infinite rstd (epsilon 0) has
//!      no xhat term.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
cudaError_t layer_norm_backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x, const T* d_dy,
                                const float* d_gamma, const float* d_mean, const float* d_rstd, T* d_dx,
                                float* d_dgamma, float* d_dbeta, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (d_mean == nullptr || d_dbeta == nullptr) {
        return cudaErrorInvalidValue;
    }
    return backward(d_temp_storage, temp_storage_bytes, d_x, d_dy, d_gamma, d_mean, d_rstd, d_dx, d_dgamma, d_dbeta,
                    num_rows, num_cols, stream);
}

//! @brief RMSNorm's backward pass: as layer_norm_backward() without the mean and beta.
template <typename T>
cudaError_t rms_norm_backward(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x, const T* d_dy,
                              const float* d_gamma, const float* d_rstd, T* d_dx, float* d_dgamma, int num_rows,
                              int num_cols, cudaStream_t stream = 0)
{
    return backward(d_temp_storage, temp_storage_bytes, d_x, d_dy, d_gamma, static_cast<const float*>(nullptr),
                    d_rstd, d_dx, d_dgamma, static_cast<float*>(nullptr), num_rows, num_cols, stream);
}

}  // namespace stepwise::normalization_backward::column_partials
