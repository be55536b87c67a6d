//! @file 05_online_softmax.cuh
//! @brief Softmax step 5 (beyond the sources): the online softmax: the row's maximum and sum in one pass.
//!
//! Step 4 reads each row three times: for its maximum, for its sum, and to
//! write it. Milakov and Gimelshein (2018) keep a running pair instead: on a
//! new value x, the maximum m becomes m' = max(m, x) and the sum s becomes
//! s * exp(m - m') + exp(x - m'), so one pass gives both, and two pairs
//! merge by the same rule (each sum scaled to the larger maximum). Each
//! thread folds its values into a pair, the warp or block merges the pairs,
//! and a second pass writes the row: two reads instead of three. A value of
//! -inf adds exactly 0, also while m is still -inf, where the rule's
//! exp(-inf - (-inf)) would be NaN.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::softmax::online_softmax {

constexpr int block_threads = 256;     //!< threads per block: whole warps
constexpr int warp_row_max_cols = 1024;  //!< rows up to this long are a warp's

//! @brief The softmax of part of a row: its maximum and the sum of exp(x - max) over it.
struct Partial {
    float max;
    float sum;
};

//! @brief exp(x - max), with exp(-inf - max) = 0 even where max is -inf (a part of -inf values sums to 0).
__device__ __forceinline__ float exp_shifted(float x, float max) { return x == -INFINITY ? 0.0f : expf(x - max); }

//! @brief Two parts' maximum and sum combined (Milakov and Gimelshein's rule); commutative, bit for bit.
__device__ __forceinline__ Partial merge(Partial a, Partial b)
{
    const float max = fmaxf(a.max, b.max);
    return {max, a.sum * exp_shifted(a.max, max) + b.sum * exp_shifted(b.max, max)};
}

//! @brief Folds value x into the running partial of one thread.
__device__ __forceinline__ Partial add(Partial p, float x)
{
    const float max = fmaxf(p.max, x);
    return {max, p.sum * exp_shifted(p.max, max) + exp_shifted(x, max)};
}

//! @brief Merges the partials of the warp's 32 lanes; every lane gets the result.
__device__ __forceinline__ Partial warp_merge(Partial p)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        p = merge(p, {__shfl_xor_sync(0xffffffffu, p.max, offset), __shfl_xor_sync(0xffffffffu, p.sum, offset)});
    }
    return p;
}

//! @brief Merges the partials of the block: each warp's, then the warps'; every thread gets the result.
__device__ __forceinline__ Partial block_merge(Partial p, Partial* shared)
{
    const int lane = threadIdx.x % 32;
    p = warp_merge(p);
    if (lane == 0) {
        shared[threadIdx.x / 32] = p;
    }
    __syncthreads();
    return warp_merge(lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : Partial{-INFINITY, 0.0f});
}

//! @brief Each warp computes the softmax of one row; a block holds `block_threads / 32` rows.
static __global__ void __launch_bounds__(block_threads)
    warp_per_row_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= num_rows) {
        return;  // the whole warp: no lane of it takes part in a shuffle
    }
    const int lane = threadIdx.x % 32;
    const std::size_t row_offset = static_cast<std::size_t>(row) * num_cols;
    const float* x = d_in + row_offset;
    Partial p{-INFINITY, 0.0f};
    for (int j = lane; j < num_cols; j += 32) {
        p = add(p, x[j]);
    }
    p = warp_merge(p);
    const float inverse_sum = 1.0f / p.sum;  // a row of -inf values: 0 * inf, NaN
    for (int j = lane; j < num_cols; j += 32) {
        d_out[row_offset + j] = exp_shifted(x[j], p.max) * inverse_sum;
    }
}

//! @brief Block r computes the softmax of row r.
static __global__ void __launch_bounds__(block_threads) block_per_row_kernel(const float* d_in, float* d_out, int num_cols)
{
    __shared__ Partial shared[32];
    const std::size_t row_offset = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float* x = d_in + row_offset;
    Partial p{-INFINITY, 0.0f};
    // unsigned: j + blockDim.x stays below 2^32 for every int num_cols, where an int would overflow
    for (unsigned j = threadIdx.x; j < static_cast<unsigned>(num_cols); j += blockDim.x) {
        p = add(p, x[j]);
    }
    p = block_merge(p, shared);
    const float inverse_sum = 1.0f / p.sum;
    for (unsigned j = threadIdx.x; j < static_cast<unsigned>(num_cols); j += blockDim.x) {
        d_out[row_offset + j] = exp_shifted(x[j], p.max) * inverse_sum;
    }
}

//! @brief y = softmax(x) along each row of a row-major `num_rows` x `num_cols` matrix. Two phases, as CUB: with
//!        `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (unused: this step needs none), or nullptr to
//!            ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[out] d_out the softmax of each row; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`. A row with a NaN or +inf is NaN, a row of -inf values is NaN (0 / 0);
//!      -inf elements of other rows give 0.
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t softmax(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in, float* d_out,
                           int num_rows, int num_cols, cudaStream_t stream = 0)
{
    static_assert(block_threads % 32 == 0 && block_threads <= 1024, "whole warps, at most 32");
    if (d_in == nullptr || d_out == nullptr || num_rows < 1 || num_cols < 1) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    if (num_cols <= warp_row_max_cols) {
        constexpr int rows_per_block = block_threads / 32;
        const unsigned blocks = static_cast<unsigned>((static_cast<std::int64_t>(num_rows) + rows_per_block - 1) / rows_per_block);
        warp_per_row_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    } else {
        block_per_row_kernel<<<num_rows, block_threads, 0, stream>>>(d_in, d_out, num_cols);
    }
    return cudaGetLastError();
}

}  // namespace stepwise::softmax::online_softmax
