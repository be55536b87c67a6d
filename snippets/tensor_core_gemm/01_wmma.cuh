//! @file 01_wmma.cuh
//! @brief Tensor-core GEMM step 1: WMMA on bf16 tiles staged in shared memory (beyond the sources).
//!
//! Where the SGEMM chapter stopped, on this chapter's operation: C = A B with A
//! (M x K, row-major) and B (K x N, column-major) in bf16, products accumulated
//! in fp32, C (M x N, row-major) rounded to bf16. A block of 8 warps computes
//! a 128 x 128 tile of C; each warp 64 x 32 of it as 4 x 2 WMMA fragments of
//! 16 x 16 x 16. Tiles of A and B go through registers into padded shared rows,
//! and the accumulators leave through a small per-warp staging area.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

namespace stepwise::tensor_core_gemm::wmma_tiles {

using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

constexpr int BM = 128;  // block tile of C
constexpr int BN = 128;
constexpr int BK = 32;   // depth of K per shared-memory tile
constexpr int WM = 64;   // warp tile of C
constexpr int WN = 32;
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int ld = BK + 8;  // a shared row of 80 bytes: 8 rows of a fragment hit 8 different 16-byte bank groups
static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "whole WMMA fragments");
static_assert((BM * BK / 8) % threads == 0, "every thread copies the same number of 16-byte vectors");

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief Computes the block's 128 x 128 tile of C = A B.
static __global__ void __launch_bounds__(threads)
    gemm_kernel(int M, int N, int K, const bf16* __restrict__ A, const bf16* __restrict__ B, bf16* __restrict__ C)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __shared__ __align__(128) bf16 As[BM * ld];  // [m][k]
    __shared__ __align__(128) bf16 Bs[BN * ld];  // [n][k]: B's columns are contiguous in K
    __shared__ __align__(128) float staging[threads / 32][16 * 16];
    const int t = threadIdx.x;
    const int warp = t / 32;
    const int lane = t % 32;
    const int warp_m = warp / (BN / WN);
    const int warp_n = warp % (BN / WN);
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * BM;
    const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * BN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[WM / 16][WN / 16];
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) {
            wmma::fill_fragment(acc[i][j], 0.0f);
        }
    }

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < BM * BK / 8 / threads; ++i) {
            const int v = t + i * threads;  // 16-byte vector: 8 bf16 of one row
            const int r = v / (BK / 8);
            const int k = (v % (BK / 8)) * 8;
            *reinterpret_cast<uint4*>(&As[r * ld + k]) =
                *reinterpret_cast<const uint4*>(&A[(row0 + r) * K + k0 + k]);
            *reinterpret_cast<uint4*>(&Bs[r * ld + k]) =
                *reinterpret_cast<const uint4*>(&B[(col0 + r) * K + k0 + k]);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[WM / 16];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b[WN / 16];
#pragma unroll
            for (int i = 0; i < WM / 16; ++i) {
                wmma::load_matrix_sync(a[i], &As[(warp_m * WM + i * 16) * ld + kk], ld);
            }
#pragma unroll
            for (int j = 0; j < WN / 16; ++j) {
                wmma::load_matrix_sync(b[j], &Bs[(warp_n * WN + j * 16) * ld + kk], ld);
            }
#pragma unroll
            for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
                for (int j = 0; j < WN / 16; ++j) {
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
        __syncthreads();
    }

    // A fragment's layout in registers is opaque: store it as floats, then each lane rounds 8 of them to bf16 and
    // writes them as one 16-byte vector (half a row of the fragment).
    float* stage = staging[warp];
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) {
            wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int r = lane / 2;
            const int c = (lane % 2) * 8;
            __align__(16) bf16 out[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                out[e] = __float2bfloat16_rn(stage[r * 16 + c + e]);
            }
            const std::size_t row = row0 + warp_m * WM + i * 16 + r;
            const std::size_t col = col0 + warp_n * WN + j * 16 + c;
            *reinterpret_cast<uint4*>(&C[row * N + col]) = *reinterpret_cast<const uint4*>(out);
            __syncwarp();
        }
    }
#endif
}

//! What this step needs of the GPU and the build: bf16 tensor-core instructions, compute capability 8.0 or higher.
constexpr const char* requirement = "sm_80";

//! Built with those instructions this kernel is bounded to 128 threads, without them to 32: its attributes tell the
//! launcher which machine code the driver loaded for this GPU, without launching anything.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr int marker_threads = 128;
#else
constexpr int marker_threads = 32;
#endif
static __global__ void __launch_bounds__(marker_threads) requirement_marker_kernel() {}

//! @brief Whether the machine code the driver loaded for the current GPU has the instructions this step uses
//!        (see `requirement`); where it does not, the kernels are empty and the launcher does not launch them.
static inline bool requirement_met()
{
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, requirement_marker_kernel) != cudaSuccess) {
        cudaGetLastError();  // no code for this GPU at all: reported as cudaErrorNotSupported instead
        return false;
    }
    return attributes.maxThreadsPerBlock == 128;
}

//! @brief C = A B in bf16 with fp32 accumulation.
//! @param[in]  M       rows of A and C
//! @param[in]  N       columns of B and C
//! @param[in]  K       columns of A, rows of B
//! @param[in]  d_A     M x K bf16, row-major (`A[m * K + k]`)
//! @param[in]  d_B     K x N bf16, column-major (`B[n * K + k]`)
//! @param[out] d_C     M x N bf16, row-major (`C[m * N + n]`)
//! @param[in]  stream  stream to launch on
//! @pre M, N multiples of 128, K a multiple of 32, `M <= 65535 * 128`; buffers not null and 16-byte aligned; a GPU
//!      of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), else the launch's error
inline cudaError_t gemm(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, cudaStream_t stream = 0)
{
    if (M <= 0 || N <= 0 || K <= 0 || M % BM != 0 || N % BN != 0 || K % BK != 0 || M / BM > 65535 ||
        !aligned(d_A, 16) || !aligned(d_B, 16) || !aligned(d_C, 16) || d_A == nullptr || d_B == nullptr ||
        d_C == nullptr) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    gemm_kernel<<<dim3(N / BN, M / BM), threads, 0, stream>>>(M, N, K, d_A, d_B, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::tensor_core_gemm::wmma_tiles
