//! @file 14_multiple_elements_per_thread.cuh
//! @brief Reduction step 14 (Harris's kernel 7): many elements per thread.
//!
//! Instead of one block per 512 elements, a fixed grid of at most 1024
//! blocks walks the array with a grid-sized stride, each thread adding
//! pairs of elements into a register before the block's tree starts. The
//! tree, its barriers and the block sums are paid once per block rather
//! than once per 512 elements, and loads from later iterations overlap
//! with earlier adds. Harris's argument is Brent's theorem: O(n / log n)
//! threads, each summing O(log n) elements, do no more work than a
//! sequential sum and keep the parallel depth logarithmic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::multiple_elements_per_thread {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = 2 * block_threads;  //!< elements per block per iteration
constexpr int max_blocks = 1024;                    //!< the grid: at most this many blocks

//! @brief Block `b` sums every `gridDim.x`-th slice of `2 * BlockThreads` elements into `d_block_sums[b]`.
template <int BlockThreads, typename T>
static __global__ void reduce_kernel(const T* d_in, T* d_block_sums, int num_items)
{
    static_assert(BlockThreads >= 64 && (BlockThreads & (BlockThreads - 1)) == 0, "a power of two, two warps or more");
    __shared__ T partial[BlockThreads];
    const int tid = threadIdx.x;
    const std::size_t n = static_cast<std::size_t>(num_items);
    const std::size_t grid_stride = static_cast<std::size_t>(gridDim.x) * (2 * BlockThreads);
    T thread_sum = T(0);
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * (2 * BlockThreads) + tid; i < n; i += grid_stride) {
        thread_sum += d_in[i];
        if (i + BlockThreads < n) {
            thread_sum += d_in[i + BlockThreads];
        }
    }
    partial[tid] = thread_sum;
    __syncthreads();
#pragma unroll
    for (int stride = BlockThreads / 2; stride > 32; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    if (tid < 32) {
        T warp_sum = partial[tid];
#pragma unroll
        for (int stride = 32; stride > 0; stride /= 2) {
            warp_sum += partial[tid + stride];
            __syncwarp();
            partial[tid] = warp_sum;
            __syncwarp();
        }
    }
    if (tid == 0) {
        d_block_sums[blockIdx.x] = partial[0];
    }
}

//! @brief Sums `num_items` values into `*d_out`. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes`, or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size
//! @param[in] d_in       `num_items` values (left unchanged)
//! @param[out] d_out     one value: the sum
//! @param[in] num_items  number of values
//! @param[in] stream     stream to launch on
//! @pre `num_items > 0`; `d_temp_storage` 256-byte aligned (cudaMalloc's)
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the
//!         first launch error
template <typename T>
inline cudaError_t sum(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in, T* d_out,
                       int num_items, cudaStream_t stream = 0)
{
    if (d_in == nullptr || d_out == nullptr || num_items <= 0) {
        return cudaErrorInvalidValue;
    }
    const int first_blocks = std::min((num_items + items_per_block - 1) / items_per_block, max_blocks);
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
    const T* in = d_in;
    for (int n = num_items, pass = 0;; ++pass) {  // each pass leaves one partial sum per block
        const int blocks = std::min((n + items_per_block - 1) / items_per_block, max_blocks);
        T* out = blocks == 1 ? d_out : partials[pass % 2];
        reduce_kernel<block_threads><<<blocks, block_threads, 0, stream>>>(in, out, n);
        if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess || blocks == 1) {
            return error;
        }
        in = out;
        n = blocks;
    }
}

}  // namespace stepwise::reduction::multiple_elements_per_thread
