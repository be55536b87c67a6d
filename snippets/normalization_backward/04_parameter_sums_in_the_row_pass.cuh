//! @file 04_parameter_sums_in_the_row_pass.cuh
//! @brief Normalization backward step 4 (beyond the sources): the parameters' partial sums taken in the pass that
//!        writes dx, so that x and dy are read once; resident blocks that each take rows in turn, sized so that an
//!        SM holds several.
//!
//! Step 3 reads a row once for dx, and step 2's tiles read x and dy again for dgamma and dbeta. Here the blocks that
//! write dx also add the parameters' terms: as many blocks as the GPU holds at once take rows in turn, and thread t
//! of a block handles the same columns t, t + blockDim.x, ... in every row, so it adds dy xhat (and dy) of its
//! columns into the block's sums in shared memory, which no other thread touches: no atomics and no barrier for
//! them. Each block then writes its sums, one row of partial sums per block, and a second kernel adds each column's
//! partial sums in the order of the blocks: the same bits on every run of a GPU. Step 3 gave a row of 4096 values a
//! block of 1024 threads, one block an SM at its 35 registers; here such a row takes 512 threads of 8 values.
//! Rows longer than `register_row_values`, or whose sums would not fit the GPU's shared memory, keep step 3's two
//! reads and step 2's tiles.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

namespace stepwise::normalization_backward::parameter_sums_in_the_row_pass {

constexpr int warp_threads = 32;
constexpr int max_row_threads = 1024;        //!< the largest block of a row
constexpr int short_values_per_thread = 4;   //!< registers of a row's thread for rows of up to 1024 values
constexpr int middle_values_per_thread = 8;  //!< ... up to 4096, in blocks of up to 512 threads
constexpr int long_values_per_thread = 16;   //!< ... up to 16384
constexpr int register_row_values = max_row_threads * long_values_per_thread;  //!< longest row read once
constexpr int streamed_row_threads = 1024;   //!< threads of the block of a longer row, read twice
constexpr int tile_columns = 32;             //!< columns of a tile of the longer rows: a warp's
constexpr int tile_warps = 8;                //!< warps of a tile's block, each taking every 8th row of the tile
constexpr int partial_rows = 256;            //!< rows of a tile: one partial sum per column of each
constexpr int add_columns = 32;              //!< columns of a block that adds partial sums: a warp's
constexpr int add_warps = 32;                //!< warps of that block, each taking every 32nd partial sum

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

//! @brief The block's sums of `sum_g` and `sum_g_xhat`, in every thread: each warp's by shuffles, then the warps'
//!        sums added in the order of the warps (the same bits on every run); a block may call it once a row.
__device__ __forceinline__ void block_sums(float& sum_g, float& sum_g_xhat)
{
    __shared__ float warp_sums[2][max_row_threads / warp_threads];
    for (int offset = warp_threads / 2; offset > 0; offset /= 2) {
        sum_g += __shfl_xor_sync(0xffffffffu, sum_g, offset);
        sum_g_xhat += __shfl_xor_sync(0xffffffffu, sum_g_xhat, offset);
    }
    const int warp = static_cast<int>(threadIdx.x) / warp_threads, warps = static_cast<int>(blockDim.x) / warp_threads;
    if (threadIdx.x % warp_threads == 0) {
        warp_sums[0][warp] = sum_g;
        warp_sums[1][warp] = sum_g_xhat;
    }
    __syncthreads();
    sum_g = warp_sums[0][0];
    sum_g_xhat = warp_sums[1][0];
    for (int w = 1; w < warps; ++w) {
        sum_g += warp_sums[0][w];
        sum_g_xhat += warp_sums[1][w];
    }
    __syncthreads();  // every thread has read the warps' sums before the block's next row writes them
}

//! @brief Rows `blockIdx.x`, `blockIdx.x + gridDim.x`, ...: each row's dx from registers, as step 3, and the terms of
//!        dgamma (dy xhat) and dbeta (dy) of the thread's columns added into the block's sums in shared memory, which
//!        go to row `blockIdx.x` of `d_partials` (gridDim.x rows of dgamma's, then as many of dbeta's). `d_mean`
//!        nullptr: RMSNorm, no dbeta.
//!        At least one block of 1024 threads an SM: without it ptxas holds the kernel of 4 values a thread to 32
//!        registers, for two such blocks, and spills.
template <typename T, int values_per_thread>
__global__ void __launch_bounds__(max_row_threads, 1)
    row_pass_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean, const float* d_rstd,
                    T* d_dx, float* d_partials, int num_rows, int num_cols)
{
    extern __shared__ float column_sums[];  // dgamma's terms of the block's rows, then dbeta's (LayerNorm)
    const bool with_beta = d_mean != nullptr;
    float* dgamma_sums = column_sums;
    float* dbeta_sums = column_sums + num_cols;
#pragma unroll
    for (int k = 0; k < values_per_thread; ++k) {
        const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
        if (j < num_cols) {
            dgamma_sums[j] = 0.0f;
            if (with_beta) {
                dbeta_sums[j] = 0.0f;
            }
        }
    }
    // 64-bit: the last rows of a matrix of some 2^31 rows plus gridDim.x would pass INT_MAX
    for (std::int64_t row = blockIdx.x; row < num_rows; row += gridDim.x) {
        const std::size_t first = static_cast<std::size_t>(row) * num_cols;
        const float center = with_beta ? d_mean[row] : 0.0f, rstd = d_rstd[row];
        float g[values_per_thread], xhat[values_per_thread];
        float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
        for (int k = 0; k < values_per_thread; ++k) {
            const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
            g[k] = 0.0f;
            xhat[k] = 0.0f;
            if (j < num_cols) {
                const float dy = to_float(d_dy[first + j]);
                g[k] = dy * d_gamma[j];
                xhat[k] = normalized(to_float(d_x[first + j]), center, rstd);
                sum_g += g[k];
                sum_g_xhat += g[k] * xhat[k];
                dgamma_sums[j] += dy * xhat[k];  // this thread's column alone: no other thread adds to it
                if (with_beta) {
                    dbeta_sums[j] += dy;
                }
            }
        }
        block_sums(sum_g, sum_g_xhat);
        const float mean_g = with_beta ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
#pragma unroll
        for (int k = 0; k < values_per_thread; ++k) {
            const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
            if (j < num_cols) {
                d_dx[first + j] = from_float<T>(rstd * (g[k] - mean_g - xhat[k] * mean_g_xhat));
            }
        }
    }
#pragma unroll
    for (int k = 0; k < values_per_thread; ++k) {
        const int j = static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x);
        if (j < num_cols) {
            d_partials[static_cast<std::size_t>(blockIdx.x) * num_cols + j] = dgamma_sums[j];
            if (with_beta) {
                d_partials[static_cast<std::size_t>(gridDim.x + blockIdx.x) * num_cols + j] = dbeta_sums[j];
            }
        }
    }
}

//! @brief dx of row `blockIdx.x`, longer than registers hold: the row read for its sums, then again for dx.
template <typename T>
__global__ void __launch_bounds__(streamed_row_threads)
    dx_streamed_row_kernel(const T* d_x, const T* d_dy, const float* d_gamma, const float* d_mean,
                           const float* d_rstd, T* d_dx, int num_cols)
{
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float center = d_mean != nullptr ? d_mean[blockIdx.x] : 0.0f, rstd = d_rstd[blockIdx.x];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += streamed_row_threads) {
        const float g = to_float(d_dy[first + j]) * d_gamma[j];
        sum_g += g;
        sum_g_xhat += g * normalized(to_float(d_x[first + j]), center, rstd);
    }
    block_sums(sum_g, sum_g_xhat);
    const float mean_g = d_mean != nullptr ? sum_g / num_cols : 0.0f, mean_g_xhat = sum_g_xhat / num_cols;
    for (int j = threadIdx.x; j < num_cols; j += streamed_row_threads) {
        const float g = to_float(d_dy[first + j]) * d_gamma[j];
        const float xhat = normalized(to_float(d_x[first + j]), center, rstd);
        d_dx[first + j] = from_float<T>(rstd * (g - mean_g - xhat * mean_g_xhat));
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

//! @brief dgamma (and, `d_dbeta` not nullptr, dbeta) of the block's 32 columns: `parts` partial sums a column (rows
//!        of `d_partials`, dbeta's after dgamma's), warp w adding parts w, w + 32, ..., then the warps' sums added in
//!        their order: the same bits on every run.
__global__ void __launch_bounds__(add_columns * add_warps)
    add_partials_kernel(const float* d_partials, float* d_dgamma, float* d_dbeta, int parts, int num_cols)
{
    __shared__ float sums[2][add_warps][add_columns];
    const int col = static_cast<int>(blockIdx.x) * add_columns + static_cast<int>(threadIdx.x);
    float dgamma = 0.0f, dbeta = 0.0f;
    if (col < num_cols) {
        for (int p = static_cast<int>(threadIdx.y); p < parts; p += add_warps) {
            dgamma += d_partials[static_cast<std::size_t>(p) * num_cols + col];
            if (d_dbeta != nullptr) {
                dbeta += d_partials[static_cast<std::size_t>(parts + p) * num_cols + col];
            }
        }
    }
    sums[0][threadIdx.y][threadIdx.x] = dgamma;
    sums[1][threadIdx.y][threadIdx.x] = dbeta;
    __syncthreads();
    if (threadIdx.y == 0 && col < num_cols) {
        for (int w = 1; w < add_warps; ++w) {
            dgamma += sums[0][w][threadIdx.x];
            dbeta += sums[1][w][threadIdx.x];
        }
        d_dgamma[col] = dgamma;
        if (d_dbeta != nullptr) {
            d_dbeta[col] = dbeta;
        }
    }
}

//! @brief How many blocks of `kernel` (`threads` threads, `shared_bytes` of dynamic shared memory) the current device
//!        holds at once, and whether it takes that much shared memory at all (0 where not); asked once per device and
//!        configuration, so that a call costs no queries of the device.
template <typename Kernel>
cudaError_t resident_blocks(Kernel kernel, int threads, std::size_t shared_bytes, int& blocks)
{
    static std::mutex mutex;
    static std::map<std::tuple<int, const void*, int, std::size_t>, int> known;
    int device = 0;
    cudaError_t status = cudaGetDevice(&device);
    if (status != cudaSuccess) {
        return status;
    }
    const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), threads, shared_bytes);
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = known.find(key); found != known.end()) {
        blocks = found->second;
        return cudaSuccess;
    }
    int optin = 0, sms = 0, per_sm = 0;
    cudaFuncAttributes attributes{};
    if ((status = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device)) != cudaSuccess ||
        (status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
        (status = cudaFuncGetAttributes(&attributes, kernel)) != cudaSuccess) {
        return status;
    }
    // The most dynamic shared memory a block of the kernel may take beside its static arrays. The limit is set to that,
    // not to this launch's bytes: a later, smaller configuration must not lower it under the ones already counted here.
    const int most_dynamic = optin - static_cast<int>(attributes.sharedSizeBytes);
    if (shared_bytes <= static_cast<std::size_t>(most_dynamic)) {
        if ((status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most_dynamic)) !=
                cudaSuccess ||
            (status = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_bytes)) !=
                cudaSuccess) {
            return status;
        }
    }
    blocks = per_sm * sms;
    known.emplace(key, blocks);
    return cudaSuccess;
}

//! @brief The launches; `d_mean` and `d_dbeta` nullptr: RMSNorm.
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
    const int sums = d_dbeta != nullptr ? 2 : 1;  // dgamma's partial sums, and dbeta's
    // A row's block: whole warps, enough for the row at the fewest registers that hold it, and the kernel for them.
    const int values_per_thread = num_cols <= 1024   ? short_values_per_thread
                                  : num_cols <= 4096 ? middle_values_per_thread
                                                     : long_values_per_thread;
    const auto row_pass = values_per_thread == short_values_per_thread    ? row_pass_kernel<T, short_values_per_thread>
                          : values_per_thread == middle_values_per_thread ? row_pass_kernel<T, middle_values_per_thread>
                                                                          : row_pass_kernel<T, long_values_per_thread>;
    const int threads = ((num_cols + values_per_thread - 1) / values_per_thread + warp_threads - 1) / warp_threads *
                        warp_threads;
    const std::size_t shared_bytes = static_cast<std::size_t>(num_cols) * sums * sizeof(float);
    int resident = 0;
    if (num_cols <= register_row_values) {
        const cudaError_t status = resident_blocks(row_pass, threads, shared_bytes, resident);
        if (status != cudaSuccess) {
            return status;
        }
    }
    const bool one_read = resident > 0;  // else the sums do not fit the GPU's shared memory, or the row its registers
    // The workspace: a row of partial sums for each block of the row pass, or each tile of the longer rows.
    const int parts = one_read ? std::min(num_rows, resident) : (num_rows + partial_rows - 1) / partial_rows;
    const int column_tiles = (num_cols + tile_columns - 1) / tile_columns;
    const std::int64_t tile_blocks = std::int64_t{parts} * column_tiles;
    if (!one_read && tile_blocks > std::numeric_limits<int>::max()) {
        return cudaErrorInvalidValue;  // more tiles than a grid takes (a matrix of some 2^44 values)
    }
    const std::size_t needed = static_cast<std::size_t>(parts) * num_cols * sums * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    float* d_partials = static_cast<float*>(d_temp_storage);
    if (one_read) {
        row_pass<<<parts, threads, shared_bytes, stream>>>(d_x, d_dy, d_gamma, d_mean, d_rstd, d_dx, d_partials,
                                                           num_rows, num_cols);
    } else {
        dx_streamed_row_kernel<T><<<num_rows, streamed_row_threads, 0, stream>>>(d_x, d_dy, d_gamma, d_mean, d_rstd,
                                                                                 d_dx, num_cols);
        partials_kernel<T><<<static_cast<unsigned>(tile_blocks), dim3(tile_columns, tile_warps), 0, stream>>>(
            d_x, d_dy, d_mean, d_rstd, d_partials, d_dbeta != nullptr, num_rows, num_cols, parts, column_tiles);
    }
    const unsigned add_blocks = static_cast<unsigned>((num_cols + add_columns - 1) / add_columns);
    add_partials_kernel<<<add_blocks, dim3(add_columns, add_warps), 0, stream>>>(d_partials, d_dgamma, d_dbeta, parts,
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

}  // namespace stepwise::normalization_backward::parameter_sums_in_the_row_pass
