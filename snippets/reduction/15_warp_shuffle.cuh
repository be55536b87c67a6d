//! @file 15_warp_shuffle.cuh
//! @brief Reduction step 15 (beyond the articles): warp shuffles instead of the shared-memory tree.
//!
//! Since Kepler a warp can exchange registers directly: `__shfl_down_sync`
//! hands each lane the value of the lane `offset` above it. Each warp sums
//! its 32 values in five shuffles, with no shared memory and no barrier; the
//! warps' sums meet in a 32-entry shared array, and warp 0 shuffles them
//! down to the block's sum. One `__syncthreads()` per block instead of one
//! per round, and the warp-synchronous question of step 12 disappears: the
//! `_sync` intrinsics name the lanes that take part.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::warp_shuffle {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = 2 * block_threads;  //!< elements per block per iteration
constexpr int max_blocks = 1024;                    //!< the grid: at most this many blocks

//! @brief The sum of `value` over the 32 lanes of the warp, in lane 0.
template <typename T>
__device__ __forceinline__ T warp_sum(T value)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        value += __shfl_down_sync(0xffffffffu, value, offset);
    }
    return value;
}

//! @brief Block `b` sums every `gridDim.x`-th slice of `2 * BlockThreads` elements into `d_block_sums[b]`.
template <int BlockThreads, typename T>
static __global__ void reduce_kernel(const T* d_in, T* d_block_sums, int num_items)
{
    static_assert(BlockThreads % 32 == 0 && BlockThreads <= 1024, "whole warps, at most 32 of them");
    __shared__ T warp_sums[BlockThreads / 32];
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const std::size_t n = static_cast<std::size_t>(num_items);
    const std::size_t grid_stride = static_cast<std::size_t>(gridDim.x) * (2 * BlockThreads);
    T thread_sum = T(0);
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * (2 * BlockThreads) + tid; i < n; i += grid_stride) {
        thread_sum += d_in[i];
        if (i + BlockThreads < n) {
            thread_sum += d_in[i + BlockThreads];
        }
    }
    thread_sum = warp_sum(thread_sum);
    if (lane == 0) {
        warp_sums[warp] = thread_sum;
    }
    __syncthreads();
    if (warp == 0) {
        const T block_sum = warp_sum(lane < BlockThreads / 32 ? warp_sums[lane] : T(0));
        if (lane == 0) {
            d_block_sums[blockIdx.x] = block_sum;
        }
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

}  // namespace stepwise::reduction::warp_shuffle
