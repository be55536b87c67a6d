//! @file 02_block_per_row.cuh
//! @brief Softmax step 2 (beyond the sources): one block per row, its maximum and sum reduced by the reduction
//!        chapter's shared-memory tree, in one kernel.
//!
//! Step 1 gives a whole row to one thread: neighbouring threads read
//! addresses a row apart, and a few long rows keep a few threads busy. Here
//! the 256 threads of a block share a row: thread t reads elements t, t + 256,
//! ..., so a warp reads 128 consecutive bytes, and every row is a block of
//! its own. Each thread keeps a running maximum (then sum) of its elements;
//! the block combines the 256 values by halving in shared memory (the
//! reduction chapter's sequential addressing), and a third loop writes the
//! row. The maximum and sum never leave the block, so there is no workspace
//! and one launch.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::softmax::block_per_row {

constexpr int block_threads = 256;  //!< threads per block (per row); a power of two for the tree

//! @brief The maximum (`Max`) or sum of `value` over the block, by halving in shared memory; every thread gets it.
template <bool Max>
__device__ __forceinline__ float block_reduce(float value, float* shared)
{
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            const float other = shared[threadIdx.x + stride];
            shared[threadIdx.x] = Max ? fmaxf(shared[threadIdx.x], other) : shared[threadIdx.x] + other;
        }
        __syncthreads();
    }
    const float result = shared[0];
    __syncthreads();  // `shared` is free again when the function returns
    return result;
}

//! @brief Block r computes the softmax of row r.
static __global__ void __launch_bounds__(block_threads) softmax_kernel(const float* d_in, float* d_out, int num_cols)
{
    __shared__ float shared[block_threads];
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
    static_assert((block_threads & (block_threads - 1)) == 0, "the tree halves the block");
    if (d_in == nullptr || d_out == nullptr || num_rows < 1 || num_cols < 1) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    softmax_kernel<<<num_rows, block_threads, 0, stream>>>(d_in, d_out, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::softmax::block_per_row
