//! @file 03_unrolled_last_warp.cuh
//! @brief Reduction step 3: step 2 with the last warp's rounds unrolled.
//!
//! Once only 32 threads are left they are all in warp 0, so the last six
//! rounds need no block-wide `__syncthreads()`: the loop is unrolled and
//! the warp synchronizes with `__syncwarp()`. The article's version relies
//! on the warp running in lockstep behind a `volatile` pointer; since Volta,
//! lanes of a warp may be scheduled independently, and that is a data race
//! (the guide shows racecheck's report). Here every round reads both
//! operands, synchronizes the warp, then writes.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::unrolled_last_warp {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = block_threads;  //!< one element per thread
static_assert(block_threads >= 64 && (block_threads & (block_threads - 1)) == 0, "a power of two, two warps or more");

//! @brief Block `b` sums `d_data[256 b, 256 b + 256)` in place and writes the sum to `d_block_sums[b]`.
template <typename T>
static __global__ void reduce_kernel(T* d_data, T* d_block_sums, int num_items)
{
    T* block_data = d_data + static_cast<std::size_t>(blockIdx.x) * items_per_block;
    const int count = min(items_per_block, num_items - static_cast<int>(blockIdx.x) * items_per_block);
    const int tid = threadIdx.x;
    for (int stride = 1; stride < block_threads / 64; stride *= 2) {
        const int index = 2 * stride * tid;
        if (index + stride < count) {
            block_data[index] += block_data[index + stride];
        }
        __syncthreads();
    }
    // The last six rounds involve threads 0..31 only: one warp, so __syncwarp() suffices. Each round
    // reads both operands, then the warp synchronizes before any lane writes.
    if (tid < 32) {
#pragma unroll
        for (int stride = block_threads / 64; stride < block_threads; stride *= 2) {
            const int index = 2 * stride * tid;
            const bool active = index + stride < count;
            const T pair_sum = active ? block_data[index] + block_data[index + stride] : T(0);
            __syncwarp();
            if (active) {
                block_data[index] = pair_sum;
            }
            __syncwarp();
        }
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

}  // namespace stepwise::reduction::unrolled_last_warp
