//! @file 01_three_kernels.cuh
//! @brief Softmax step 1 (beyond the sources): three kernels, one thread per row: the row's maximum, the sum of
//!        exp(x - max), then each value's share.
//!
//! y_i = exp(x_i - max) / sum_j exp(x_j - max) is the softmax with the
//! maximum subtracted first, so that no exponential overflows. Written as
//! three loops over the row, it becomes three kernels, each thread walking
//! one whole row; the maxima and sums wait in a workspace between kernels.
//! The row is read three times, and the 32 threads of a warp read 32
//! different rows, `num_cols` elements apart: every load is its own memory
//! transaction, and with few rows most of the GPU has nothing to do.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::softmax::three_kernels {

constexpr int block_threads = 256;  //!< threads (rows) per block

//! @brief `d_max[r]`: the maximum of row r.
static __global__ void row_max_kernel(const float* d_in, float* d_max, int num_rows, int num_cols)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float* x = d_in + row * num_cols;
    float max = -INFINITY;
    for (int j = 0; j < num_cols; ++j) {
        max = fmaxf(max, x[j]);
    }
    d_max[row] = max;
}

//! @brief `d_sum[r]`: the sum of exp(x - max) over row r.
static __global__ void row_sum_kernel(const float* d_in, const float* d_max, float* d_sum, int num_rows, int num_cols)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float* x = d_in + row * num_cols;
    const float max = d_max[row];
    float sum = 0.0f;
    for (int j = 0; j < num_cols; ++j) {
        sum += expf(x[j] - max);
    }
    d_sum[row] = sum;
}

//! @brief y = exp(x - max) / sum along row r.
static __global__ void normalize_kernel(const float* d_in, const float* d_max, const float* d_sum, float* d_out,
                                        int num_rows, int num_cols)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (row >= num_rows) {
        return;
    }
    const float max = d_max[row];
    const float sum = d_sum[row];
    for (int j = 0; j < num_cols; ++j) {
        d_out[row * num_cols + j] = expf(d_in[row * num_cols + j] - max) / sum;
    }
}

//! @brief y = softmax(x) along each row of a row-major `num_rows` x `num_cols` matrix. Two phases, as CUB: with
//!        `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (each row's maximum and sum), or nullptr to
//!            ask its size
//! @param[in,out] temp_storage_bytes the workspace's size
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[out] d_out the softmax of each row; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`; `d_temp_storage` 4-byte aligned. A row with a NaN or +inf is NaN, a row
//!      of -inf values is NaN (0 / 0); -inf elements of other rows give 0.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
inline cudaError_t softmax(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in, float* d_out,
                           int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (d_in == nullptr || d_out == nullptr || num_rows < 1 || num_cols < 1) {
        return cudaErrorInvalidValue;
    }
    const std::size_t needed = 2 * static_cast<std::size_t>(num_rows) * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed || reinterpret_cast<std::uintptr_t>(d_temp_storage) % sizeof(float) != 0) {
        return cudaErrorInvalidValue;
    }
    float* d_max = static_cast<float*>(d_temp_storage);
    float* d_sum = d_max + num_rows;
    const unsigned blocks = static_cast<unsigned>((static_cast<std::int64_t>(num_rows) + block_threads - 1) / block_threads);
    row_max_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_max, num_rows, num_cols);
    row_sum_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_max, d_sum, num_rows, num_cols);
    normalize_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_max, d_sum, d_out, num_rows, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::softmax::three_kernels
