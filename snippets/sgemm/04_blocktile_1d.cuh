//! @file 04_blocktile_1d.cuh
//! @brief SGEMM step 4: Eight results per thread, down a column of C.
//!
//! Step 3 needs two shared-memory loads per FMA. Here each of 512 threads
//! computes 8 results down a column of a 64 x 64 tile of C: one value of B read
//! from shared memory serves 8 FMAs, and the 8 values of A are warp-wide
//! broadcasts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::blocktile_1d {

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

constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int threads = BM * BN / TM;  // 512
static_assert(BM * BK == threads && BK * BN == threads, "one element of each tile per thread");

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(threads)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int t = threadIdx.x;
    const int col = t % BN;          // this thread's column of the C tile...
    const int row0 = (t / BN) * TM;  // ...and the first of its TM rows (the same for a whole warp)
    const int a_row = t / BK;        // the element of the A tile it loads
    const int a_col = t % BK;
    const int b_row = t / BN;  // the element of the B tile it loads
    const int b_col = t % BN;

    A += static_cast<std::size_t>(blockIdx.y) * BM * K;
    B += static_cast<std::size_t>(blockIdx.x) * BN;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[a_row][a_col] = A[static_cast<std::size_t>(a_row) * K + a_col];
        Bs[b_row][b_col] = B[static_cast<std::size_t>(b_row) * N + b_col];
        __syncthreads();
        A += BK;
        B += static_cast<std::size_t>(BK) * N;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][col];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                acc[i] += As[row0 + i][k] * b;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        store_scaled(&C[static_cast<std::size_t>(row0 + i) * N + col], acc[i], alpha, beta);
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
//! @pre M, N multiples of 64, K a multiple of 8, `M <= 65535 * 64`; buffers not null
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

}  // namespace stepwise::sgemm::blocktile_1d
