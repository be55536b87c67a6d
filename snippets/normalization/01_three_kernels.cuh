//! @file 01_three_kernels.cuh
//! @brief Normalization step 1 (beyond the sources): one thread per row, a kernel per pass: LayerNorm's mean, its
//!        variance, then the output; RMSNorm's mean square, then the output.
//!
//! LayerNorm is y = (x - mean) / sqrt(var + eps) * gamma + beta over each
//! row; RMSNorm is y = x / sqrt(mean(x^2) + eps) * gamma. Written as loops
//! over the row, each pass becomes a kernel in which one thread walks one
//! whole row. LayerNorm keeps each row's mean and 1/std (`rstd`) as outputs,
//! as training frameworks do; RMSNorm's 1/rms waits in the workspace. The
//! 32 threads of a warp read 32 rows `num_cols` values apart: every load is
//! its own memory transaction, and the row is read three times (LayerNorm)
//! or twice (RMSNorm).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::normalization::three_kernels {

constexpr int block_threads = 256;  //!< threads (rows) per block

//! @brief `d_mean[r]`: the mean of row r.
static __global__ void mean_kernel(const float* d_in, float* d_mean, int num_rows, int num_cols)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float* x = d_in + row * num_cols;
    float sum = 0.0f;
    for (int j = 0; j < num_cols; ++j) {
        sum += x[j];
    }
    d_mean[row] = sum / num_cols;
}

//! @brief `d_rstd[r]`: 1 / sqrt(variance + epsilon) of row r, the variance taken around `d_mean[r]`.
static __global__ void rstd_kernel(const float* d_in, const float* d_mean, float* d_rstd, int num_rows, int num_cols,
                                   float epsilon)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float* x = d_in + row * num_cols;
    const float mean = d_mean[row];
    float sum = 0.0f;
    for (int j = 0; j < num_cols; ++j) {
        sum += (x[j] - mean) * (x[j] - mean);
    }
    d_rstd[row] = rsqrtf(sum / num_cols + epsilon);
}

//! @brief `d_rstd[r]`: 1 / sqrt(mean(x^2) + epsilon) of row r.
static __global__ void rms_kernel(const float* d_in, float* d_rstd, int num_rows, int num_cols, float epsilon)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float* x = d_in + row * num_cols;
    float sum = 0.0f;
    for (int j = 0; j < num_cols; ++j) {
        sum += x[j] * x[j];
    }
    d_rstd[row] = rsqrtf(sum / num_cols + epsilon);
}

//! @brief y = (x - mean) * rstd * gamma + beta along row r; `d_mean` nullptr: mean 0, `d_beta` nullptr: beta 0
//!        (RMSNorm).
static __global__ void normalize_kernel(const float* d_in, const float* d_gamma, const float* d_beta,
                                        const float* d_mean, const float* d_rstd, float* d_out, int num_rows,
                                        int num_cols)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float* x = d_in + row * num_cols;
    float* y = d_out + row * num_cols;
    const float mean = d_mean != nullptr ? d_mean[row] : 0.0f;
    const float rstd = d_rstd[row];
    for (int j = 0; j < num_cols; ++j) {
        y[j] = (x[j] - mean) * rstd * d_gamma[j] + (d_beta != nullptr ? d_beta[j] : 0.0f);
    }
}

//! @brief The launchers' common checks; the grid of one thread per row.
inline bool valid(const void* d_in, const void* d_gamma, const void* d_out, int num_rows, int num_cols, float epsilon)
{
    return d_in != nullptr && d_gamma != nullptr && d_out != nullptr && num_rows >= 1 && num_cols >= 1 &&
           epsilon >= 0.0f;
}
inline unsigned row_blocks(int num_rows) { return static_cast<unsigned>((num_rows + block_threads - 1) / block_threads); }

//! @brief LayerNorm of each row of a row-major `num_rows` x `num_cols` matrix:
//!        y = (x - mean) / sqrt(var + epsilon) * gamma + beta, with the row's mean and variance (the mean of
//!        (x - mean)^2). Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace (unused: this step needs none), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma, d_beta `num_cols` values each: the scale and shift of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[out] d_mean, d_rstd `num_rows` values each: each row's mean and 1 / sqrt(var + epsilon)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the variance
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; squares of x - mean stay below fp32's largest (about
//!      3.4e38). A NaN in a row makes the row's outputs NaN.
//! @return `cudaErrorInvalidValue` if a precondition fails, else the first launch error
inline cudaError_t layer_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                              const float* d_gamma, const float* d_beta, float* d_out, float* d_mean, float* d_rstd,
                              int num_rows, int num_cols, float epsilon, cudaStream_t stream = 0)
{
    if (!valid(d_in, d_gamma, d_out, num_rows, num_cols, epsilon) || d_beta == nullptr || d_mean == nullptr ||
        d_rstd == nullptr) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    const unsigned blocks = row_blocks(num_rows);
    mean_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_mean, num_rows, num_cols);
    rstd_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_mean, d_rstd, num_rows, num_cols, epsilon);
    normalize_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_gamma, d_beta, d_mean, d_rstd, d_out, num_rows,
                                                           num_cols);
    return cudaGetLastError();
}

//! @brief RMSNorm of each row of a row-major `num_rows` x `num_cols` matrix: y = x / sqrt(mean(x^2) + epsilon) *
//!        gamma. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (each row's 1/rms), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma `num_cols` values: the scale of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the mean square
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`, `d_temp_storage` 4-byte aligned; squares of x stay below
//!      fp32's largest. A NaN in a row makes the row NaN.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
inline cudaError_t rms_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                            const float* d_gamma, float* d_out, int num_rows, int num_cols, float epsilon,
                            cudaStream_t stream = 0)
{
    if (!valid(d_in, d_gamma, d_out, num_rows, num_cols, epsilon) ||
        reinterpret_cast<std::uintptr_t>(d_temp_storage) % alignof(float) != 0) {
        return cudaErrorInvalidValue;
    }
    const std::size_t needed = static_cast<std::size_t>(num_rows) * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    float* d_rstd = static_cast<float*>(d_temp_storage);
    const unsigned blocks = row_blocks(num_rows);
    rms_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_rstd, num_rows, num_cols, epsilon);
    normalize_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_gamma, nullptr, nullptr, d_rstd, d_out, num_rows,
                                                           num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::normalization::three_kernels
