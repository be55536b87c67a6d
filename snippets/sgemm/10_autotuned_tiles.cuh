//! @file 10_autotuned_tiles.cuh
//! @brief SGEMM step 10: Step 9 as a template over its tiles, in the configuration an autotuning sweep chose for
//!        large problems.
//!
//! Step 9 fixes its tile sizes by hand and waits for each k's fragments before its FMAs. Here the kernel is a
//! template over block, warp and thread tiles, stages, blocks per SM and copy bursts; the fragments of the next k
//! are read while the current k's FMAs run; a tile's copies go out in bursts between the FMAs of the tile before;
//! and odd rows of the thread tile run their FMAs in reverse column order (measured: 4 % faster at 4096^3 on an
//! H100, same instructions).
//!
//! The launcher runs one configuration, the one an autotuning sweep picked for large problems (`Large`: 128 x 128
//! x 32 block tiles, 8 x 8 per thread, 2 stages, 2 blocks per SM, 3 bursts; bench/sgemm/sgemm_autotune.cu times
//! every listed configuration in the same run, through step 11's launcher, whose aligned instance runs this loop),
//! on step 9's terms: M and N multiples of the block tile, K of its depth, B and C 16-byte aligned, so that no copy
//! and no store needs a check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::sgemm::autotuned_tiles {

//! @brief Whether `p` is a multiple of `bytes`.
__host__ __device__ inline bool aligned_to(const void* p, std::uintptr_t bytes)
{
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

//! @brief The arguments every launcher needs: positive sizes, buffers given and 4-byte aligned (a float pointer
//!        that is not would make the kernel's accesses misaligned, ending the program's CUDA context).
inline bool basic_args_ok(int M, int N, int K, const float* A, const float* B, const float* C)
{
    return M > 0 && N > 0 && K > 0 && A != nullptr && B != nullptr && C != nullptr && aligned_to(A, 4) &&
           aligned_to(B, 4) && aligned_to(C, 4);
}

//! @brief Whether `p` is 16-byte aligned (cudaMalloc's buffers are).
__host__ __device__ inline bool aligned16(const void* p) { return aligned_to(p, 16); }

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
//!        depth of the cp.async ring, the blocks per SM asked of the compiler, and in how many bursts a tile's copies
//!        are spread over the FMAs of the tile before. What the kernel assumes of them is a static_assert: a
//!        configuration that breaks it does not compile.
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_, int STAGES_, int MIN_BLOCKS_, int BURSTS_>
struct Config {
    static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile
    static constexpr int WM = WM_, WN = WN_;            // warp tile
    static constexpr int TM = TM_, TN = TN_;            // thread tile
    static constexpr int stages = STAGES_;              // depth of the cp.async ring
    static constexpr int min_blocks = MIN_BLOCKS_;      // resident blocks per SM asked of ptxas
    static constexpr int bursts = BURSTS_;              // groups of copies, spread over a tile's k steps
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
    static_assert(bursts >= 1 && bursts < BK, "at most one burst per step of k, the last step left for the barrier");
};

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major); M, N, K multiples of the
//!        tile, B and C 16-byte aligned.
template <class Cfg>
static __global__ void __launch_bounds__(Cfg::threads, Cfg::min_blocks)
    sgemm_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C)
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
    const int block_m = blockIdx.y * BM;
    const int block_n = blockIdx.x * BN;

    // Copy maps, fixed per thread (only the tile and the stage change):
    //  A: 4-byte copies of k = a_k + 8h, rows m = a_m + r * a_row_step: a warp covers 4 rows x 8 k,
    //     i.e. 4 full 32-byte sectors, and writes As[k][m] to 32 distinct banks (lda = BM + 4).
    //  B: copies of b_width floats (16 bytes) of row b_k + r * b_row_step at column b_n: a warp reads
    //     consecutive elements of a row and writes consecutive banks.
    constexpr int b_width = 4;
    constexpr int a_row_step = threads / 8;
    constexpr int a_rows = BM / a_row_step;
    constexpr int a_copies = a_rows * (BK / 8);
    constexpr int b_row_step = threads / (BN / b_width);
    constexpr int copies = a_copies + BK / b_row_step;  // per thread and tile
    static_assert(BM % a_row_step == 0 && threads % (BN / b_width) == 0 && BK % b_row_step == 0, "copy maps");
    const int a_m = threadIdx.x / 8;
    const int a_k = threadIdx.x % 8;
    const int b_k = threadIdx.x / (BN / b_width);
    const int b_n = (threadIdx.x % (BN / b_width)) * b_width;

    const float* a_src = A + static_cast<std::size_t>(block_m + a_m) * K + a_k;
    const float* b_src = B + static_cast<std::size_t>(b_k) * N + block_n + b_n;
    const std::size_t a_row_stride = static_cast<std::size_t>(a_row_step) * K;
    const std::size_t b_row_stride = static_cast<std::size_t>(b_row_step) * N;

    const int tiles = K / BK;
    // Copy c of the tile at (a_src, b_src) into `stage`: A's row r = c / (BK / 8), k = a_k + 8 * (c % (BK / 8))
    // for c < a_copies, else B's row r = c - a_copies.
    auto copy = [&](int c, int stage) {
        float* As = smem + stage * Cfg::stage_floats;
        float* Bs = As + Cfg::a_stage;
        if (c < a_copies) {
            const int r = c / (BK / 8), h = c % (BK / 8);
            const float* src = a_src + static_cast<std::size_t>(r) * a_row_stride + h * 8;
            float* dst = As + (a_k + h * 8) * lda + a_m + r * a_row_step;
            cp_async_4(dst, src);
        } else {
            const int r = c - a_copies;
            const float* src = b_src + r * b_row_stride;
            float* dst = Bs + (b_k + r * b_row_step) * BN + b_n;
            cp_async_16(dst, src);
        }
    };
    auto advance = [&](int k) {
        a_src += k;
        b_src += static_cast<std::size_t>(k) * N;
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
#pragma unroll
            for (int c = 0; c < copies; ++c) {
                copy(c, s);
            }
            advance(BK);
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
        // Tile kt + S - 1 goes to the stage tile kt - 1 used (every thread finished reading it before the barrier
        // of the previous iteration), its copies in Cfg::bursts bursts over the first BK - 1 steps of k.
        const bool refill = kt + S - 1 < tiles;
        const int write_stage = read_stage == 0 ? S - 1 : read_stage - 1;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int c = 0; c < copies; ++c) {
                if ((c * Cfg::bursts / copies) * (BK - 1) / Cfg::bursts == k && refill) {
                    copy(c, write_stage);
                }
            }
            if (k == BK - 2) {
                if (refill) {
                    advance(BK);
                }
                cp_async_commit();
            }
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
            // Odd rows run their columns backwards: each row starts on the value of B the row before ended on.
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int jj = 0; jj < TN; ++jj) {
                    const int j = i % 2 == 0 ? jj : TN - 1 - jj;
                    acc[i][j] += a_frag[k % 2][i] * b_frag[k % 2][j];
                }
            }
        }
    }

    C += static_cast<std::size_t>(block_m) * N + block_n;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = frag_m + (i / 4) * 4 * lanes_m + i % 4;
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const int col = frag_n + c * 4 * lanes_n;
            float* out = &C[static_cast<std::size_t>(row) * N + col];
            const float4 v = make_float4(acc[i][4 * c], acc[i][4 * c + 1], acc[i][4 * c + 2], acc[i][4 * c + 3]);
            store_scaled4(out, v, alpha, beta);
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
//! @param[in]     M,N,K   sizes: M and N multiples of `Cfg::BM` and `Cfg::BN`, K of `Cfg::BK`
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre sizes positive, M and N multiples of `Cfg::BM` and `Cfg::BN`, K of `Cfg::BK`, `M / Cfg::BM <= 65535` (the
//!      grid's y limit); buffers not null, A 4-byte aligned, B and C 16-byte aligned; a GPU of compute capability
//!      8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launch's error
template <class Cfg>
inline cudaError_t sgemm_with(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta,
                              float* d_C, cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || M % Cfg::BM != 0 || N % Cfg::BN != 0 || K % Cfg::BK != 0 ||
        M / Cfg::BM > 65535 || !aligned16(d_B) || !aligned16(d_C)) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    const auto kernel = sgemm_kernel<Cfg>;
    if constexpr (Cfg::smem_bytes > 48 * 1024) {  // not cached in a static: each translation unit has its kernel
        const cudaError_t opt_in =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::smem_bytes));
        if (opt_in != cudaSuccess) {
            return opt_in;
        }
    }
    const dim3 grid(static_cast<unsigned>(N / Cfg::BN), static_cast<unsigned>(M / Cfg::BM));
    kernel<<<grid, Cfg::threads, Cfg::smem_bytes, stream>>>(M, N, K, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

//! @brief The configuration an autotuning sweep on an H100 chose for large problems (bench/sgemm/sgemm_autotune.cu;
//!        the chapter's page shows the sweep of the run it reports): 128 x 128 x 32 block tiles, 64 x 32 warp tiles,
//!        8 x 8 per thread, 2 stages, 2 blocks per SM, 3 bursts.
using Large = Config<128, 128, 32, 64, 32, 8, 8, 2, 2, 3>;

//! @brief `C = alpha * A * B + beta * C`, row-major, in configuration `Large`; C is not read when `beta == 0`.
//! @param[in]     M       rows of A and C
//! @param[in]     N       columns of B and C
//! @param[in]     K       columns of A, rows of B
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre M, N multiples of 128, K a multiple of 32, `M <= 65535 * 128`; A 4-byte aligned, B and C 16-byte aligned;
//!      buffers not null; a GPU of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    return sgemm_with<Large>(M, N, K, alpha, d_A, d_B, beta, d_C, stream);
}

}  // namespace stepwise::sgemm::autotuned_tiles
