//! @file 01_three_kernels.cuh
//! @brief Normalization backward step 1 (beyond the sources): the formulas in three kernels: each row's two means,
//!        then dx value by value, then the parameters' gradients a column per thread.
//!
//! With xhat = (x - mean) rstd (RMSNorm: x rstd) and g = dy gamma, from the forward's saved mean and rstd:
//!
//!     dx     = rstd (g - mean(g) - xhat mean(g xhat))     (RMSNorm: without mean(g))
//!     dgamma = sum over rows of dy xhat,   dbeta = sum over rows of dy
//!
//! dx needs two means over its row; dgamma and dbeta are sums down the columns, across every row: the opposite
//! direction. Written as they read, they are three kernels: a block per row reduces the row's two means into the
//! workspace; a thread per value writes dx; a thread per column walks down its column for dgamma and dbeta. x and dy
//! are read three times. gamma, dgamma and dbeta are fp32 in both types: a parameter's gradient sums thousands of
//! rows, which bf16's 8 bits of mantissa would lose, and optimizers keep parameters in fp32 beside their bf16 copies.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::normalization_backward::three_kernels {

constexpr int row_block_threads = 256;     //!< threads of a row's block (the means)
constexpr int value_block_threads = 256;   //!< threads of the blocks of dx
constexpr int column_block_threads = 256;  //!< threads (columns) of the blocks of the parameters' gradients

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

//! @brief dgamma (and, `d_dbeta` not nullptr, dbeta) of column `blockIdx.x * blockDim.x + threadIdx.x`: the thread
//!        walks down its column, row by row (neighbouring threads read neighbouring columns of a row).
template <typename T>
__global__ void __launch_bounds__(column_block_threads)
    parameter_gradients_kernel(const T* d_x, const T* d_dy, const float* d_mean, const float* d_rstd,
                               float* d_dgamma, float* d_dbeta, int num_rows, int num_cols)
{
    const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (col >= num_cols) {
        return;
    }
    float dgamma = 0.0f, dbeta = 0.0f;
    for (int row = 0; row < num_rows; ++row) {
        const std::size_t at = static_cast<std::size_t>(row) * num_cols + col;
        const float dy = to_float(d_dy[at]);
        dgamma += dy * normalized(to_float(d_x[at]), d_mean != nullptr ? d_mean[row] : 0.0f, d_rstd[row]);
        dbeta += dy;
    }
    d_dgamma[col] = dgamma;
    if (d_dbeta != nullptr) {
        d_dbeta[col] = dbeta;
    }
}

//! @brief The three launches; `d_mean` and `d_dbeta` nullptr: RMSNorm.
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
    const std::size_t needed = static_cast<std::size_t>(num_rows) * 2 * sizeof(float);  // each row's two means
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
    const unsigned column_blocks = static_cast<unsigned>((num_cols + column_block_threads - 1) / column_block_threads);
    parameter_gradients_kernel<T><<<column_blocks, column_block_threads, 0, stream>>>(d_x, d_dy, d_mean, d_rstd,
                                                                                     d_dgamma, d_dbeta, num_rows,
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

}  // namespace stepwise::normalization_backward::three_kernels
