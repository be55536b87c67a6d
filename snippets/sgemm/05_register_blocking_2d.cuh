//! @file 05_register_blocking_2d.cuh
//! @brief SGEMM step 5: An 8 x 8 register block per thread (the source's register blocking).
//!
//! Step 4 reuses B from registers but not A. Each of 256 threads now computes an
//! 8 x 8 block of a 128 x 128 tile of C as outer products: per step of k, 8 values
//! of A and 8 of B from shared memory feed 64 FMAs. The tile sizes sit inside
//! the SC'10 bounds the chapter works out for the GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::register_blocking_2d {

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

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int threads = (BM / TM) * (BN / TN);  // 256

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(threads)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int t = threadIdx.x;
    const int tr = t / (BN / TN);
    const int tc = t % (BN / TN);
    // Loads: each pass of the 256 threads covers 32 rows of the A tile and 2 rows of the B tile.
    const int a_row = t / BK;
    const int a_col = t % BK;
    constexpr int a_row_step = threads / BK;
    const int b_row = t / BN;
    const int b_col = t % BN;
    constexpr int b_row_step = threads / BN;

    A += static_cast<std::size_t>(blockIdx.y) * BM * K;
    B += static_cast<std::size_t>(blockIdx.x) * BN;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    float acc[TM][TN] = {};
    float a[TM];
    float b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < BM; r += a_row_step) {
            As[a_row + r][a_col] = A[static_cast<std::size_t>(a_row + r) * K + a_col];
        }
#pragma unroll
        for (int r = 0; r < BK; r += b_row_step) {
            Bs[b_row + r][b_col] = B[static_cast<std::size_t>(b_row + r) * N + b_col];
        }
        __syncthreads();
        A += BK;
        B += static_cast<std::size_t>(BK) * N;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                a[i] = As[tr * TM + i][k];
            }
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                b[j] = Bs[k][tc * TN + j];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += a[i] * b[j];
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            store_scaled(&C[static_cast<std::size_t>(tr * TM + i) * N + tc * TN + j], acc[i][j], alpha,
                                 beta);
        }
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
//! @pre M, N multiples of 128, K a multiple of 8, `M <= 65535 * 128`; buffers not null
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || M % BM != 0 || N % BN != 0 || K % BK != 0 ||
        M / BM > 65535) {
        return cudaErrorInvalidValue;
    }
    sgemm_kernel<<<dim3(N / BN, M / BM), threads, 0, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm::register_blocking_2d
