//! @file 11_any_shape_any_size.cuh
//! @brief SGEMM step 11: Step 10 for any M, N, K >= 1 and any float pointers, in configurations an autotuning sweep
//!        chose and the launcher picks from the shape.
//!
//! Step 10 takes multiples of its 128 x 128 x 32 tile with B and C 16-byte aligned, and runs one configuration at
//! every size. Here the same kernel, its loop unchanged, takes any shape, and the launcher picks its configuration
//! and K split from the shape and the GPU's SM count (bench/sgemm/sgemm_autotune.cu times every configuration it
//! lists, these among them, in the same run).
//!
//! Any shape, three instances of the kernel (`Path`). Aligned: M, N, K multiples of the tile, the tuned loop with no
//! checks. Edges: a tile that would reach past M or N is loaded from M - BM or N - BN instead and stores only what
//! its block owns, so the loop's copies need no checks either; K's remainder is tile 0, read with zero-fill once,
//! before the loop. Unaligned (N % 4 != 0, or B not 16-byte aligned): the same, with B in 4-byte copies.
//!
//! Any size: a GPU is full only with enough blocks. The launcher reads the SM count and takes the first row of
//! `plan_rows` that fills the GPU: large tiles, large tiles with K split among blocks (few tiles, long K), medium
//! tiles, and small tiles for what nothing fills. A split product first scales C by beta, then every split adds its
//! share with atomics: one pass over C more, and the order of the splits' sums varies run to run. Where the last
//! wave of blocks would fill less than a quarter of the GPU (4097^3), the rows of the whole waves run first and the
//! rows left are planned as a problem of their own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <iterator>
#include <tuple>
#include <type_traits>
#include <utility>

namespace stepwise::sgemm::autotuned {

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

//! @brief The tiles of `tile` that cover `count`, counted in 64 bits: `count + tile - 1` overflows an int near
//!        INT_MAX.
constexpr long long tiles_of(int count, int tile) { return (static_cast<long long>(count) + tile - 1) / tile; }

//! @brief Whether `p` is 16-byte aligned (cudaMalloc's buffers are).
__host__ __device__ inline bool aligned16(const void* p) { return aligned_to(p, 16); }

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

//! @brief `*c += v` for four consecutive floats at `c` (16-byte aligned), each element atomically: one vector
//!        reduction from sm_90 on, four scalar ones before.
__device__ __forceinline__ void atomic_add4(float* c, float4 v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4*>(c), v);
#else
    atomicAdd(c, v.x);
    atomicAdd(c + 1, v.y);
    atomicAdd(c + 2, v.z);
    atomicAdd(c + 3, v.w);
#endif
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

//! @brief `cp_async_4` (`bytes == 4`) or `cp_async_16` that reads nothing and writes zeros where `!valid`
//!        (`gmem_src` must still be a mapped address: callers pass the matrix's first element).
template <int bytes>
__device__ __forceinline__ void cp_async_zfill(float* smem_dst, const float* gmem_src, bool valid)
{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
    if constexpr (bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(valid ? 16 : 0)
                     : "memory");
    } else {
        static_assert(bytes == 4, "cp.async copies 4, 8 or 16 bytes; this kernel uses 4 and 16");
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(valid ? 4 : 0)
                     : "memory");
    }
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

//! @brief The three instances of the kernel: what each assumes of the problem (`path_for` picks one).
enum class Path {
    aligned,   //!< M, N, K and the K split multiples of the tile, B and C 16-byte aligned: no edges
    edges,     //!< any M and K; N a multiple of 4 and B 16-byte aligned: B still in 16-byte copies
    unaligned  //!< anything else (4-byte-aligned B and C): B in 4-byte copies
};

//! @brief Computes the block's tile of `C = alpha * A * B + beta * C` (A, B, C row-major) over its share of K:
//!        block z takes k in `[z * k_split, min(K, (z + 1) * k_split))`. With one split it stores the tile; with
//!        several (`gridDim.z > 1`) it adds `alpha` times its partial product to C, which the launcher scaled by beta.
//!        `P`: what the problem is known to satisfy (see `Path`).
template <class Cfg, Path P>
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
    constexpr bool edges = P != Path::aligned;

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
    //  B: copies of b_width floats (16 or 4 bytes) of row b_k + r * b_row_step at column b_n: a warp reads
    //     consecutive elements of a row and writes consecutive banks.
    constexpr int b_width = P == Path::unaligned ? 1 : 4;
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

    // Edges: a tile that would reach past M or N is loaded from M - BM or N - BN instead (its block stores only the
    // rows and columns it owns), so every copy reads a distinct element of the matrix. Where M < BM, rows past M
    // repeat the thread's last row; where N < BN, columns past N wrap around. Neither is stored. Only K needs
    // zeros, and only in tile 0 (below).
    int load_m = block_m, load_n = block_n;  // the loaded tile's first row and column
    int a_last_r = a_rows - 1;               // rows r > a_last_r repeat row a_last_r
    if constexpr (edges) {
        load_m = max(0, min(block_m, M - BM));
        load_n = max(0, min(block_n, N - BN));
        a_last_r = max(0, (M - 1 - (load_m + a_m)) / a_row_step);
    }
    const int a_row = edges ? min(load_m + a_m, M - 1) : load_m + a_m;
    const int b_col = edges ? (load_n + b_n) % N : load_n + b_n;
    const float* a_src = A + static_cast<std::size_t>(a_row) * K + k_begin + a_k;
    const float* b_src = B + static_cast<std::size_t>(k_begin + b_k) * N + b_col;
    const std::size_t a_row_stride = static_cast<std::size_t>(a_row_step) * K;
    const std::size_t b_row_stride = static_cast<std::size_t>(b_row_step) * N;

    // Tile 0 takes what K leaves over the whole tiles (all of a tile where nothing does), so every other tile is
    // whole and the main loop's copies need no check of K.
    const int k_first = edges && k_len % BK != 0 ? k_len % BK : BK;
    const int tiles = 1 + (k_len - k_first) / BK;
    // Copy c of the tile at (a_src, b_src) into `stage`: A's row r = c / (BK / 8), k = a_k + 8 * (c % (BK / 8))
    // for c < a_copies, else B's row r = c - a_copies; past k_count of K it writes zeros.
    auto copy = [&](int c, int stage, auto checked, int k_count) {
        float* As = smem + stage * Cfg::stage_floats;
        float* Bs = As + Cfg::a_stage;
        if (c < a_copies) {
            const int r = c / (BK / 8), h = c % (BK / 8);
            const float* src = a_src + static_cast<std::size_t>(min(r, a_last_r)) * a_row_stride + h * 8;
            float* dst = As + (a_k + h * 8) * lda + a_m + r * a_row_step;
            if constexpr (decltype(checked)::value) {
                const bool valid = a_k + h * 8 < k_count;
                cp_async_zfill<4>(dst, valid ? src : A, valid);
            } else {
                cp_async_4(dst, src);
            }
        } else {
            const int r = c - a_copies;
            const float* src = b_src + r * b_row_stride;
            float* dst = Bs + (b_k + r * b_row_step) * BN + b_n;
            if constexpr (decltype(checked)::value) {
                const bool valid = b_k + r * b_row_step < k_count;
                cp_async_zfill<4 * b_width>(dst, valid ? src : B, valid);
            } else if constexpr (b_width == 4) {
                cp_async_16(dst, src);
            } else {
                cp_async_4(dst, src);
            }
        }
    };
    using unchecked = std::false_type;
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
    for (int c = 0; c < copies; ++c) {
        if (k_first == BK) {
            copy(c, 0, unchecked{}, BK);
        } else {
            copy(c, 0, std::true_type{}, k_first);
        }
    }
    advance(k_first);
    cp_async_commit();
#pragma unroll
    for (int s = 1; s < S - 1; ++s) {
        if (s < tiles) {
#pragma unroll
            for (int c = 0; c < copies; ++c) {
                copy(c, s, unchecked{}, BK);
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
                    copy(c, write_stage, unchecked{}, BK);
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

    // One split stores alpha * acc + beta * C; several add alpha * acc to the C the launcher scaled by beta.
    const bool split = gridDim.z > 1;
    const bool c_vec = !edges || (N % 4 == 0 && aligned16(C));
    C += static_cast<std::size_t>(load_m) * N + load_n;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = frag_m + (i / 4) * 4 * lanes_m + i % 4;
        if (edges && (load_m + row < block_m || load_m + row >= M)) {
            continue;  // another block's row, or none
        }
#pragma unroll
        for (int c = 0; c < TN / 4; ++c) {
            const int col = frag_n + c * 4 * lanes_n;
            const int c_col = load_n + col;  // in C
            float* out = &C[static_cast<std::size_t>(row) * N + col];
            if (!edges || (c_vec && c_col >= block_n && c_col + 3 < N)) {  // four columns of C, 16-byte aligned
                const float4 v = make_float4(acc[i][4 * c], acc[i][4 * c + 1], acc[i][4 * c + 2], acc[i][4 * c + 3]);
                if (split) {
                    atomic_add4(out, make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w));
                } else {
                    store_scaled4(out, v, alpha, beta);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (c_col + j >= block_n && c_col + j < N) {
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

//! @brief The K range of one split for `splits` requested: whole tiles of `BK`, none of them empty (all of K where
//!        one split covers it).
constexpr int split_length(int K, int BK, int splits)
{
    const long long length = (tiles_of(K, BK) + splits - 1) / splits * BK;
    return static_cast<int>(length < K ? length : K);
}

//! @brief How many splits `split_length` leaves (at most `splits`, each one non-empty).
constexpr int effective_splits(int K, int BK, int splits)
{
    return static_cast<int>(tiles_of(K, split_length(K, BK, splits)));
}

//! @brief The instance of the kernel `sgemm_with<Cfg>` runs for this problem (see `Path`).
template <class Cfg>
inline Path path_for(int M, int N, int K, int k_split, const float* d_B, const float* d_C)
{
    if (N % 4 != 0 || !aligned16(d_B)) {
        return Path::unaligned;
    }
    const bool whole_tiles = M % Cfg::BM == 0 && N % Cfg::BN == 0 && K % Cfg::BK == 0 && k_split % Cfg::BK == 0;
    return whole_tiles && aligned16(d_C) ? Path::aligned : Path::edges;
}

//! @brief `C = alpha * A * B + beta * C` with the kernel in configuration `Cfg`, K split among `splits` blocks
//!        (row-major, C not read when `beta == 0`): scales C by beta first where `splits > 1`, then launches the
//!        instance `path_for` picks.
//! @param[in]     M,N,K   sizes, any positive
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     splits  blocks that share one tile's K (fewer where K has fewer tiles of `Cfg::BK`)
//! @param[in]     stream  stream to launch on
//! @pre sizes positive, `ceil(M / Cfg::BM) <= 65535` (the grid's y limit), `1 <= splits <= 65535`, buffers not
//!      null, 4-byte aligned; a GPU of compute capability 8.0 or higher
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` on an older GPU (or code built
//!         only for one), the error of the shared-memory opt-in, else the launches' error
template <class Cfg>
inline cudaError_t sgemm_with(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta,
                              float* d_C, int splits = 1, cudaStream_t stream = 0)
{
    if (!basic_args_ok(M, N, K, d_A, d_B, d_C) || tiles_of(M, Cfg::BM) > 65535 || splits < 1 || splits > 65535) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    const int k_split = split_length(K, Cfg::BK, splits);
    splits = effective_splits(K, Cfg::BK, splits);
    const Path path = path_for<Cfg>(M, N, K, k_split, d_B, d_C);
    const auto kernel = path == Path::aligned ? sgemm_kernel<Cfg, Path::aligned>
                        : path == Path::edges ? sgemm_kernel<Cfg, Path::edges>
                                              : sgemm_kernel<Cfg, Path::unaligned>;
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
    const dim3 grid(static_cast<unsigned>(tiles_of(N, Cfg::BN)), static_cast<unsigned>(tiles_of(M, Cfg::BM)), splits);
    kernel<<<grid, Cfg::threads, Cfg::smem_bytes, stream>>>(M, N, K, k_split, alpha, d_A, d_B, beta, d_C);
    return cudaGetLastError();
}

//! @brief The launcher's configurations, chosen by an autotuning sweep on an H100 (bench/sgemm/sgemm_autotune.cu; the
//!        chapter's page shows the sweep of the run it reports): large tiles for large problems, then smaller
//!        ones where large tiles are too few to fill the GPU.
using Large = Config<128, 128, 32, 64, 32, 8, 8, 2, 2, 3>;
using Medium = Config<128, 64, 16, 64, 32, 8, 8, 3, 3, 2>;
using Small = Config<32, 32, 32, 32, 16, 4, 4, 3, 8, 1>;
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

//! @brief A last wave of blocks that fills less than this share (percent) of the GPU is not run as a wave: its tile
//!        rows become a problem of their own (see `choose_plan`).
inline constexpr int last_wave_percent = 25;

//! @brief What the launcher runs: a configuration (an index into `Configs`), the number of K splits, and the rows of
//!        C, from the top, it runs them on (all of M, or the rows of whole waves; `sgemm` plans the rest anew).
struct Plan {
    int config, splits;
    int rows = 0;
};

//! @brief The rows of an M-row problem that `config` unsplit runs in whole waves on `sm_count` SMs: all of M unless
//!        the last wave fills less than `last_wave_percent` of the GPU (SMs times the configuration's blocks per SM),
//!        then the tile rows before it (4097^3 in 128 x 128 tiles: 1089 tiles in waves of 264, 4096 rows in 4 waves).
constexpr int whole_wave_rows(int config, int M, int N, int sm_count)
{
    const TileShape& t = config_tiles[config];
    const long long tiles_n = tiles_of(N, t.BN);
    const long long tiles = tiles_of(M, t.BM) * tiles_n;
    const long long slots = static_cast<long long>(sm_count) * t.blocks_per_sm;
    const long long last_wave = tiles % slots;
    if (tiles <= slots || last_wave == 0 || 100 * last_wave >= last_wave_percent * slots) {
        return M;
    }
    const long long rows = (tiles - last_wave) / tiles_n * t.BM;
    return rows > 0 ? static_cast<int>(rows) : M;
}

//! @brief The plan `sgemm` runs for an M x N x K product on a GPU of `sm_count` SMs: the first row of `plan_rows`
//!        whose blocks (tiles x splits, with the fewest splits that do and at least `min_split_k` of K each) fill
//!        `fill_percent` of the SMs times the row's blocks per SM; else the last row, unsplit. An unsplit plan covers
//!        the rows of its whole waves (`whole_wave_rows`).
constexpr Plan choose_plan(int M, int N, int K, int sm_count)
{
    for (const PlanRow& row : plan_rows) {
        const TileShape& t = config_tiles[row.config];
        const long long tiles = tiles_of(M, t.BM) * tiles_of(N, t.BN);
        const long long slots = static_cast<long long>(sm_count) * row.blocks_per_sm;
        for (int s = 1; s <= row.max_splits && (s == 1 || K / s >= row.min_split_k); ++s) {
            if (100 * tiles * s >= fill_percent * slots) {
                const int splits = effective_splits(K, t.BK, s);
                return {row.config, splits, splits == 1 ? whole_wave_rows(row.config, M, N, sm_count) : M};
            }
        }
    }
    return {plan_rows[std::size(plan_rows) - 1].config, 1, M};
}

static_assert(choose_plan(4096, 4096, 4096, 132).config == 0 && choose_plan(4096, 4096, 4096, 132).splits == 1);
static_assert(choose_plan(128, 8192, 8192, 132).config == 0 && choose_plan(128, 8192, 8192, 132).splits > 1);
static_assert(choose_plan(1024, 1024, 1024, 132).config == 1 && choose_plan(1024, 1024, 1024, 132).splits == 1);
static_assert(choose_plan(256, 256, 256, 132).config == std::tuple_size_v<Configs> - 1, "the last row always fits");
static_assert(choose_plan(4097, 4097, 4097, 132).rows == 4096 && choose_plan(4095, 4095, 4095, 132).rows == 4095);
static_assert(choose_plan(2147483647, 2147483647, 2147483647, 132).config == 0, "INT_MAX: counted without overflow");
static_assert(split_length(2147483647, 32, 1) == 2147483647 && effective_splits(2147483647, 32, 65535) == 65473,
              "K = INT_MAX: one split of all of K, or 65473 splits of 1025 tiles, counted without overflow");

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
//!        `choose_plan` picks for this GPU's SM count: for the rows it covers (at most the 65535 tile rows of one
//!        grid), then for the rows left, if any.
//! @param[in]     M,N,K   sizes, any positive
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre sizes positive (any up to INT_MAX); buffers not null and 4-byte aligned (16-byte aligned B and C, as
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
    for (int row = 0; row < M;) {  // the rows of whole waves (one grid's at most), then what is left, planned anew
        const Plan plan = choose_plan(M - row, N, K, sm_count);
        const int grid_rows = 65535 * config_tiles[plan.config].BM;
        const int rows = plan.rows < grid_rows ? plan.rows : grid_rows;
        error = sgemm_planned(plan, rows, N, K, alpha, d_A + static_cast<std::size_t>(row) * K, d_B, beta,
                              d_C + static_cast<std::size_t>(row) * N, stream);
        if (error != cudaSuccess) {
            return error;
        }
        row += rows;
    }
    return cudaSuccess;
}

}  // namespace stepwise::sgemm::autotuned
