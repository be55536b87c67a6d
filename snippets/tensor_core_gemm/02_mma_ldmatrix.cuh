//! @file 02_mma_ldmatrix.cuh
//! @brief Tensor-core GEMM step 2: `mma.sync` m16n8k16 fed by `ldmatrix` from a swizzled shared layout (beyond the
//!        sources).
//!
//! WMMA hides the fragments' layout, so step 1 pads its shared rows and
//! stages its results through shared memory. Here the warp issues the PTX
//! instructions under WMMA itself: `ldmatrix.x4` loads four 8 x 8 tiles of
//! bf16 from shared memory into exactly the registers `mma.sync` wants, and
//! the accumulators' layout is documented, so each thread writes its results
//! straight to C. The tiles are 64 deep (rows of 128 bytes) and unpadded:
//! the 16-byte chunk `c` of row `r` is stored at chunk `c ^ (r % 8)`, so the
//! eight rows one `ldmatrix` tile reads fall in eight different bank groups.
//! This XOR is the 128-byte swizzle the TMA and wgmma of later steps use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace stepwise::tensor_core_gemm::mma_ldmatrix {

using bf16 = __nv_bfloat16;

constexpr int BM = 128;  // block tile of C
constexpr int BN = 128;
constexpr int BK = 64;   // 64 bf16: one 128-byte row per row of A or B
constexpr int WM = 64;   // warp tile of C: 4 x 4 mma tiles of 16 x 8
constexpr int WN = 32;
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int chunks = BK / 8;                        // 16-byte chunks per row
static_assert(chunks == 8, "the swizzle XORs the chunk index with the row's low 3 bits");
static_assert((BM * chunks) % threads == 0 && BM == BN, "every thread copies the same chunks of A and of B");

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief Where element 8 * `chunk` of row `row` of a swizzled tile is (in elements from the tile's start).
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * BK + ((chunk ^ (row % 8)) * 8); }

//! @brief Loads four 8 x 8 bf16 tiles; lane `l` gives the address of row `l % 8` of tile `l / 8`.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const bf16* smem_row)
{
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

//! @brief d += a b for one 16 x 8 x 16 tile: a row-major 16 x 16, b column-major 16 x 8, fp32 accumulators.
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

//! @brief One 16 x 16 slice of K of the warp's tile: 4 + 2 `ldmatrix.x4`, 16 `mma.sync`.
__device__ __forceinline__ void warp_tile_k16(float (&acc)[WM / 16][WN / 8][4], const bf16* As, const bf16* Bs,
                                              int warp_m, int warp_n, int kk, int lane)
{
    unsigned a[WM / 16][4];
    unsigned b[WN / 16][4];
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {  // tiles: rows 0-7 | 8-15, k 0-7 | 8-15: a0..a3 of mma's A fragment
        const int row = warp_m * WM + i * 16 + lane % 16;
        ldmatrix_x4(a[i], &As[swizzled(row, kk * 2 + lane / 16)]);
    }
#pragma unroll
    for (int j = 0; j < WN / 16; ++j) {  // tiles: n 0-7 k 0-7, n 0-7 k 8-15, n 8-15 k 0-7, n 8-15 k 8-15
        const int row = warp_n * WN + j * 16 + lane % 8 + (lane / 16) * 8;
        ldmatrix_x4(b[j], &Bs[swizzled(row, kk * 2 + (lane / 8) % 2)]);
    }
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            mma_16x8x16(acc[i][j], a[i], b[j / 2][(j % 2) * 2], b[j / 2][(j % 2) * 2 + 1]);
        }
    }
}

//! @brief Rounds the warp's accumulators to bf16 and writes them to C: each thread holds, per 16 x 8 tile, two
//!        adjacent columns of row `lane / 4` and of row `lane / 4 + 8`.
__device__ __forceinline__ void store_warp_tile(const float (&acc)[WM / 16][WN / 8][4], bf16* C, int N,
                                                std::size_t row0, std::size_t col0, int lane)
{
#pragma unroll
    for (int i = 0; i < WM / 16; ++i) {
#pragma unroll
        for (int j = 0; j < WN / 8; ++j) {
            const std::size_t row = row0 + i * 16 + lane / 4;
            const std::size_t col = col0 + j * 8 + (lane % 4) * 2;
            *reinterpret_cast<__nv_bfloat162*>(&C[row * N + col]) = __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<__nv_bfloat162*>(&C[(row + 8) * N + col]) =
                __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
        }
    }
}

//! @brief Computes the block's 128 x 128 tile of C = A B.
static __global__ void __launch_bounds__(threads)
    gemm_kernel(int M, int N, int K, const bf16* __restrict__ A, const bf16* __restrict__ B, bf16* __restrict__ C)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __shared__ __align__(1024) bf16 As[BM * BK];  // [m][k], swizzled
    __shared__ __align__(1024) bf16 Bs[BN * BK];  // [n][k], swizzled
    const int t = threadIdx.x;
    const int warp = t / 32;
    const int lane = t % 32;
    const int warp_m = warp / (BN / WN);
    const int warp_n = warp % (BN / WN);
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * BM;
    const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * BN;

    float acc[WM / 16][WN / 8][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = 0; i < BM * chunks / threads; ++i) {
            const int v = t + i * threads;
            const int r = v / chunks;
            const int c = v % chunks;
            *reinterpret_cast<uint4*>(&As[swizzled(r, c)]) =
                *reinterpret_cast<const uint4*>(&A[(row0 + r) * K + k0 + c * 8]);
            *reinterpret_cast<uint4*>(&Bs[swizzled(r, c)]) =
                *reinterpret_cast<const uint4*>(&B[(col0 + r) * K + k0 + c * 8]);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            warp_tile_k16(acc, As, Bs, warp_m, warp_n, kk, lane);
        }
        __syncthreads();
    }
    store_warp_tile(acc, C, N, row0 + warp_m * WM, col0 + warp_n * WN, lane);
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
//! @pre M, N multiples of 128, K a multiple of 64, `M <= 65535 * 128`; buffers not null and 16-byte aligned; a GPU
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

}  // namespace stepwise::tensor_core_gemm::mma_ldmatrix
