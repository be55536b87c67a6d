//! @file 06_interleaved_4_blocks.cuh
//! @brief Reduction step 6: interleaved pairs, each block summing four blocks' worth of data.
//!
//! Step 5 with 4 slices per block instead of 2: 4 independent loads per
//! thread in flight before the tree starts, and a quarter of step 4's blocks.
//! How far that pays depends on the size: the article's small test (16384
//! elements on a Tesla K80, 16 blocks at most) found the larger factors
//! slower, because fewer blocks left multiprocessors idle.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::interleaved_4_blocks {

constexpr int block_threads = 256;                         //!< threads per block
constexpr int blocks_of_data = 4;                          //!< block-sized slices each block sums
constexpr int items_per_block = block_threads * blocks_of_data;
static_assert((block_threads & (block_threads - 1)) == 0, "halving strides need a power of two");

//! @brief Block `b` sums its `items_per_block` elements in place and writes the sum to `d_block_sums[b]`.
template <typename T>
static __global__ void reduce_kernel(T* d_data, T* d_block_sums, int num_items)
{
    T* block_data = d_data + static_cast<std::size_t>(blockIdx.x) * items_per_block;
    const int count = min(items_per_block, num_items - static_cast<int>(blockIdx.x) * items_per_block);
    const int tid = threadIdx.x;
    // Fold the block's other slices onto its first, in place. The article has no barrier after
    // this: a thread of the loop below would read an element another thread may not have folded yet.
#pragma unroll
    for (int slice = 1; slice < blocks_of_data; ++slice) {
        if (tid + slice * block_threads < count) {
            block_data[tid] += block_data[tid + slice * block_threads];
        }
    }
    __syncthreads();
    const int folded = min(count, block_threads);
    for (int stride = block_threads / 2; stride > 0; stride /= 2) {
        if (tid < stride && tid + stride < folded) {
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

}  // namespace stepwise::reduction::interleaved_4_blocks
