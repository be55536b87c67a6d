//! @file 04_layout_by_shape.cuh
//! @brief Softmax step 4 (beyond the sources): the shape decides the layout: a warp per row, several rows per
//!        block, for rows of up to 1024 values; a block per row for longer ones.
//!
//! Step 3 gives every row a block of 256 threads. A row of 128 values keeps
//! half of them idle and costs two barriers per reduction; 65536 such rows
//! are 65536 blocks, each too short to hide its memory latency. Here a row
//! of up to 1024 values belongs to one warp: its reductions are five
//! shuffles with no barrier and no shared memory, and a block of 256 threads
//! works on eight rows at once. Longer rows keep step 3's block per row.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::softmax::layout_by_shape {

constexpr int block_threads = 256;     //!< threads per block: whole warps
constexpr int warp_row_max_cols = 1024;  //!< rows up to this long are a warp's

//! @brief The maximum (`Max`) or sum of `value` over the 32 lanes of the warp; every lane gets it.
template <bool Max>
__device__ __forceinline__ float warp_reduce(float value)
{
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, value, offset);
        value = Max ? fmaxf(value, other) : value + other;
    }
    return value;
}

//! @brief The maximum (`Max`) or sum of `value` over the block: each warp's, then the warps'; every thread gets it.
template <bool Max>
__device__ __forceinline__ float block_reduce(float value, float* shared)
{
    const int lane = threadIdx.x % 32;
    value = warp_reduce<Max>(value);
    if (lane == 0) {
        shared[threadIdx.x / 32] = value;
    }
    __syncthreads();
    const float identity = Max ? -INFINITY : 0.0f;
    value = warp_reduce<Max>(lane < static_cast<int>(blockDim.x / 32) ? shared[lane] : identity);
    __syncthreads();  // `shared` is free again when the function returns
    return value;
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
    float max = -INFINITY;
    for (int j = lane; j < num_cols; j += 32) {
        max = fmaxf(max, x[j]);
    }
    max = warp_reduce<true>(max);
    float sum = 0.0f;
    for (int j = lane; j < num_cols; j += 32) {
        sum += expf(x[j] - max);
    }
    sum = warp_reduce<false>(sum);
    for (int j = lane; j < num_cols; j += 32) {
        d_out[row_offset + j] = expf(x[j] - max) / sum;
    }
}

//! @brief Block r computes the softmax of row r.
static __global__ void __launch_bounds__(block_threads) block_per_row_kernel(const float* d_in, float* d_out, int num_cols)
{
    __shared__ float shared[32];
    const std::size_t row_offset = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const float* x = d_in + row_offset;
    float max = -INFINITY;
    // unsigned: j + blockDim.x stays below 2^32 for every int num_cols, where an int would overflow
    for (unsigned j = threadIdx.x; j < static_cast<unsigned>(num_cols); j += blockDim.x) {
        max = fmaxf(max, x[j]);
    }
    max = block_reduce<true>(max, shared);
    float sum = 0.0f;
    for (unsigned j = threadIdx.x; j < static_cast<unsigned>(num_cols); j += blockDim.x) {
        sum += expf(x[j] - max);
    }
    sum = block_reduce<false>(sum, shared);
    for (unsigned j = threadIdx.x; j < static_cast<unsigned>(num_cols); j += blockDim.x) {
        d_out[row_offset + j] = expf(x[j] - max) / sum;
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

}  // namespace stepwise::softmax::layout_by_shape
