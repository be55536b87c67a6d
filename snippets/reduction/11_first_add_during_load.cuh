//! @file 11_first_add_during_load.cuh
//! @brief Reduction step 11 (Harris's kernel 4): the first add during the load.
//!
//! Step 10 leaves half its threads idle from the first round. Here each
//! block covers twice the elements and every thread adds two of them, a
//! block apart, as it loads: half the blocks, and the first round of the tree
//! done in registers. The other article's step 5 does the same in global
//! memory.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::first_add_during_load {

constexpr int block_threads = 256;              //!< threads per block
constexpr int items_per_block = 2 * block_threads;  //!< two elements per thread
static_assert((block_threads & (block_threads - 1)) == 0, "the tree pairs need a power of two");

//! @brief Block `b` sums its `items_per_block` elements in shared memory into `d_block_sums[b]`.
template <typename T>
static __global__ void reduce_kernel(const T* d_in, T* d_block_sums, int num_items)
{
    __shared__ T partial[block_threads];
    const int tid = threadIdx.x;
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * items_per_block + tid;
    const std::size_t n = static_cast<std::size_t>(num_items);
    partial[tid] = (i < n ? d_in[i] : T(0)) + (i + block_threads < n ? d_in[i + block_threads] : T(0));
    __syncthreads();
    for (int stride = block_threads / 2; stride > 0; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
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

}  // namespace stepwise::reduction::first_add_during_load
