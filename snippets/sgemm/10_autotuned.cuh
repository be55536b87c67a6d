//! @file 10_autotuned.cuh
//! @brief SGEMM step 10: Step 9 as a template over its tiles, for any M, N, K >= 1 and any float pointers, in
//!        configurations an autotuning sweep chose and the launcher picks from the shape.
//!
//! Step 9 fixes its tile sizes by hand and waits for each k's fragments before its FMAs. Here the kernel is a
//! template over block, warp and thread tiles, stages and blocks per SM (bench/sgemm/sgemm_autotune.cu times every
//! listed configuration in the same run), the fragments of the next k are read while the current k's FMAs run, and
//! the copy addresses advance by one tile instead of being recomputed.
//!
//! Any shape: a second instance of the kernel (`Edges = true`) runs whenever the shape or the pointers do not fit
//! the aligned fast path. Its copies are predicated cp.async with zero-fill (a source size of 0 reads nothing and
//! writes zeros) of 4 bytes each, and stores are checked
//! against M and N. The row and column predicates are fixed per thread, so the loop gains a select per copy; the
//! aligned instance is the tuned loop unchanged, so shapes that fit it pay nothing.
//!
//! Any size: a GPU is full only with enough blocks. The launcher reads the SM count and takes the first row of
//! `plan_rows` that fills the GPU: large tiles, large tiles with K split among blocks (few tiles, long K), medium
//! tiles (with split K), and small tiles for what nothing fills. A split product first scales C by beta, then every
//! split adds its share with atomics: one pass over C more, and the order of the splits' sums varies run to run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <iterator>
#include <tuple>
#include <utility>

namespace stepwise::sgemm::autotuned {

//! @brief The arguments every launcher needs: positive sizes, buffers given.
inline bool basic_args_ok(int M, int N, int K, const float* A, const float* B, const float* C)
{
    return M > 0 && N > 0 && K > 0 && A != nullptr && B != nullptr && C != nullptr;
}

//! @brief Whether `p` is 16-byte aligned (cudaMalloc's buffers are).
__host__ __device__ inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

//! @brief Four consecutive floats at `p` (16-byte aligned) in one load.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

//! @brief Stores four consecutive floats at `p` (16-byte aligned) in one store.
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

//! @brief `*c = alpha * acc + beta * *c`, C not read when `beta == 0`.
__device__ __forceinline__ void store_scaled(float* c, float acc, float alpha, float beta)
{
    *c = beta != 0.0f ? alpha * acc + beta * *c : alpha * acc;
}

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

//! @brief `cp_async_4` that writes a zero instead, reading nothing, where `!valid` (`gmem_src` must still be a
//!        mapped address: callers pass the matrix's first element).
__device__ __forceinline__ void cp_async_4_zfill(float* smem_dst, const float* gmem_src, bool valid)
{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(valid ? 4 : 0)
                 : "memory");
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

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major) over its share of K:
//!        block z takes k in `[z * k_split, min(K, (z + 1) * k_split))`. With one split it stores the tile; with
//!        several (`gridDim.z > 1`) it adds `alpha` times its partial product to C, which the launcher scaled by beta.
//!        `Edges`: any M, N, K, `k_split` and 4-byte-aligned B and C; else M, N, K and `k_split` are multiples of the
//!        tile and B and C 16-byte aligned.
template <class Cfg, bool Edges>
static __global__ void __launch_bounds__(Cfg::threads, Cfg::min_blocks)
    sgemm_kernel(int M, int N, int K, int k_split, float alpha, const float* __restrict__ A,
                 const float* __restrict__ B, float beta, float* __restrict__ C)
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
    const int k_begin = blockIdx.z * k_split;
    const int k_len = min(K - k_begin, k_split);

    // Copy maps, fixed per thread (only the tile and the stage change):
    //  A: 4-byte copies of k = a_k + 8h, rows m = a_m + r * a_row_step: a warp covers 4 rows x 8 k,
    //     i.e. 4 full 32-byte sectors, and writes As[k][m] to 32 distinct banks (lda = BM + 4).
    //  B: 16-byte copies of row b_k + r * b_row_step, columns b_n .. b_n + 3.
    constexpr int a_row_step = threads / 8;
    constexpr int b_row_step = threads / (BN / 4);
    static_assert(BM % a_row_step == 0 && threads % (BN / 4) == 0 && BK % b_row_step == 0, "copy maps");
    static_assert(BM / a_row_step <= 32, "one bit per row of A in a_rows");
    const int a_m = threadIdx.x / 8;
    const int a_k = threadIdx.x % 8;
    const int b_k = threadIdx.x / (BN / 4);
    const int b_n = (threadIdx.x % (BN / 4)) * 4;
    const float* a_src = A + static_cast<std::size_t>(block_m + a_m) * K + k_begin + a_k;
    const float* b_src = B + static_cast<std::size_t>(k_begin + b_k) * N + block_n + b_n;
    const std::size_t a_row_stride = static_cast<std::size_t>(a_row_step) * K;
    const std::size_t b_row_stride = static_cast<std::size_t>(b_row_step) * N;

    // Edges only: which of the thread's rows of A and columns of B exist, and how B and C may be accessed.
    unsigned a_rows = 0;
    int b_cols = 0;  // columns b_n .. b_n + b_cols - 1 of the tile exist (0 .. 4)
    bool c_vec = true;
    if constexpr (Edges) {
#pragma unroll
        for (int r = 0; r < BM / a_row_step; ++r) {
            a_rows |= (block_m + a_m + r * a_row_step < M ? 1u : 0u) << r;
        }
        b_cols = max(0, min(4, N - (block_n + b_n)));
        c_vec = N % 4 == 0 && aligned16(C);
    }

    const int tiles = (k_len + BK - 1) / BK;
    int k_next = 0;  // offset in this block's K range of the next tile to load
    // Issue the copies of the next tile (tiles are loaded in order) into `stage`.
    auto load_tile = [&](int stage) {
        float* As = smem + stage * Cfg::stage_floats + a_k * lda + a_m;
        float* Bs = smem + stage * Cfg::stage_floats + Cfg::a_stage + b_k * BN + b_n;
        const float* src = a_src;
        if constexpr (!Edges) {
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
        } else {
            const int k_left = k_len - k_next;  // elements of K that remain from this tile on
#pragma unroll
            for (int r = 0; r < BM / a_row_step; ++r) {
#pragma unroll
                for (int h = 0; h < BK / 8; ++h) {
                    const bool valid = ((a_rows >> r) & 1u) != 0 && a_k + h * 8 < k_left;
                    cp_async_4_zfill(As + h * 8 * lda + r * a_row_step, valid ? src + h * 8 : A, valid);
                }
                src += a_row_stride;
            }
            src = b_src;
#pragma unroll
            for (int r = 0; r < BK / b_row_step; ++r) {
                const bool row = b_k + r * b_row_step < k_left;
                float* dst = Bs + r * b_row_step * BN;
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const bool valid = row && j < b_cols;
                    cp_async_4_zfill(dst + j, valid ? src + j : B, valid);
                }
                src += b_row_stride;
            }
        }
        a_src += BK;
        b_src += static_cast<std::size_t>(BK) * N;
        k_next += BK;
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

    // One split stores alpha * acc + beta * C; several add alpha * acc to the C the launcher scaled by beta.
    const bool split = gridDim.z > 1;
    C += static_cast<std::size_t>(block_m) * N + block_n;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = frag_m + (i / 4) * 4 * lanes_m + i % 4;
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const int col = frag_n + c * 4 * lanes_n;
            float* out = &C[static_cast<std::size_t>(row) * N + col];
            if (Edges && (block_m + row >= M || block_n + col >= N)) {
                continue;
            }
            if (!Edges || (c_vec && block_n + col + 3 < N)) {  // four columns of C, 16-byte aligned
                if (split) {
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        atomicAdd(out + j, alpha * acc[i][4 * c + j]);
                    }
                } else {
                    store_scaled4(out, make_float4(acc[i][4 * c], acc[i][4 * c + 1], acc[i][4 * c + 2], acc[i][4 * c + 3]),
                                  alpha, beta);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (block_n + col + j < N) {
                        if (split) {
                            atomicAdd(out + j, alpha * acc[i][4 * c + j]);
                        } else {
                            store_scaled(out + j, acc[i][4 * c + j], alpha, beta);
                        }
                    }
                }
            }
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

//! @brief Threads per block of `scale_kernel`.
constexpr int scale_threads = 256;

//! @brief `C = beta * C` over `count` floats, zeros where `beta == 0` (C not read): the start of a split product.
static __global__ void __launch_bounds__(scale_threads) scale_kernel(std::size_t count, float beta, float* __restrict__ C)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        C[i] = beta != 0.0f ? beta * C[i] : 0.0f;
    }
}

//! @brief The K range of one split for `splits` requested: whole tiles of `BK`, none of them empty.
constexpr int split_length(int K, int BK, int splits)
{
    const int k_tiles = (K + BK - 1) / BK;
    return ((k_tiles + splits - 1) / splits) * BK;
}

//! @brief How many splits `split_length` leaves (at most `splits`, each one non-empty).
constexpr int effective_splits(int K, int BK, int splits) { return (K + split_length(K, BK, splits) - 1) / split_length(K, BK, splits); }

//! @brief Whether `sgemm_with<Cfg>` runs the aligned instance (`Edges = false`) for this problem.
template <class Cfg>
inline bool fits_aligned_path(int M, int N, int K, int k_split, const float* d_B, const float* d_C)
{
    return M % Cfg::BM == 0 && N % Cfg::BN == 0 && K % Cfg::BK == 0 && k_split % Cfg::BK == 0 && aligned16(d_B) &&
           aligned16(d_C);
}

//! @brief `C = alpha * A * B + beta * C` with the kernel in configuration `Cfg`, K split among `splits` blocks
//!        (row-major, C not read when `beta == 0`): scales C by beta first where `splits > 1`, then launches the
//!        aligned instance where the problem fits it, else the one with edges.
//! @param[in]     M,N,K   sizes, any positive
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     splits  blocks that share one tile's K (fewer where K has fewer tiles of `Cfg::BK`)
//! @param[in]     stream  stream to launch on
//! @pre sizes positive, `ceil(M / Cfg::BM) <= 65535`, `1 <= splits <= 65535`, buffers not null, 4-byte aligned; a
//!      GPU of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launches' error
template <class Cfg>
inline cudaError_t sgemm_with(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta,
                              float* d_C, int splits = 1, cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || (M + Cfg::BM - 1) / Cfg::BM > 65535 || splits < 1 ||
        splits > 65535) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    const int k_split = split_length(K, Cfg::BK, splits);
    splits = effective_splits(K, Cfg::BK, splits);
    const bool aligned = fits_aligned_path<Cfg>(M, N, K, k_split, d_B, d_C);
    const auto kernel = aligned ? sgemm_kernel<Cfg, false> : sgemm_kernel<Cfg, true>;
    if constexpr (Cfg::smem_bytes > 48 * 1024) {  // not cached in a static: each translation unit has its kernel
        const cudaError_t opt_in =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Cfg::smem_bytes));
        if (opt_in != cudaSuccess) {
            return opt_in;
        }
    }
    if (splits > 1) {
        const std::size_t count = static_cast<std::size_t>(M) * N;
        const std::size_t blocks = (count + scale_threads - 1) / scale_threads;
        scale_kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), scale_threads, 0, stream>>>(count, beta,
                                                                                                         d_C);
        if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) {
            return error;
        }
    }
    const dim3 grid((N + Cfg::BN - 1) / Cfg::BN, (M + Cfg::BM - 1) / Cfg::BM, splits);
    kernel<<<grid, Cfg::threads, Cfg::smem_bytes, stream>>>(M, N, K, k_split, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

//! @brief The launcher's configurations, chosen by an autotuning sweep on an H100 (bench/sgemm/sgemm_autotune.cu; the
//!        chapter's page shows the sweep of the run it reports): large tiles for large problems, then smaller
//!        ones where large tiles are too few to fill the GPU.
using Large = Config<128, 128, 16, 64, 32, 8, 8, 3, 2>;
using Medium = Config<128, 64, 16, 64, 32, 8, 8, 3, 3>;
using Small = Config<32, 32, 32, 32, 16, 4, 4, 3, 8>;
using Configs = std::tuple<Large, Medium, Small>;

//! @brief What the rule needs of a configuration: its tile and its blocks per SM.
struct TileShape {
    int BM, BN, BK, blocks_per_sm;
};

template <class... Cfgs>
constexpr auto tile_shapes(std::tuple<Cfgs...>*)
{
    return std::array<TileShape, sizeof...(Cfgs)>{TileShape{Cfgs::BM, Cfgs::BN, Cfgs::BK, Cfgs::min_blocks}...};
}

//! @brief `Configs`' tiles, by index.
inline constexpr auto config_tiles = tile_shapes(static_cast<Configs*>(nullptr));

//! @brief One row of the launcher's table: a configuration (an index into `Configs`), the most blocks that may share
//!        one tile's K, the least K each of them must get, and the blocks per SM the row wants to count as filling
//!        the GPU.
struct PlanRow {
    int config, max_splits, min_split_k, blocks_per_sm;
};

//! @brief The launcher's table, tried in order (see `choose_plan`). To tune, edit the rows.
inline constexpr PlanRow plan_rows[] = {
    {0, 1, 0, 1},        // Large tiles, the whole K per block: a tile for (nearly) every SM
    {0, 16, 1024, 2},    // Large tiles, long K split: two blocks per SM (128 x 8192 x 8192)
    {1, 1, 0, 1},        // Medium tiles, the whole K: twice as many tiles (1000^3, 1024^3)
    {2, 1, 0, 1},        // Small tiles: what nothing above fills (256^3, 512^3); the last row always fits
};

//! @brief A row fits when its blocks fill this share (percent) of the SMs times the row's blocks per SM.
inline constexpr int fill_percent = 90;

//! @brief What the launcher runs: a configuration (an index into `Configs`) and the number of K splits.
struct Plan {
    int config, splits;
};

//! @brief The plan `sgemm` runs for an M x N x K product on a GPU of `sm_count` SMs: the first row of `plan_rows`
//!        whose blocks (tiles x splits, with the fewest splits that do and at least `min_split_k` of K each) fill
//!        `fill_percent` of the SMs times the row's blocks per SM; else the last row, unsplit.
constexpr Plan choose_plan(int M, int N, int K, int sm_count)
{
    for (const PlanRow& row : plan_rows) {
        const TileShape& t = config_tiles[row.config];
        const long long tiles = static_cast<long long>((M + t.BM - 1) / t.BM) * ((N + t.BN - 1) / t.BN);
        const long long slots = static_cast<long long>(sm_count) * row.blocks_per_sm;
        for (int s = 1; s <= row.max_splits && (s == 1 || K / s >= row.min_split_k); ++s) {
            if (100 * tiles * s >= fill_percent * slots) {
                return {row.config, effective_splits(K, t.BK, s)};
            }
        }
    }
    return {plan_rows[std::size(plan_rows) - 1].config, 1};
}

static_assert(choose_plan(4096, 4096, 4096, 132).config == 0 && choose_plan(4096, 4096, 4096, 132).splits == 1);
static_assert(choose_plan(128, 8192, 8192, 132).config == 0 && choose_plan(128, 8192, 8192, 132).splits > 1);
static_assert(choose_plan(1024, 1024, 1024, 132).config == 1 && choose_plan(1024, 1024, 1024, 132).splits == 1);
static_assert(choose_plan(256, 256, 256, 132).config == std::tuple_size_v<Configs> - 1, "the last row always fits");

//! @brief `sgemm_with` of each configuration of `Configs`, by index: the table a plan is run from.
using Launcher = cudaError_t (*)(int, int, int, float, const float*, const float*, float, float*, int, cudaStream_t);

template <std::size_t... I>
constexpr std::array<Launcher, sizeof...(I)> launchers_of(std::index_sequence<I...>)
{
    return {&sgemm_with<std::tuple_element_t<I, Configs>>...};
}

inline constexpr auto config_launchers = launchers_of(std::make_index_sequence<std::tuple_size_v<Configs>>{});

//! @brief Runs `plan` (the tests force every configuration with it); `sgemm` runs the plan `choose_plan` picks.
//! @return `cudaErrorInvalidValue` for a plan outside `Configs`, else as `sgemm_with`
inline cudaError_t sgemm_planned(Plan plan, int M, int N, int K, float alpha, const float* d_A, const float* d_B,
                                 float beta, float* d_C, cudaStream_t stream = 0)
{
    if (plan.config < 0 || plan.config >= static_cast<int>(config_launchers.size())) {
        return cudaErrorInvalidValue;
    }
    return config_launchers[plan.config](M, N, K, alpha, d_A, d_B, beta, d_C, plan.splits, stream);
}

//! @brief `C = alpha * A * B + beta * C` for any shape (row-major, C not read when `beta == 0`), in the plan
//!        `choose_plan` picks for this GPU's SM count.
//! @param[in]     M,N,K   sizes, any positive
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre sizes positive, `M <= 65535 * 128`; buffers not null and 4-byte aligned (16-byte aligned B and C, as
//!      cudaMalloc's, are faster); a GPU of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), an error reading the device's SM count, else the launches' error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta,
                         float* d_C, cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C)) {
        return cudaErrorInvalidValue;
    }
    int device = 0;
    int sm_count = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess) {
        error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
    }
    if (error != cudaSuccess) {
        return error;
    }
    return sgemm_planned(choose_plan(M, N, K, sm_count), M, N, K, alpha, d_A, d_B, beta, d_C, stream);
}

}  // namespace stepwise::sgemm::autotuned
