//! @file 17_single_pass.cuh
//! @brief Reduction step 17 (beyond the articles): one launch; the last block to finish adds the block sums.
//!
//! Step 16's second launch costs a launch gap for a few hundred additions.
//! Here every block writes its sum, makes it visible device-wide with
//! `__threadfence()`, and takes a ticket from an atomic counter; the block
//! that draws the last ticket knows all the sums are written, adds them and
//! writes the result. The counter lives in the workspace and is zeroed by a
//! `cudaMemsetAsync` in the same stream before the kernel. An input that one
//! block covers in one round of loads goes to a lean second kernel: a single
//! block (256 threads up to 4,099 items, 1,024 up to 16,387) writes the
//! result itself; one launch, no counter, no memset. At those sizes the call
//! takes about one launch's time, and two details show: the last, partial
//! round of loads is issued at once like the others, and thread 0 adds the
//! warps' sums itself instead of a second round of shuffles. The order of the
//! additions is fixed, so float results do not vary from run to run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::reduction::single_pass {

constexpr int block_threads = 1024;       //!< threads per block: the largest, two blocks per SM
constexpr int small_block_threads = 256;  //!< threads of the single block that sums at most 4,099 items
constexpr int vectors_in_flight = 4;      //!< 16-byte loads a thread issues before it adds any

//! @brief The 16-byte vector of four `T`.
template <typename T>
struct vector4;
template <>
struct vector4<int> {
    using type = int4;
};
template <>
struct vector4<float> {
    using type = float4;
};

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

//! @brief The sum of `value` over the block, in thread 0. Every thread of the block must call it.
template <int BlockThreads, typename T>
__device__ __forceinline__ T block_sum(T value)
{
    static_assert(BlockThreads % 32 == 0 && BlockThreads <= 1024, "whole warps, at most 32 of them");
    __shared__ T warp_sums[BlockThreads / 32];
    value = warp_sum(value);
    if (threadIdx.x % 32 == 0) {
        warp_sums[threadIdx.x / 32] = value;
    }
    __syncthreads();
    if (threadIdx.x != 0) {
        return T(0);
    }
    T total = warp_sums[0];  // thread 0 alone: independent shared loads, no second round of shuffles
#pragma unroll
    for (int w = 1; w < BlockThreads / 32; ++w) {
        total += warp_sums[w];
    }
    return total;
}

//! @brief This thread's share of `d_in`: a grid-stride loop over 16-byte vectors, then the tail.
template <int BlockThreads, typename T>
__device__ __forceinline__ T thread_sum(const T* d_in, int num_items)
{
    using Vector = typename vector4<T>::type;
    const Vector* d_vectors = reinterpret_cast<const Vector*>(d_in);
    const std::size_t num_vectors = static_cast<std::size_t>(num_items) / 4;
    const std::size_t threads = static_cast<std::size_t>(gridDim.x) * BlockThreads;
    std::size_t i = static_cast<std::size_t>(blockIdx.x) * BlockThreads + threadIdx.x;
    T sum = T(0);
    for (; i + (vectors_in_flight - 1) * threads < num_vectors; i += vectors_in_flight * threads) {
        Vector v[vectors_in_flight];
#pragma unroll
        for (int k = 0; k < vectors_in_flight; ++k) {
            v[k] = d_vectors[i + k * threads];
        }
#pragma unroll
        for (int k = 0; k < vectors_in_flight; ++k) {
            sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
        }
    }
    Vector v[vectors_in_flight - 1];  // the last, partial round: its loads too are all issued before any add
#pragma unroll
    for (int k = 0; k < vectors_in_flight - 1; ++k) {
        v[k] = i + k * threads < num_vectors ? d_vectors[i + k * threads] : Vector{};
    }
#pragma unroll
    for (int k = 0; k < vectors_in_flight - 1; ++k) {
        sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    const int tail = num_items % 4;
    if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < tail) {
        sum += d_in[num_items - tail + threadIdx.x];
    }
    return sum;
}

//! @brief A single block sums all of `d_in` into `*d_out`.
template <int BlockThreads, typename T>
static __global__ void __launch_bounds__(BlockThreads) single_block_kernel(const T* d_in, T* d_out, int num_items)
{
    const T sum = block_sum<BlockThreads>(thread_sum<BlockThreads>(d_in, num_items));
    if (threadIdx.x == 0) {
        *d_out = sum;
    }
}

//! @brief Block `b` sums its share of `d_in` into `d_block_sums[b]`; the last block to finish sums those
//!        into `*d_out`. `*d_tickets` must be 0 at launch.
template <int BlockThreads, typename T>
static __global__ void __launch_bounds__(BlockThreads)
    reduce_kernel(const T* d_in, T* d_block_sums, unsigned* d_tickets, T* d_out, int num_items)
{
    __shared__ bool last_block;
    const T sum = block_sum<BlockThreads>(thread_sum<BlockThreads>(d_in, num_items));
    if (threadIdx.x == 0) {
        d_block_sums[blockIdx.x] = sum;
        __threadfence();  // the sum is visible to every block before the ticket is taken
        last_block = atomicAdd(d_tickets, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last_block) {
        T total = T(0);
        for (int b = threadIdx.x; b < static_cast<int>(gridDim.x); b += BlockThreads) {
            total += __ldcg(&d_block_sums[b]);  // from L2: this SM's L1 may hold nothing newer
        }
        total = block_sum<BlockThreads>(total);
        if (threadIdx.x == 0) {
            *d_out = total;
        }
    }
}

//! @brief Sums `num_items` values into `*d_out`. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes`, or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size
//! @param[in] d_in       `num_items` values (left unchanged), 16-byte aligned
//! @param[out] d_out     one value: the sum
//! @param[in] num_items  number of values
//! @param[in] stream     stream to launch on (its device is the current device)
//! @pre `num_items > 0`; `d_in` 16-byte and `d_temp_storage` 256-byte aligned (cudaMalloc's are);
//!      `T` is `int` or `float`
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the
//!         first CUDA error
template <typename T>
inline cudaError_t sum(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in, T* d_out,
                       int num_items, cudaStream_t stream = 0)
{
    if (d_in == nullptr || d_out == nullptr || num_items <= 0 || reinterpret_cast<std::size_t>(d_in) % 16 != 0) {
        return cudaErrorInvalidValue;
    }
    int device = 0;
    int sm_count = 0;
    int blocks_per_sm = 0;
    if (cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) {
        return error;
    }
    if (cudaError_t error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
        error != cudaSuccess) {
        return error;
    }
    if (cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &blocks_per_sm, reduce_kernel<block_threads, T>, block_threads, 0);
        error != cudaSuccess) {
        return error;
    }
    const int vectors_per_block = block_threads * vectors_in_flight;
    const int blocks_needed = (num_items / 4 + vectors_per_block - 1) / vectors_per_block;
    const int blocks = std::max(1, std::min(blocks_needed, sm_count * blocks_per_sm));
    const std::size_t partials_bytes = (static_cast<std::size_t>(blocks) * sizeof(T) + 255) / 256 * 256;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = partials_bytes + sizeof(unsigned);
        return cudaSuccess;
    }
    if (temp_storage_bytes < partials_bytes + sizeof(unsigned)) {
        return cudaErrorInvalidValue;
    }
    if (num_items / 4 <= small_block_threads * vectors_in_flight) {
        single_block_kernel<small_block_threads><<<1, small_block_threads, 0, stream>>>(d_in, d_out, num_items);
        return cudaGetLastError();
    }
    if (blocks == 1) {
        single_block_kernel<block_threads><<<1, block_threads, 0, stream>>>(d_in, d_out, num_items);
        return cudaGetLastError();
    }
    T* d_block_sums = static_cast<T*>(d_temp_storage);
    unsigned* d_tickets = reinterpret_cast<unsigned*>(static_cast<char*>(d_temp_storage) + partials_bytes);
    if (cudaError_t error = cudaMemsetAsync(d_tickets, 0, sizeof(unsigned), stream); error != cudaSuccess) {
        return error;
    }
    reduce_kernel<block_threads><<<blocks, block_threads, 0, stream>>>(d_in, d_block_sums, d_tickets, d_out,
                                                                        num_items);
    return cudaGetLastError();
}

}  // namespace stepwise::reduction::single_pass
