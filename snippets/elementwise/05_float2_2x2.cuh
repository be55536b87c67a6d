//! @file 05_float2_2x2.cuh
//! @brief Element-wise step 5: float2 loads and stores, 2 x 2 elements per thread.
//!
//! Back to computing the exact function (step 4 only holds for the first
//! update). Each thread loads one float2 from each of two rows: an even and
//! an odd column, so every thread evaluates both functions the same way and
//! no lane diverges, and two independent 8-byte loads are in flight per
//! thread where step 2 had one 4-byte load.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::elementwise::float2_2x2 {

constexpr int block_x = 256;  //!< threads per block along x, the launch shape of the update kernel

//! @brief `v + sqrt(log(v) + 1)`: the update of an odd column.
__device__ __forceinline__ float odd_column_update(float v) { return v + sqrtf(logf(v) + 1.f); }

//! @brief `v + sqrt(cos(v) + 1)`: the update of an even column.
__device__ __forceinline__ float even_column_update(float v) { return v + sqrtf(cosf(v) + 1.f); }

//! @brief Updates an (even column, odd column) pair.
__device__ __forceinline__ float2 update_pair(float2 v)
{
    return make_float2(even_column_update(v.x), odd_column_update(v.y));
}

//! @brief One thread per 2 x 2 elements: column pair `p` of rows `2y` and `2y + 1`.
static __global__ void update_kernel(float* d_data, int dimx, int dimy)
{
    const int pair = blockIdx.x * blockDim.x + threadIdx.x;
    const int pairs_per_row = dimx / 2;
    const int row = 2 * blockIdx.y;
    if (pair >= pairs_per_row) {
        return;
    }
    float2* d_pairs = reinterpret_cast<float2*>(d_data);
    const std::size_t i0 = static_cast<std::size_t>(row) * pairs_per_row + pair;
    const std::size_t i1 = i0 + pairs_per_row;
    const bool has_second_row = row + 1 < dimy;

    const float2 v0 = d_pairs[i0];
    const float2 v1 = has_second_row ? d_pairs[i1] : make_float2(1.f, 1.f);
    d_pairs[i0] = update_pair(v0);
    if (has_second_row) {
        d_pairs[i1] = update_pair(v1);
    }
}

//! @brief Updates a `dimx` x `dimy` row-major array in place, float2 at a time.
//! @param[in,out] d_data device array of `dimx * dimy` floats, 8-byte aligned
//! @param[in] dimx   number of columns (the fast index), even
//! @param[in] dimy   number of rows
//! @param[in] stream stream to launch on
//! @pre `dimx > 0` and even, `0 < dimy <= 131070`, `d_data` 8-byte aligned
//!      (cudaMalloc gives 256)
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t update(float* d_data, int dimx, int dimy, cudaStream_t stream = 0)
{
    constexpr int rows_per_thread = 2;
    static_assert(alignof(float2) == 2 * sizeof(float), "a float2 covers one even and one odd column");
    if (d_data == nullptr || dimx <= 0 || dimx % 2 != 0 || dimy <= 0 || dimy > 65535 * rows_per_thread ||
        reinterpret_cast<std::size_t>(d_data) % alignof(float2) != 0) {
        return cudaErrorInvalidValue;
    }
    const int pairs_per_row = dimx / 2;
    const dim3 block(block_x, 1);
    const dim3 grid((pairs_per_row + block_x - 1) / block_x, (dimy + rows_per_thread - 1) / rows_per_thread);
    update_kernel<<<grid, block, 0, stream>>>(d_data, dimx, dimy);
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise::float2_2x2
