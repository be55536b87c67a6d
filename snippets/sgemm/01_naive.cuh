//! @file 01_naive.cuh
//! @brief SGEMM step 1: One thread per element of C (the source's naive kernel).
//!
//! Each thread computes one element of C as a dot product of a row of A and a
//! column of B, read straight from global memory. Threads are numbered along M:
//! the 32 lanes of a warp walk down a column of C, so each lane reads its own row
//! of A, K floats from its neighbours', and writes its own row of C. Any size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::naive {

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

constexpr int block_side = 32;

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(block_side* block_side)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
    const int row = blockIdx.x * block_side + threadIdx.x;  // consecutive threads: consecutive rows
    const int col = blockIdx.y * block_side + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[static_cast<std::size_t>(row) * K + k] * B[static_cast<std::size_t>(k) * N + col];
    }
    store_scaled(&C[static_cast<std::size_t>(row) * N + col], acc, alpha, beta);
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
//! @pre M, N, K any positive sizes, `N <= 65535 * 32`; buffers not null
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || ceil_div(N, block_side) > 65535) {
        return cudaErrorInvalidValue;
    }
    const dim3 block(block_side, block_side);
    const dim3 grid(ceil_div(M, block_side), ceil_div(N, block_side));
    sgemm_kernel<<<grid, block, 0, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm::naive
