//! @file 01_neighbored_pairs.cuh
//! @brief Reduction step 1: neighbored pairs, in place in global memory.
//!
//! Each block sums its 256 elements where they lie: in round `s` thread `t`
//! adds element `t + s` into element `t` when `t % (2s) == 0`. Half the lanes
//! of every warp idle in the first round, three quarters in the second, and so
//! on: the `%` test diverges inside each warp, and every round goes through
//! global memory. The article leaves the block sums for the host to add; here
//! the launcher reduces them with the same kernel, pass after pass, until one
//! value is left in `d_out`.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::neighbored_pairs {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = block_threads;  //!< one element per thread

//! @brief Block `b` sums `d_data[256 b, 256 b + 256)` in place and writes the sum to `d_block_sums[b]`.
template <typename T>
static __global__ void reduce_kernel(T* d_data, T* d_block_sums, int num_items)
{
    T* block_data = d_data + static_cast<std::size_t>(blockIdx.x) * items_per_block;
    const int count = min(items_per_block, num_items - static_cast<int>(blockIdx.x) * items_per_block);
    const int tid = threadIdx.x;
    for (int stride = 1; stride < block_threads; stride *= 2) {
        if (tid % (2 * stride) == 0 && tid + stride < count) {
            block_data[tid] += block_data[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        d_block_sums[blockIdx.x] = block_data[0];
    }
}

//! @brief Sums `num_items` values into `*d_out`. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes`, or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size
//! @param[in,out] d_in   `num_items` values; overwritten (the reduction works in place)
//! @param[out] d_out     one value: the sum
//! @param[in] num_items  number of values
//! @param[in] stream     stream to launch on
//! @pre `num_items > 0`; `d_temp_storage` 256-byte aligned (cudaMalloc's)
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the
//!         first launch error
template <typename T>
inline cudaError_t sum(void* d_temp_storage, std::size_t& temp_storage_bytes, T* d_in, T* d_out, int num_items,
                       cudaStream_t stream = 0)
{
    if (d_in == nullptr || d_out == nullptr || num_items <= 0) {
        return cudaErrorInvalidValue;
    }
    const int first_blocks = (num_items + items_per_block - 1) / items_per_block;
    const std::size_t partials_bytes = (static_cast<std::size_t>(first_blocks) * sizeof(T) + 255) / 256 * 256;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 2 * partials_bytes;
        return cudaSuccess;
    }
    if (temp_storage_bytes < 2 * partials_bytes) {
        return cudaErrorInvalidValue;
    }
    T* partials[2] = {static_cast<T*>(d_temp_storage),
                      reinterpret_cast<T*>(static_cast<char*>(d_temp_storage) + partials_bytes)};
    T* in = d_in;
    for (int n = num_items, pass = 0;; ++pass) {  // each pass leaves one partial sum per block
        const int blocks = (n + items_per_block - 1) / items_per_block;
        T* out = blocks == 1 ? d_out : partials[pass % 2];
        reduce_kernel<<<blocks, block_threads, 0, stream>>>(in, out, n);
        if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess || blocks == 1) {
            return error;
        }
        in = out;
        n = blocks;
    }
}

}  // namespace stepwise::reduction::neighbored_pairs
