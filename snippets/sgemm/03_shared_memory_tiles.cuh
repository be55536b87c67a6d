//! @file 03_shared_memory_tiles.cuh
//! @brief SGEMM step 3: Tiles of A and B in shared memory (the source's shared-memory blocking).
//!
//! Step 2 reads every element of A and B from global memory once per use: N
//! and M times. A block of 32 x 32 threads now computes a 32 x 32 tile of C and
//! walks along K in 32 x 32 tiles of A and B staged in shared memory, so each
//! float fetched from global memory serves 32 FMAs. Edges are padded with
//! zeros: any size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::shared_memory_tiles {

//! @brief `a / b` rounded up.
__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

//! @brief The arguments every launcher needs: positive sizes, buffers given.
inline bool basic_args_ok(int M, int N, int K, const float* A, const float* B, const float* C)
{
    return M > 0 && N > 0 && K > 0 && A != nullptr && B != nullptr && C != nullptr;
}

//! @brief `*c = alpha * acc + beta * *c`, without reading `*c` when beta == 0 (the old C may hold NaN).
__device__ __forceinline__ void store_scaled(float* c, float acc, float alpha, float beta)
{
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
}

constexpr int tile = 32;

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(tile* tile)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
    __shared__ float As[tile][tile];
    __shared__ float Bs[tile][tile];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * tile + ty;
    const int col = blockIdx.x * tile + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += tile) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[static_cast<std::size_t>(row) * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[static_cast<std::size_t>(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < tile; ++k) {
            acc += As[ty][k] * Bs[k][tx];  // As[ty][k]: one address per warp (broadcast)
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        store_scaled(&C[static_cast<std::size_t>(row) * N + col], acc, alpha, beta);
    }
}

//! @brief `C = alpha * A * B + beta * C`, row-major; C is not read when `beta == 0`.
//! @param[in]     M       rows of A and C
//! @param[in]     N       columns of B and C
//! @param[in]     K       columns of A, rows of B
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre M, N, K any positive sizes, `M <= 65535 * 32`; buffers not null
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || ceil_div(M, tile) > 65535) {
        return cudaErrorInvalidValue;
    }
    const dim3 block(tile, tile);
    const dim3 grid(ceil_div(N, tile), ceil_div(M, tile));
    sgemm_kernel<<<grid, block, 0, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm::shared_memory_tiles
