//! @file 07_grid_stride.cuh
//! @brief Element-wise step 7 (beyond the article): a grid that fills the GPU
//!        exactly once, each thread striding over several float4.
//!
//! Step 6 launches one thread per float4: 4096 blocks for the assignment's
//! size, about four waves on an H100, and the last wave leaves SMs idle
//! while it drains. Here the grid is exactly as many blocks as the GPU holds
//! at once (asked of the occupancy calculator), and each thread loops with a
//! stride of the whole grid, loading two float4 before it computes either,
//! so every SM keeps independent loads in flight while it does the math.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::grid_stride {

//! @brief `v + sqrt(log(v) + 1)`: the update of an odd column.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(logf(v) + 1.f); }

//! @brief `v + sqrt(cos(v) + 1)`: the update of an even column.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(cosf(v) + 1.f); }

//! @brief Updates columns (even, odd, even, odd).
__device__ __forceinline__ float4 update_quad(float4 v)
{
    return make_float4(even_column_update(v.x), odd_column_update(v.y), even_column_update(v.z),
                       odd_column_update(v.w));
}

constexpr int block_threads = 256;  //!< threads per block
constexpr int quads_in_flight = 2;  //!< float4 loaded per thread before any is computed

//! @brief Grid-stride loop over the flattened array, `quads_in_flight` float4 per iteration.
static __global__ void __launch_bounds__(block_threads) update_kernel(float4* d_quads, std::size_t num_quads)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * block_threads;
    std::size_t i = static_cast<std::size_t>(blockIdx.x) * block_threads + threadIdx.x;
    for (; i + (quads_in_flight - 1) * stride < num_quads; i += quads_in_flight * stride) {
        float4 v[quads_in_flight];
#pragma unroll
        for (int k = 0; k < quads_in_flight; ++k) {
            v[k] = d_quads[i + k * stride];
        }
#pragma unroll
        for (int k = 0; k < quads_in_flight; ++k) {
            d_quads[i + k * stride] = update_quad(v[k]);
        }
    }
    for (; i < num_quads; i += stride) {
        d_quads[i] = update_quad(d_quads[i]);
    }
}

//! @brief Updates a `dimx` x `dimy` row-major array in place with one resident wave of blocks.
//! @param[in,out] d_data device array of `dimx * dimy` floats, 16-byte aligned
//! @param[in] dimx   number of columns (the fast index), a multiple of 4
//! @param[in] dimy   number of rows
//! @param[in] stream stream to launch on (its device is the current device)
//! @pre `dimx > 0` and a multiple of 4, `dimy > 0`, `d_data` 16-byte aligned
//! @return `cudaErrorInvalidValue` if a precondition fails, else the first CUDA error
inline cudaError_t update(float* d_data, int dimx, int dimy, cudaStream_t stream = 0)
{
    static_assert(sizeof(float4) == 4 * sizeof(float), "a float4 covers columns 4k .. 4k+3");
    if (d_data == nullptr || dimx <= 0 || dimx % 4 != 0 || dimy <= 0 ||
        reinterpret_cast<std::size_t>(d_data) % alignof(float4) != 0) {
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
    if (cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, update_kernel,
                                                                          block_threads, 0);
        error != cudaSuccess) {
        return error;
    }
    const std::size_t num_quads = static_cast<std::size_t>(dimx / 4) * dimy;
    const std::size_t blocks_needed = (num_quads + block_threads - 1) / block_threads;
    const std::size_t resident_blocks = static_cast<std::size_t>(sm_count) * blocks_per_sm;
    const std::size_t blocks = blocks_needed < resident_blocks ? blocks_needed : resident_blocks;
    update_kernel<<<static_cast<unsigned>(blocks), block_threads, 0, stream>>>(reinterpret_cast<float4*>(d_data),
                                                                                num_quads);
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise::grid_stride
