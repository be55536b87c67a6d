//! @file 13_completely_unrolled.cuh
//! @brief Reduction step 13 (Harris's kernel 6): completely unrolled, the block size a template parameter.
//!
//! With the block size known at compile time every loop of the tree has
//! constant bounds and unrolls completely: no loop counters, no compares,
//! and the `if (tid < s)` tests of rounds that cannot apply disappear.
//! Harris makes the block size a template parameter so that one source
//! serves every power of two; the launcher picks one. (Our earlier steps
//! already had a `constexpr` block size, so the compiler could unroll them
//! too: the measured difference tells how much it did.)
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::completely_unrolled {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = 2 * block_threads;  //!< two elements per thread

//! @brief Block `b` sums its `2 * BlockThreads` elements in shared memory into `d_block_sums[b]`.
template <int BlockThreads, typename T>
static __global__ void reduce_kernel(const T* d_in, T* d_block_sums, int num_items)
{
    static_assert(BlockThreads >= 64 && (BlockThreads & (BlockThreads - 1)) == 0, "a power of two, two warps or more");
    __shared__ T partial[BlockThreads];
    const int tid = threadIdx.x;
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * (2 * BlockThreads) + tid;
    const std::size_t n = static_cast<std::size_t>(num_items);
    partial[tid] = (i < n ? d_in[i] : T(0)) + (i + BlockThreads < n ? d_in[i + BlockThreads] : T(0));
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
    const T* in = d_in;
    for (int n = num_items, pass = 0;; ++pass) {  // each pass leaves one partial sum per block
        const int blocks = (n + items_per_block - 1) / items_per_block;
        T* out = blocks == 1 ? d_out : partials[pass % 2];
        reduce_kernel<block_threads><<<blocks, block_threads, 0, stream>>>(in, out, n);
        if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess || blocks == 1) {
            return error;
        }
        in = out;
        n = blocks;
    }
}

}  // namespace stepwise::reduction::completely_unrolled
