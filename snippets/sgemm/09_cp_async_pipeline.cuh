//! @file 09_cp_async_pipeline.cuh
//! @brief SGEMM step 9: A three-stage cp.async pipeline.
//!
//! Step 8 loads a tile, waits at a barrier, multiplies, and waits again before
//! the next load: the FMA units idle while loads are in flight. cp.async copies
//! global to shared memory without passing through registers or making the
//! thread wait; a ring of three stages keeps the next two tiles in flight while
//! the current one is multiplied, with one barrier per tile. A is copied 4
//! bytes at a time, transposing on the way; B 16 bytes at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::cp_async_pipeline {

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

//! @brief Starts a 4-byte copy from global to shared memory (cp.async, cached in L1: the only variant
//!        below 16 bytes); it lands by the cp_async_wait that retires its group.
__device__ __forceinline__ void cp_async_4(float* smem_dst, const float* gmem_src)
{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem_src) : "memory");
}

//! @brief Starts a 16-byte copy from global to shared memory, bypassing L1; both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(float* smem_dst, const float* gmem_src)
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

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 16;
constexpr int WM = 64;
constexpr int WN = 32;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int stages = 3;
constexpr int lanes_n = WN / TN;
constexpr int threads = (BM / WM) * (BN / WN) * 32;  // 256
constexpr int lda = BM + 4;
constexpr int a_stage = BK * lda;  // floats per stage
constexpr int b_stage = BK * BN;
constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * (a_stage + b_stage) * sizeof(float);
static_assert(threads == 256 && BM == 128 && BN == 128 && BK == 16, "the copy maps below assume these");

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
static __global__ void __launch_bounds__(threads)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    extern __shared__ __align__(128) float smem[];
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int frag_m = (warp / (BN / WN)) * WM + (lane / lanes_n) * 4;
    const int frag_n = (warp % (BN / WN)) * WN + (lane % lanes_n) * 4;

    // Copy maps. A: thread t copies k = t%8 and t%8 + 8 of rows t/8 + 32r (r < 4), 4 bytes at a time
    // into As[k][m]: a warp reads 4 rows x 32 bytes and writes 32 distinct banks. B: rows t/32 and
    // t/32 + 8, columns (t%32)*4 .. +3, 16 bytes at a time.
    const int a_m = threadIdx.x / 8;
    const int a_k = threadIdx.x % 8;
    const int b_k = threadIdx.x / 32;
    const int b_n = (threadIdx.x % 32) * 4;
    const float* a_src = A + static_cast<std::size_t>(blockIdx.y) * BM * K + static_cast<std::size_t>(a_m) * K + a_k;
    const float* b_src = B + static_cast<std::size_t>(b_k) * N + static_cast<std::size_t>(blockIdx.x) * BN + b_n;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    const int tiles = K / BK;
    auto load_tile = [&](int stage) {  // the next tile, into `stage`
        float* As = smem + stage * (a_stage + b_stage) + a_k * lda + a_m;
        float* Bs = smem + stage * (a_stage + b_stage) + a_stage + b_k * BN + b_n;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            cp_async_4(As + r * 32, a_src + static_cast<std::size_t>(r * 32) * K);
            cp_async_4(As + 8 * lda + r * 32, a_src + static_cast<std::size_t>(r * 32) * K + 8);
        }
        cp_async_16(Bs, b_src);
        cp_async_16(Bs + 8 * BN, b_src + static_cast<std::size_t>(8) * N);
        a_src += BK;
        b_src += static_cast<std::size_t>(BK) * N;
    };

    // Prologue: tiles 0 .. stages-2 in flight, one commit group each (empty groups past the end keep
    // the count of groups, and so the wait below, the same for every K).
#pragma unroll
    for (int s = 0; s < stages - 1; ++s) {
        if (s < tiles) {
            load_tile(s);
        }
        cp_async_commit();
    }

    float acc[TM][TN] = {};
    for (int kt = 0; kt < tiles; ++kt) {
        cp_async_wait<stages - 2>();  // this thread's copies of tile kt have landed
        __syncthreads();              // everyone's have, and everyone is done with tile kt-1
        if (kt + stages - 1 < tiles) {
            load_tile((kt + stages - 1) % stages);  // tile kt+2, into the stage tile kt-1 used
        }
        cp_async_commit();

        const float* As = smem + (kt % stages) * (a_stage + b_stage);
        const float* Bs = As + a_stage;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = load4(&As[k * lda + frag_m]);
            const float4 a1 = load4(&As[k * lda + frag_m + WM / 2]);
            const float4 b0 = load4(&Bs[k * BN + frag_n]);
            const float4 b1 = load4(&Bs[k * BN + frag_n + WN / 2]);
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
#endif
}

//! What this step needs of the GPU and the build: `cp.async`, compute capability 8.0 or higher.
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
//! @pre M, N multiples of 128, K a multiple of 16, `M <= 65535 * 128`; B and C 16-byte aligned; buffers not null; a
//!      GPU of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || M % BM != 0 || N % BN != 0 || K % BK != 0 ||
        M / BM > 65535 || !aligned16(d_B) || !aligned16(d_C)) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    // Above 48 KiB a kernel must opt in to dynamic shared memory. Not cached in a static: a kernel included in
    // several translation units is a different kernel in each.
    const cudaError_t opt_in = cudaFuncSetAttribute(sgemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(smem_bytes));
    if (opt_in != cudaSuccess) {
        return opt_in;
    }
    sgemm_kernel<<<dim3(N / BN, M / BM), threads, smem_bytes, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm::cp_async_pipeline
