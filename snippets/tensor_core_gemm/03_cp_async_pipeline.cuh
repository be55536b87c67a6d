//! @file 03_cp_async_pipeline.cuh
//! @brief Tensor-core GEMM step 3: a four-stage `cp.async` pipeline (beyond the sources).
//!
//! Step 2 loads a tile into registers, stores it to shared memory, waits for
//! the whole block, computes, and waits again: while the tile travels from
//! DRAM the tensor cores have nothing to do. Here the copies go straight from
//! global to shared memory (`cp.async`, no registers), into a ring of four
//! tiles: the copies of tile k + 3 are in flight while tile k is multiplied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace stepwise::tensor_core_gemm::cp_async_pipeline {

using bf16 = __nv_bfloat16;

constexpr int BM = 128;  // block tile of C
constexpr int BN = 128;
constexpr int BK = 64;   // 64 bf16: one 128-byte row per row of A or B
constexpr int WM = 64;   // warp tile of C: 4 x 4 mma tiles of 16 x 8
constexpr int WN = 32;
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int chunks = BK / 8;                        // 16-byte chunks per row
constexpr int stages = 4;                             // tiles of A and B in flight or in use
constexpr int stage_elems = (BM + BN) * BK;
constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * stage_elems * sizeof(bf16);  // 128 KiB
static_assert(chunks == 8, "the swizzle XORs the chunk index with the row's low 3 bits");
static_assert((BM * chunks) % threads == 0 && BM == BN, "every thread copies the same chunks of A and of B");

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief Where element 8 * `chunk` of row `row` of a swizzled tile is (in elements from the tile's start).
__device__ __forceinline__ int swizzled(int row, int chunk) { return row * BK + ((chunk ^ (row % 8)) * 8); }

//! @brief Starts a 16-byte copy from global to shared memory, bypassing L1; both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(bf16* smem_dst, const bf16* gmem_src)
{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src) : "memory");
}

//! @brief Closes the group of this thread's copies started since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

//! @brief Waits until at most `pending` of this thread's committed groups are still in flight. Other threads'
//!        copies are visible only after a __syncthreads() that follows their own wait.
template <int pending>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

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
    extern __shared__ __align__(16) bf16 smem[];  // stage s: A's tile [m][k], then B's [n][k], both swizzled
    const int t = threadIdx.x;
    const int warp = t / 32;
    const int lane = t % 32;
    const int warp_m = warp / (BN / WN);
    const int warp_n = warp % (BN / WN);
    const std::size_t row0 = static_cast<std::size_t>(blockIdx.y) * BM;
    const std::size_t col0 = static_cast<std::size_t>(blockIdx.x) * BN;
    const int tiles = K / BK;

    const auto load_tile = [&](int kt, int stage) {
        bf16* As = smem + stage * stage_elems;
        bf16* Bs = As + BM * BK;
#pragma unroll
        for (int i = 0; i < BM * chunks / threads; ++i) {
            const int v = t + i * threads;
            const int r = v / chunks;
            const int c = v % chunks;
            cp_async_16(&As[swizzled(r, c)], &A[(row0 + r) * K + kt * BK + c * 8]);
            cp_async_16(&Bs[swizzled(r, c)], &B[(col0 + r) * K + kt * BK + c * 8]);
        }
    };
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
        if (s < tiles) {
            load_tile(s, s);
        }
        cp_async_commit();
    }

    float acc[WM / 16][WN / 8][4] = {};
    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<stages - 2>();  // this thread's copies of tile kt have landed
        __syncthreads();              // everyone's have, and everyone is done with tile kt - 1's stage
        if (kt + stages - 1 < tiles) {
            load_tile(kt + stages - 1, (kt + stages - 1) % stages);
        }
        cp_async_commit();
        const bf16* As = smem + (kt % stages) * stage_elems;
        const bf16* Bs = As + BM * BK;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            warp_tile_k16(acc, As, Bs, warp_m, warp_n, kk, lane);
        }
    }
    store_warp_tile(acc, C, N, row0 + warp_m * WM, col0 + warp_n * WN, lane);
#endif
}

//! What this step needs of the GPU and the build: bf16 tensor-core instructions and `cp.async`, compute capability
//! 8.0 or higher.
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
//!         only for one), the error of the shared-memory opt-in, else the launch's error
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
    // Above 48 KiB a kernel must opt in to dynamic shared memory. Not cached in a static: a kernel included in
    // several translation units is a different kernel in each.
    const cudaError_t opt_in = cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(smem_bytes));
    if (opt_in != cudaSuccess) {
        return opt_in;
    }
    gemm_kernel<<<dim3(N / BN, M / BM), threads, smem_bytes, stream>>>(M, N, K, d_A, d_B, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::tensor_core_gemm::cp_async_pipeline
