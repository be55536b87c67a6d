//! @file 06_vectorized_transposed_a.cuh
//! @brief SGEMM step 6: 16-byte loads, the tile of A transposed in shared memory.
//!
//! Step 5 loads global memory 4 bytes at a time, and a thread's 8 values of A
//! for one k lie in 8 rows of the tile. Global loads and the stores of C become
//! `float4`, and A is stored transposed, As[k][m], so that a thread reads its 8
//! values of A, like its 8 of B, as two 16-byte shared loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::vectorized_transposed_a {

//! @brief The arguments every launcher needs: positive sizes, buffers given.
inline bool basic_args_ok(int M, int N, int K, const float* A, const float* B, const float* C)
{
    return M > 0 && N > 0 && K > 0 && A != nullptr && B != nullptr && C != nullptr;
}

//! @brief Whether `p` is 16-byte aligned (cudaMalloc's buffers are).
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

//! @brief Four consecutive floats at `p` (16-byte aligned) in one load.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

//! @brief Stores four consecutive floats at `p` (16-byte aligned) in one store.
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

//! @brief `store_scaled` for four consecutive elements at `c` (16-byte aligned).
__device__ __forceinline__ void store_scaled4(float* c, float4 acc, float alpha, float beta)
{
    float4 r = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.0f) {
        const float4 old = load4(c);
        r.x += beta * old.x;
        r.y += beta * old.y;
        r.z += beta * old.z;
        r.w += beta * old.w;
    }
    store4(c, r);
}

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int threads = (BM / TM) * (BN / TN);  // 256
static_assert(BM * BK / 4 == threads && BK * BN / 4 == threads, "one float4 of each tile per thread");

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(threads)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    const int t = threadIdx.x;
    const int tr = t / (BN / TN);
    const int tc = t % (BN / TN);
    const int a_row = t / (BK / 4);  // the float4 of the A tile this thread loads
    const int a_col = (t % (BK / 4)) * 4;
    const int b_row = t / (BN / 4);  // and of the B tile
    const int b_col = (t % (BN / 4)) * 4;

    A += static_cast<std::size_t>(blockIdx.y) * BM * K;
    B += static_cast<std::size_t>(blockIdx.x) * BN;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 a4 = load4(&A[static_cast<std::size_t>(a_row) * K + a_col]);
        As[a_col + 0][a_row] = a4.x;
        As[a_col + 1][a_row] = a4.y;
        As[a_col + 2][a_row] = a4.z;
        As[a_col + 3][a_row] = a4.w;
        store4(&Bs[b_row][b_col], load4(&B[static_cast<std::size_t>(b_row) * N + b_col]));
        __syncthreads();
        A += BK;
        B += static_cast<std::size_t>(BK) * N;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = load4(&As[k][tr * TM]);
            const float4 a1 = load4(&As[k][tr * TM + 4]);
            const float4 b0 = load4(&Bs[k][tc * TN]);
            const float4 b1 = load4(&Bs[k][tc * TN + 4]);
            const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
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
        for (int j = 0; j < TN; j += 4) {
            store_scaled4(&C[static_cast<std::size_t>(tr * TM + i) * N + tc * TN + j],
                                  make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta);
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
//! @pre M, N multiples of 128, K a multiple of 8, `M <= 65535 * 128`; A, B, C 16-byte aligned; buffers not null
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || M % BM != 0 || N % BN != 0 || K % BK != 0 ||
        M / BM > 65535 || !aligned16(d_A) || !aligned16(d_B) || !aligned16(d_C)) {
        return cudaErrorInvalidValue;
    }
    sgemm_kernel<<<dim3(N / BN, M / BM), threads, 0, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm::vectorized_transposed_a
