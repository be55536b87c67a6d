//! @file 05_one_pass_moments.cuh
//! @brief Normalization step 5 (beyond the sources): LayerNorm's mean and variance in one pass over the row
//!        (Welford's update, partial results merged with Chan's formula).
//!
//! Step 4's LayerNorm reads each row three times: once for the mean, once
//! for the squares around it, once for the output. Each thread now keeps a
//! count, a mean and the sum of squared deviations (M2) of its values,
//! updated value by value (Welford, 1962), and threads merge theirs with
//! Chan's formula: one read for both statistics, two in all. The shorter
//! var = E[x^2] - mean^2 subtracts nearly equal numbers when the mean is
//! large against the spread (rows around 10^4 with a spread of 1 lose every
//! digit in fp32); a sum shifted by one of the row's values helps only as
//! far as that value is typical. Welford's deviations are from the running
//! mean, so nothing cancels, for a division per value that a memory-bound
//! kernel has time for. RMSNorm already reads its rows twice: step 4's.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::normalization::one_pass_moments {

constexpr int block_threads = 256;       //!< threads per block: whole warps
constexpr int warp_row_max_cols = 1024;  //!< rows up to this long are a warp's

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

//! @brief The count, mean and sum of squared deviations from the mean (M2) of some values.
struct Moments {
    float count, mean, m2;
};

//! @brief `m` with the value `x` added (Welford's update).
__device__ __forceinline__ Moments add(Moments m, float x)
{
    m.count += 1.0f;
    const float delta = x - m.mean;
    m.mean += delta / m.count;
    m.m2 += delta * (x - m.mean);
    return m;
}

//! @brief The moments of the union of two sets of values (Chan, Golub and LeVeque); either may be empty.
__device__ __forceinline__ Moments merge(Moments a, Moments b)
{
    const float count = a.count + b.count;
    if (count == 0.0f) {
        return a;
    }
    const float delta = b.mean - a.mean;
    const float b_share = b.count / count;
    return {count, a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * a.count * b_share};
}

//! @brief The moments of the 32 lanes' values; every lane gets them.
__device__ __forceinline__ Moments warp_moments(Moments m)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        m = merge(m, {__shfl_xor_sync(0xffffffffu, m.count, offset), __shfl_xor_sync(0xffffffffu, m.mean, offset),
                      __shfl_xor_sync(0xffffffffu, m.m2, offset)});
    }
    return m;
}

//! @brief The moments of the block's values: each warp's, then the warps'; every thread gets them.
__device__ __forceinline__ Moments block_moments(Moments m, Moments* shared)
{
    const int lane = threadIdx.x % 32;
    m = warp_moments(m);
    if (lane == 0) {
        shared[threadIdx.x / 32] = m;
    }
    __syncthreads();
    m = warp_moments(lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : Moments{0.0f, 0.0f, 0.0f});
    __syncthreads();  // `shared` is free again when the function returns
    return m;
}

//! @brief Each warp computes the LayerNorm of one row, and its mean and rstd; a block holds `block_threads / 32` rows.
static __global__ void __launch_bounds__(block_threads)
    layer_norm_warp_kernel(const float* d_in, const float* d_gamma, const float* d_beta, float* d_out, float* d_mean,
                           float* d_rstd, int num_rows, int num_cols, float epsilon)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= num_rows) {
        return;  // the whole warp: no lane of it takes part in a shuffle
    }
    const int lane = threadIdx.x % 32;
    const std::size_t row_offset = static_cast<std::size_t>(row) * num_cols;
    const float* x = d_in + row_offset;
    Moments m{0.0f, 0.0f, 0.0f};
    for (int j = lane; j < num_cols; j += 32) {
        m = add(m, x[j]);
    }
    m = warp_moments(m);
    const float mean = m.mean;
    const float rstd = rsqrtf(m.m2 / num_cols + epsilon);
    const float scale = isinf(rstd) ? 0.0f : rstd;  // epsilon 0, equal values: each x - mean is 0, y beta
    for (int j = lane; j < num_cols; j += 32) {
        d_out[row_offset + j] = (x[j] - mean) * scale * d_gamma[j] + d_beta[j];
    }
    if (lane == 0) {
        d_mean[row] = mean;
        d_rstd[row] = rstd;
    }
}

//! @brief Each warp computes the RMSNorm of one row; a block holds `block_threads / 32` rows.
static __global__ void __launch_bounds__(block_threads)
    rms_norm_warp_kernel(const float* d_in, const float* d_gamma, float* d_out, int num_rows, int num_cols,
                         float epsilon)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= num_rows) {
        return;
    }
    const int lane = threadIdx.x % 32;
    const std::size_t row_offset = static_cast<std::size_t>(row) * num_cols;
    const float* x = d_in + row_offset;
    float squares = 0.0f;
    for (int j = lane; j < num_cols; j += 32) {
        squares += x[j] * x[j];
    }
    const float rstd = rsqrtf(warp_sum(squares) / num_cols + epsilon);
    for (int j = lane; j < num_cols; j += 32) {
        d_out[row_offset + j] = x[j] * rstd * d_gamma[j];
    }
}

//! @brief Block r computes the LayerNorm of row r, and its mean and rstd.
static __global__ void __launch_bounds__(block_threads)
    layer_norm_block_kernel(const float* d_in, const float* d_gamma, const float* d_beta, float* d_out, float* d_mean,
                      float* d_rstd, int num_cols, float epsilon)
{
    __shared__ Moments shared[32];
    const std::size_t row_offset = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float* x = d_in + row_offset;
    Moments m{0.0f, 0.0f, 0.0f};
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        m = add(m, x[j]);
    }
    m = block_moments(m, shared);
    const float mean = m.mean;
    const float rstd = rsqrtf(m.m2 / num_cols + epsilon);
    const float scale = isinf(rstd) ? 0.0f : rstd;  // epsilon 0, equal values: each x - mean is 0, y beta
    for (int j = threadIdx.x; j < num_cols; j += blockDim.x) {
        d_out[row_offset + j] = (x[j] - mean) * scale * d_gamma[j] + d_beta[j];
    }
    if (threadIdx.x == 0) {
        d_mean[blockIdx.x] = mean;
        d_rstd[blockIdx.x] = rstd;
    }
}

//! @brief Block r computes the RMSNorm of row r.
static __global__ void __launch_bounds__(block_threads)
    rms_norm_block_kernel(const float* d_in, const float* d_gamma, float* d_out, int num_cols, float epsilon)
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

//! @brief Blocks of the warp-per-row kernels: `block_threads / 32` rows each.
inline unsigned warp_row_blocks(int num_rows)
{
    constexpr int rows_per_block = block_threads / 32;
    return static_cast<unsigned>((static_cast<std::int64_t>(num_rows) + rows_per_block - 1) / rows_per_block);
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
//!      3.4e38). A NaN in a row makes the row's outputs NaN; a row of equal values gives exactly `beta`.
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
    if (num_cols <= warp_row_max_cols) {
        layer_norm_warp_kernel<<<warp_row_blocks(num_rows), block_threads, 0, stream>>>(
            d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows, num_cols, epsilon);
    } else {
        layer_norm_block_kernel<<<num_rows, block_threads, 0, stream>>>(d_in, d_gamma, d_beta, d_out, d_mean, d_rstd,
                                                                        num_cols, epsilon);
    }
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
    if (num_cols <= warp_row_max_cols) {
        rms_norm_warp_kernel<<<warp_row_blocks(num_rows), block_threads, 0, stream>>>(d_in, d_gamma, d_out, num_rows,
                                                                                      num_cols, epsilon);
    } else {
        rms_norm_block_kernel<<<num_rows, block_threads, 0, stream>>>(d_in, d_gamma, d_out, num_cols, epsilon);
    }
    return cudaGetLastError();
}

}  // namespace stepwise::normalization::one_pass_moments
