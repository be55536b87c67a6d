//! @file 09_strided_index.cuh
//! @brief Reduction step 9 (Harris's kernel 2): interleaved addressing with
//!        a strided index, and shared-memory bank conflicts.
//!
//! Step 2's remapping, in shared memory: thread `t` works on element
//! `2 s t`, so whole warps retire together and the modulo is gone. But the
//! lanes of a warp now hit words `2 s` apart, and shared memory has 32 banks
//! of 4 bytes: at `s = 1` lanes 16 apart share a bank (a two-way conflict),
//! at `s = 2` four lanes do, and so on; conflicting accesses are served one
//! after another.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::strided_index {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = block_threads;  //!< one element per thread
static_assert((block_threads & (block_threads - 1)) == 0, "the tree pairs need a power of two");

//! @brief Block `b` sums its `items_per_block` elements in shared memory into `d_block_sums[b]`.
template <typename T>
static __global__ void reduce_kernel(const T* d_in, T* d_block_sums, int num_items)
{
    __shared__ T partial[block_threads];
    const int tid = threadIdx.x;
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * items_per_block + tid;
    partial[tid] = i < static_cast<std::size_t>(num_items) ? d_in[i] : T(0);
    __syncthreads();
    for (int stride = 1; stride < block_threads; stride *= 2) {
        const int index = 2 * stride * tid;
        if (index < block_threads) {
            partial[index] += partial[index + stride];
        }
        __syncthreads();
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
        reduce_kernel<<<blocks, block_threads, 0, stream>>>(in, out, n);
        if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess || blocks == 1) {
            return error;
        }
        in = out;
        n = blocks;
    }
}

}  // namespace stepwise::reduction::strided_index
