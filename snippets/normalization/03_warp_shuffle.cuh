//! @file 03_warp_shuffle.cuh
//! @brief Normalization step 3 (beyond the sources): the block's sums reduced with warp shuffles.
//!
//! Step 2's tree takes eight rounds, each a shared-memory store, a load and a
//! barrier of the whole block, per sum. Here each warp adds its 32 values
//! with five register shuffles (`__shfl_xor_sync`, so every lane gets the
//! result), the eight warps' sums meet in shared memory after one barrier,
//! and every warp adds those eight the same way: two barriers per sum
//! instead of nine, as in the reduction chapter's step 15.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::normalization::warp_shuffle {

constexpr int block_threads = 256;  //!< threads per block (per row): whole warps

//! @brief The sum of `value` over the 32 lanes of the warp; every lane gets it.
__device__ __forceinline__ float warp_sum(float value)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(0xffffffffu, value, offset);
    }
    return value;
}

//! @brief The sum of `value` over the block: each warp's, then the warps'; every thread gets it.
__device__ __forceinline__ float block_sum(float value, float* shared)
{
    const int lane = threadIdx.x % 32;
    value = warp_sum(value);
    if (lane == 0) {
        shared[threadIdx.x / 32] = value;
    }
    __syncthreads();
    value = warp_sum(lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : 0.0f);
    __syncthreads();  // `shared` is free again when the function returns
    return value;
}

//! @brief Block r computes the LayerNorm of row r, and its mean and rstd.
static __global__ void __launch_bounds__(block_threads)
    layer_norm_kernel(const float* d_in, const float* d_gamma, const float* d_beta, float* d_out, float* d_mean,
                      float* d_rstd, int num_cols, float epsilon)
{
    __shared__ float shared[32];
    const std::size_t row_offset = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float* x = d_in + row_offset;
    float sum = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        sum += x[j];
    }
    const float mean = block_sum(sum, shared) / num_cols;
    float squares = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        squares += (x[j] - mean) * (x[j] - mean);
    }
    const float rstd = rsqrtf(block_sum(squares, shared) / num_cols + epsilon);
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        d_out[row_offset + j] = (x[j] - mean) * rstd * d_gamma[j] + d_beta[j];
    }
    if (threadIdx.x == 0) {
        d_mean[blockIdx.x] = mean;
        d_rstd[blockIdx.x] = rstd;
    }
}

//! @brief Block r computes the RMSNorm of row r.
static __global__ void __launch_bounds__(block_threads)
    rms_norm_kernel(const float* d_in, const float* d_gamma, float* d_out, int num_cols, float epsilon)
{
    __shared__ float shared[32];
    const std::size_t row_offset = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float* x = d_in + row_offset;
    float squares = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        squares += x[j] * x[j];
    }
    const float rstd = rsqrtf(block_sum(squares, shared) / num_cols + epsilon);
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        d_out[row_offset + j] = x[j] * rstd * d_gamma[j];
    }
}

//! @brief The launchers' common checks.
inline bool valid(const void* d_in, const void* d_gamma, const void* d_out, int num_rows, int num_cols, float epsilon)
{
    return d_in != nullptr && d_gamma != nullptr && d_out != nullptr && num_rows >= 1 && num_cols >= 1 &&
           epsilon >= 0.0f;
}

//! @brief LayerNorm of each row of a row-major `num_rows` x `num_cols` matrix:
//!        y = (x - mean) / sqrt(var + epsilon) * gamma + beta. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
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
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t layer_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                              const float* d_gamma, const float* d_beta, float* d_out, float* d_mean, float* d_rstd,
                              int num_rows, int num_cols, float epsilon, cudaStream_t stream = 0)
{
    static_assert(block_threads % 32 == 0 && block_threads <= 1024, "whole warps, at most 32");
    if (!valid(d_in, d_gamma, d_out, num_rows, num_cols, epsilon) || d_beta == nullptr || d_mean == nullptr ||
        d_rstd == nullptr) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    layer_norm_kernel<<<num_rows, block_threads, 0, stream>>>(d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_cols,
                                                              epsilon);
    return cudaGetLastError();
}

//! @brief RMSNorm of each row of a row-major `num_rows` x `num_cols` matrix: y = x / sqrt(mean(x^2) + epsilon) *
//!        gamma. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace (unused: this step needs none), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma `num_cols` values: the scale of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the mean square
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; squares of x stay below fp32's largest. A NaN in a row
//!      makes the row NaN.
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t rms_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                            const float* d_gamma, float* d_out, int num_rows, int num_cols, float epsilon,
                            cudaStream_t stream = 0)
{
    if (!valid(d_in, d_gamma, d_out, num_rows, num_cols, epsilon)) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    rms_norm_kernel<<<num_rows, block_threads, 0, stream>>>(d_in, d_gamma, d_out, num_cols, epsilon);
    return cudaGetLastError();
}

}  // namespace stepwise::normalization::warp_shuffle
