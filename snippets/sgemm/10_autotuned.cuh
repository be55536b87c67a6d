//! @file 10_autotuned.cuh
//! @brief SGEMM step 10: Step 9 as a template over its tiles, in the configuration an autotuning sweep chose.
//!
//! Step 9 fixes its tile sizes by hand and waits for each k's fragments before
//! its FMAs. Here the kernel is a template over block, warp and thread tiles,
//! stages and blocks per SM (bench/sgemm_autotune.cu times every listed
//! configuration in the same run), the fragments of the next k are read while
//! the current k's FMAs run, and the copy addresses advance by one tile instead
//! of being recomputed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::autotuned {

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

//! @brief One configuration of the kernel: block tile BM x BN x BK, warp tile WM x WN, thread tile TM x TN, the
//!        depth of the cp.async ring and the blocks per SM asked of the compiler. What the kernel assumes of them is
//!        a static_assert: a configuration that breaks it does not compile.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int STAGES_, int MIN_BLOCKS_>
struct Config {
    static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile
    static constexpr int WM = WM_, WN = WN_;            // warp tile
    static constexpr int TM = TM_, TN = TN_;            // thread tile
    static constexpr int stages = STAGES_;              // depth of the cp.async ring
    static constexpr int min_blocks = MIN_BLOCKS_;      // resident blocks per SM asked of ptxas
    static constexpr int lanes_m = WM / TM;             // a warp's lanes form lanes_m x lanes_n
    static constexpr int lanes_n = WN / TN;
    static constexpr int warps_n = BN / WN;
    static constexpr int threads = (BM / WM) * (BN / WN) * 32;
    static constexpr int lda = BM + 4;  // padded row of the transposed A tile: conflict-free 4-byte copies
    static constexpr int a_stage = BK * lda;  // floats
    static constexpr int b_stage = BK * BN;
    static constexpr int stage_floats = a_stage + b_stage;
    static constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * stage_floats * sizeof(float);

    static_assert(BM % WM == 0 && BN % WN == 0, "whole warp tiles");
    static_assert(lanes_m * lanes_n == 32, "a warp tile is 32 thread tiles");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4 x 4 sub-tiles");
    static_assert(BK % 8 == 0 && BM % 32 == 0 && BN % 4 == 0, "copy maps and bank layout");
    static_assert(stages >= 2, "a ring needs two stages at least");
};

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major).
template <class Cfg>
static __global__ void __launch_bounds__(Cfg::threads, Cfg::min_blocks)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B, float beta,
                 float* __restrict__ C)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK;
    constexpr int WM = Cfg::WM, WN = Cfg::WN, TM = Cfg::TM, TN = Cfg::TN;
    constexpr int S = Cfg::stages;
    constexpr int threads = Cfg::threads;
    constexpr int lda = Cfg::lda;
    constexpr int lanes_m = Cfg::lanes_m, lanes_n = Cfg::lanes_n;

    extern __shared__ __align__(128) float smem[];
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int frag_m = (warp / Cfg::warps_n) * WM + (lane / lanes_n) * 4;  // first row of sub-tile 0
    const int frag_n = (warp % Cfg::warps_n) * WN + (lane % lanes_n) * 4;  // first column of sub-tile 0

    // Copy maps, fixed per thread (only the tile and the stage change):
    //  A: 4-byte copies of k = a_k + 8h, rows m = a_m + r * a_row_step: a warp covers 4 rows x 8 k,
    //     i.e. 4 full 32-byte sectors, and writes As[k][m] to 32 distinct banks (lda = BM + 4).
    //  B: 16-byte copies of row b_k + r * b_row_step, columns b_n .. b_n + 3.
    constexpr int a_row_step = threads / 8;
    constexpr int b_row_step = threads / (BN / 4);
    static_assert(BM % a_row_step == 0 && threads % (BN / 4) == 0 && BK % b_row_step == 0, "copy maps");
    const int a_m = threadIdx.x / 8;
    const int a_k = threadIdx.x % 8;
    const int b_k = threadIdx.x / (BN / 4);
    const int b_n = (threadIdx.x % (BN / 4)) * 4;
    const float* a_src = A + static_cast<std::size_t>(blockIdx.y) * BM * K + static_cast<std::size_t>(a_m) * K + a_k;
    const float* b_src = B + static_cast<std::size_t>(b_k) * N + static_cast<std::size_t>(blockIdx.x) * BN + b_n;
    const std::size_t a_row_stride = static_cast<std::size_t>(a_row_step) * K;
    const std::size_t b_row_stride = static_cast<std::size_t>(b_row_step) * N;
    C += static_cast<std::size_t>(blockIdx.y) * BM * N + static_cast<std::size_t>(blockIdx.x) * BN;

    const int tiles = K / BK;
    // Issue the copies of the next tile (tiles are loaded in order) into `stage`.
    auto load_tile = [&](int stage) {
        float* As = smem + stage * Cfg::stage_floats + a_k * lda + a_m;
        float* Bs = smem + stage * Cfg::stage_floats + Cfg::a_stage + b_k * BN + b_n;
        const float* src = a_src;
#pragma unroll
        for (int r = 0; r < BM / a_row_step; ++r) {
#pragma unroll
            for (int h = 0; h < BK / 8; ++h) {
                cp_async_4(As + h * 8 * lda + r * a_row_step, src + h * 8);
            }
            src += a_row_stride;
        }
        src = b_src;
#pragma unroll
        for (int r = 0; r < BK / b_row_step; ++r) {
            cp_async_16(Bs + r * b_row_step * BN, src);
            src += b_row_stride;
        }
        a_src += BK;
        b_src += static_cast<std::size_t>(BK) * N;
    };
    // The thread's TM values of A and TN values of B for step k of the tile in (As, Bs).
    auto load_fragments = [&](float(&a)[TM], float(&b)[TN], const float* As, const float* Bs, int k) {
#pragma unroll
        for (int c = 0; c < TM / 4; ++c) {
            const float4 v = load4(&As[k * lda + frag_m + c * 4 * lanes_m]);
            a[4 * c + 0] = v.x;
            a[4 * c + 1] = v.y;
            a[4 * c + 2] = v.z;
            a[4 * c + 3] = v.w;
        }
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const float4 v = load4(&Bs[k * BN + frag_n + c * 4 * lanes_n]);
            b[4 * c + 0] = v.x;
            b[4 * c + 1] = v.y;
            b[4 * c + 2] = v.z;
            b[4 * c + 3] = v.w;
        }
    };

    // Prologue: tiles 0 .. S-2 in flight (one commit group each, empty past the end).
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < tiles) {
            load_tile(s);
        }
        cp_async_commit();
    }
    cp_async_wait<S - 2>();
    __syncthreads();

    float acc[TM][TN] = {};
    float a_frag[2][TM];
    float b_frag[2][TN];
    int read_stage = 0;
    const float* As = smem;
    const float* Bs = smem + Cfg::a_stage;
    load_fragments(a_frag[0], b_frag[0], As, Bs, 0);

    for (int kt = 0; kt < tiles; ++kt) {
        // Refill the stage that tile kt-1 used: every thread finished reading it before the barrier
        // of the previous iteration.
        if (kt + S - 1 < tiles) {
            load_tile(read_stage == 0 ? S - 1 : read_stage - 1);
        }
        cp_async_commit();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k == BK - 1) {
                // Tile kt+1 must have landed, for everyone, before we read its first fragment; after
                // this barrier nobody reads tile kt's stage any more (its last fragment is in registers).
                cp_async_wait<S - 2>();
                __syncthreads();
                read_stage = read_stage == S - 1 ? 0 : read_stage + 1;
                As = smem + read_stage * Cfg::stage_floats;
                Bs = As + Cfg::a_stage;
                if (kt + 1 < tiles) {
                    load_fragments(a_frag[(k + 1) % 2], b_frag[(k + 1) % 2], As, Bs, 0);
                }
            } else {
                load_fragments(a_frag[(k + 1) % 2], b_frag[(k + 1) % 2], As, Bs, k + 1);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] += a_frag[k % 2][i] * b_frag[k % 2][j];
                }
            }
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = frag_m + (i / 4) * 4 * lanes_m + i % 4;
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const int col = frag_n + c * 4 * lanes_n;
            store_scaled4(&C[static_cast<std::size_t>(row) * N + col],
                                  make_float4(acc[i][4 * c], acc[i][4 * c + 1], acc[i][4 * c + 2], acc[i][4 * c + 3]),
                                  alpha, beta);
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

//! @brief `C = alpha * A * B + beta * C` with the kernel in configuration `Cfg` (row-major, C not read when
//!        `beta == 0`).
//! @param[in]     M,N,K   sizes: `M % Cfg::BM == 0`, `N % Cfg::BN == 0`, `K % Cfg::BK == 0`
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major, 4-byte aligned
//! @param[in]     d_B     K x N floats, row-major, 16-byte aligned
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major, 16-byte aligned
//! @param[in]     stream  stream to launch on
//! @pre the sizes as above, `M / Cfg::BM <= 65535`, the buffers not null and aligned as above; a GPU of compute
//!      capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launch's error
template <class Cfg>
inline cudaError_t sgemm_with(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || M % Cfg::BM != 0 || N % Cfg::BN != 0 || K % Cfg::BK != 0 ||
        M / Cfg::BM > 65535 || !aligned16(d_B) || !aligned16(d_C)) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    if constexpr (Cfg::smem_bytes > 48 * 1024) {  // not cached in a static: each translation unit has its kernel
        const cudaError_t opt_in = cudaFuncSetAttribute(
            sgemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::smem_bytes));
        if (opt_in != cudaSuccess) {
            return opt_in;
        }
    }
    sgemm_kernel<Cfg><<<dim3(N / Cfg::BN, M / Cfg::BM), Cfg::threads, Cfg::smem_bytes, stream>>>(M, N, K, alpha, d_A, d_B,
                                                                                          beta, d_C);
    return cudaGetLastError();
}

//! @brief The configuration this step uses: the fastest of the autotuning sweep (bench/sgemm_autotune.cu) on an
//!        H100 when the step was written; the chapter's page shows the sweep of the run it reports.
using Chosen = Config<128, 128, 16, 64, 32, 8, 8, 3, 2>;

//! @brief `C = alpha * A * B + beta * C` with the chosen configuration (row-major, C not read when `beta == 0`).
//! @param[in]     M,N,K   sizes: M and N multiples of 128, K a multiple of 16
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major, 16-byte aligned
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major, 16-byte aligned
//! @param[in]     stream  stream to launch on
//! @pre M, N multiples of 128 (`M <= 65535 * 128`), K a multiple of 16; buffers not null, B and C 16-byte aligned; a
//!      GPU of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    return sgemm_with<Chosen>(M, N, K, alpha, d_A, d_B, beta, d_C, stream);
}

}  // namespace stepwise::sgemm::autotuned
