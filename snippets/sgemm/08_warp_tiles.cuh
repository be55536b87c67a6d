//! @file 08_warp_tiles.cuh
//! @brief SGEMM step 8: Warp tiles: 64 x 32 per warp, 2 x 2 sub-tiles of 4 x 4 per thread.
//!
//! Step 7 needs a swizzle to read shared memory without conflicts, and a warp's
//! threads are spread over the whole block tile. Here each warp owns a compact
//! 64 x 32 tile of C and each thread four 4 x 4 sub-tiles of it, 32 rows and 16
//! columns apart: a warp's 16-byte reads of A are 8 distinct chunks, of B 4
//! chunks broadcast to 8 lanes, conflict-free by construction. The tile depth
//! doubles to 16, halving the barriers per FMA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::warp_tiles {

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
constexpr int BK = 16;
constexpr int WM = 64;  // warp tile
constexpr int WN = 32;
constexpr int TM = 8;  // thread tile
constexpr int TN = 8;
constexpr int lanes_m = WM / TM;  // 8: a warp's lanes form lanes_m x lanes_n
constexpr int lanes_n = WN / TN;  // 4
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int lda = BM + 4;                          // padded row of the transposed A tile
static_assert(lanes_m * lanes_n == 32, "a warp is 32 lanes");
static_assert(BM * BK / 4 == 2 * threads && BK * BN / 4 == 2 * threads, "two float4 of each tile per thread");

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(threads)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
    __shared__ __align__(16) float As[BK][lda];
    __shared__ __align__(16) float Bs[BK][BN];
    const int t = threadIdx.x;
    const int warp = t / 32;
    const int lane = t % 32;
    const int warp_m = warp / (BN / WN);
    const int warp_n = warp % (BN / WN);
    const int frag_m = warp_m * WM + (lane / lanes_n) * 4;  // first row of this thread's first 4 x 4
    const int frag_n = warp_n * WN + (lane % lanes_n) * 4;  // first column

    A += static_cast<std::size_t>(blockIdx.y) * BM * K;
    B += static_cast<std::size_t>(blockIdx.x) * BN;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int a_row = t / 2;
            const int a_col = i * 8 + (t % 2) * 4;
            const float4 a4 = load4(&A[static_cast<std::size_t>(a_row) * K + a_col]);
            As[a_col + 0][a_row] = a4.x;
            As[a_col + 1][a_row] = a4.y;
            As[a_col + 2][a_row] = a4.z;
            As[a_col + 3][a_row] = a4.w;
            const int e = t + i * threads;
            const int b_row = e / (BN / 4);
            const int b_col = (e % (BN / 4)) * 4;
            store4(&Bs[b_row][b_col], load4(&B[static_cast<std::size_t>(b_row) * N + b_col]));
        }
        __syncthreads();
        A += BK;
        B += static_cast<std::size_t>(BK) * N;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = load4(&As[k][frag_m]);
            const float4 a1 = load4(&As[k][frag_m + WM / 2]);
            const float4 b0 = load4(&Bs[k][frag_n]);
            const float4 b1 = load4(&Bs[k][frag_n + WN / 2]);
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
        const int row = frag_m + (i / 4) * (WM / 2) + i % 4;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = frag_n + (j / 4) * (WN / 2);
            store_scaled4(&C[static_cast<std::size_t>(row) * N + col],
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
//! @pre M, N multiples of 128, K a multiple of 16, `M <= 65535 * 128`; A, B, C 16-byte aligned; buffers not null
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

}  // namespace stepwise::sgemm::warp_tiles
