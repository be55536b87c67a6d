//! @file 13_tf32_wgmma.cuh
//! @brief SGEMM step 13 (beyond the sources): TF32 on Hopper's warpgroup MMA, the tensor-core chapter's persistent
//!        kernel on fp32 data (not the same operation: the tensor cores read A and B as TF32; needs sm_90a).
//!
//! Step 12 reaches the tensor cores through WMMA, which on Hopper compiles to
//! the warp-wide `HMMA` of Ampere and leaves most of their rate unused. This
//! step is the tensor-core chapter's final kernel (see that chapter for each
//! piece) with `wgmma ... .tf32`: a producer warp loads tiles of A and B with
//! the TMA, clusters of two blocks share B's tile by multicast, two consumer
//! warpgroups multiply 64 x 256 x 8 slices from shared memory, and a persistent
//! grid walks the tiles. wgmma reads TF32 operands only K-contiguous, and B is
//! row-major (N-contiguous): the call first writes B transposed into a buffer
//! of its own, and that copy is part of the call. The tensor cores use the top
//! 19 bits of each fp32 input (its low 13 mantissa bits are dropped).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

namespace stepwise::sgemm::tf32_wgmma {

constexpr int BK = 32;          // 32 floats: one 128-byte swizzled row per row of A or B
constexpr int WGM = 64;         // a consumer warpgroup's rows of the tile (wgmma's M)
constexpr int consumers = 2;
constexpr int BM = WGM * consumers;
constexpr int BN = 256;
constexpr int stages = 4;
constexpr int cluster_m = 2;    // two vertically adjacent tiles share B's tile, each block loading half of it
constexpr int group_m = 8;      // clusters visited in groups of 8 cluster rows
constexpr int threads = (consumers + 1) * 128;  // the consumers and one producer warpgroup
constexpr int stage_elems = (BM + BN) * BK;
constexpr unsigned stage_bytes = stage_elems * sizeof(float);
constexpr std::size_t smem_bytes = static_cast<std::size_t>(stages) * stage_elems * sizeof(float) + 1024;
static_assert(smem_bytes <= 227 * 1024, "the stages fit in a block's shared memory");
static_assert((BN / cluster_m) % 8 == 0, "halves of whole 8-row swizzle atoms");
constexpr int producer_registers = 40;  // setmaxnreg: 40 * 128 + 2 * 232 * 128 <= 65536
constexpr int consumer_registers = 232;

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief The tiles of `tile` that cover `count`, without the int overflow of `count + tile - 1` near INT_MAX.
__host__ __device__ constexpr int tiles_of(int count, int tile) { return count / tile + (count % tile != 0); }

//! @brief The kernel counts its clusters' places in C's tiles, and steps through them by the grid's clusters, in an
//!        int: the launcher takes fewer places than this.
constexpr long long max_cluster_tiles = 1LL << 30;

__device__ __forceinline__ unsigned smem_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive_expect_bytes(std::uint64_t* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
}

//! @brief Arrives on the barrier at `bar`'s place in the shared memory of block `cta` of this cluster.
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint64_t* bar, unsigned cta)
{
    unsigned remote = 0;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_address(bar)), "r"(cta));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

//! @brief Waits until the phase of `bar` with this parity completed.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, unsigned parity)
{
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(smem_address(bar)), "r"(parity)
                     : "memory");
    }
}

__device__ __forceinline__ void tma_load(void* smem_dst, const CUtensorMap* map, int k, int row, std::uint64_t* bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];\n" ::"r"(smem_address(smem_dst)),
                 "l"(map), "r"(k), "r"(row), "r"(smem_address(bar))
                 : "memory");
}

//! @brief The TMA copy of a box into `smem_dst` of every block of the cluster in `cta_mask`.
__device__ __forceinline__ void tma_load_multicast(void* smem_dst, const CUtensorMap* map, int k, int row,
                                                   std::uint64_t* bar, std::uint16_t cta_mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_address(smem_dst)),
                 "l"(map), "r"(k), "r"(row), "r"(smem_address(bar)), "h"(cta_mask)
                 : "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank = 0;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

//! @brief The wgmma descriptor of a K-major tile with the 128-byte swizzle (1024-byte aligned, or 32 bytes further
//!        per slice of 8 floats along K): 8-row groups 1024 bytes apart.
__device__ __forceinline__ std::uint64_t smem_descriptor(const float* tile)
{
    return ((smem_address(tile) & 0x3FFFF) >> 4) | (std::uint64_t{1} << 16) | (std::uint64_t{1024 >> 4} << 32) |
           (std::uint64_t{1} << 62);
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 256 x 8 slice of TF32 operands in shared memory.
__device__ __forceinline__ void wgmma_64x256x8(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
                                               int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
          "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]),
          "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]),
          "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int pending>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}

//! @brief Tells the compiler the accumulators change here, so that no read of them moves above a wgmma_wait.
__device__ __forceinline__ void fence_accumulators(float (&d)[128])
{
#pragma unroll
    for (int i = 0; i < 128; ++i) {
        asm volatile("" : "+f"(d[i])::"memory");
    }
}

template <int count>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(count));
}

template <int count>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief C = alpha * acc + beta * C for a warpgroup's 64 x 256 accumulators, inside C (M x N) only: for each 8
//!        columns a thread holds two adjacent ones of row `16 * warp + lane / 4` and of the row 8 below. `pairs`:
//!        N even and C 8-byte aligned, so that two adjacent elements move as one float2.
__device__ __forceinline__ void store_warpgroup_tile(const float (&d)[128], float* C, int M, int N, int row0, int col0,
                                                     int thread_in_group, float alpha, float beta, bool pairs)
{
    const int row = row0 + (thread_in_group / 32) * 16 + (thread_in_group % 32) / 4;
    const int col = col0 + (thread_in_group % 4) * 2;
    float* c = C + static_cast<std::size_t>(row) * N + col;
    if (pairs && row0 <= M - WGM && col0 <= N - BN) {  // the whole tile is inside C: no checks (and no overflow)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float2* p = reinterpret_cast<float2*>(c + half * 8 * static_cast<std::size_t>(N) + j * 8);
                float2 v = make_float2(alpha * d[4 * j + 2 * half], alpha * d[4 * j + 2 * half + 1]);
                if (beta != 0.0f) {
                    const float2 old = *p;
                    v.x += beta * old.x;
                    v.y += beta * old.y;
                }
                *p = v;
            }
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // (row, col), (row, col + 1), (row + 8, col), (row + 8, col + 1)
            if ((e / 2) * 8 < M - row && j * 8 + e % 2 < N - col) {  // differences: no overflow near INT_MAX
                float* p = c + (e / 2) * 8 * static_cast<std::size_t>(N) + j * 8 + e % 2;
                *p = alpha * d[4 * j + e] + (beta != 0.0f ? beta * *p : 0.0f);
            }
        }
    }
}

//! @brief The tile (m, n) that block `rank` of a cluster computes at the cluster's `index`-th place: groups of
//!        `group_m` cluster rows, visited column by column within a group.
__device__ __forceinline__ void schedule_tile(int index, unsigned rank, int cluster_rows, int tiles_n, int& m, int& n)
{
    const int per_group = group_m * tiles_n;
    const int first_row = index / per_group * group_m;
    const int rows = min(cluster_rows - first_row, group_m);
    const int in_group = index % per_group;
    m = (first_row + in_group % rows) * cluster_m + static_cast<int>(rank);
    n = in_group / rows;
}

//! @brief C = alpha A B + beta C from the TMA maps of A (M x K) and of B transposed (N x K), both K-contiguous.
static __global__ void __launch_bounds__(threads, 1)
    sgemm_kernel(int M, int N, int K, float alpha, const __grid_constant__ CUtensorMap map_a,
                 const __grid_constant__ CUtensorMap map_bt_half, float beta, float* __restrict__ C, bool pairs)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char smem_raw[];
    float* smem = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    __shared__ std::uint64_t full[stages];   // a stage's tiles have landed
    __shared__ std::uint64_t empty[stages];  // every consumer warp of the cluster is done with a stage
    const int t = threadIdx.x;
    const int group = t / 128;  // 0: the producer; 1, 2: consumers of 64 rows each
    const unsigned rank = cluster_rank();
    const int k_tiles = tiles_of(K, BK);
    const int cluster_rows = tiles_of(tiles_of(M, BM), cluster_m);
    const int tiles_n = tiles_of(N, BN);
    const int cluster_tiles = cluster_rows * tiles_n;  // below max_cluster_tiles: the launcher checks
    const int clusters = static_cast<int>(gridDim.x) / cluster_m;
    const int first_index = static_cast<int>(blockIdx.x) / cluster_m;

    if (t == 0) {
        for (int s = 0; s < stages; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], cluster_m * consumers * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();

    if (group == 0) {
        setmaxnreg_dec<producer_registers>();
        if (t == 0) {
            int it = 0;  // k-tiles loaded so far, over all tiles: the ring's position and phase
            for (int index = first_index; index < cluster_tiles; index += clusters) {
                int m = 0, n = 0;
                schedule_tile(index, rank, cluster_rows, tiles_n, m, n);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int stage = it % stages;
                    mbarrier_wait(&empty[stage], (it / stages) % 2 ^ 1);
                    float* As = smem + stage * stage_elems;
                    float* Bs = As + BM * BK;
                    mbarrier_arrive_expect_bytes(&full[stage], stage_bytes);
                    tma_load(As, &map_a, kt * BK, m * BM, &full[stage]);
                    tma_load_multicast(Bs + rank * (BN / 2) * BK, &map_bt_half, kt * BK, n * BN + rank * (BN / 2),
                                       &full[stage], (1u << cluster_m) - 1);
                }
            }
        }
    } else {
        setmaxnreg_inc<consumer_registers>();
        const int consumer = group - 1;
        const auto release = [&](int stage) {  // every producer of the cluster writes this stage
            if (t % 32 == 0) {
                for (unsigned cta = 0; cta < cluster_m; ++cta) {
                    mbarrier_arrive_cluster(&empty[stage], cta);
                }
            }
        };
        float acc[128] = {};
        int it = 0;
        for (int index = first_index; index < cluster_tiles; index += clusters) {
            int m = 0, n = 0;
            schedule_tile(index, rank, cluster_rows, tiles_n, m, n);
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int stage = it % stages;
                mbarrier_wait(&full[stage], (it / stages) % 2);
                const float* As = smem + stage * stage_elems + consumer * WGM * BK;
                const float* Bs = smem + stage * stage_elems + BM * BK;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 8; ++kk) {  // the tile's first slice overwrites the accumulators
                    wgmma_64x256x8(acc, smem_descriptor(As + kk * 8), smem_descriptor(Bs + kk * 8), kt > 0 || kk > 0);
                }
                wgmma_commit();
                wgmma_wait<1>();  // the previous k-tile's group is done: release its stage
                fence_accumulators(acc);
                if (kt > 0) {
                    release((it - 1) % stages);
                }
            }
            wgmma_wait<0>();
            fence_accumulators(acc);
            release((it - 1) % stages);
            store_warpgroup_tile(acc, C, M, N, m * BM + consumer * WGM, n * BN, t % 128, alpha, beta, pairs);
        }
    }
    cluster_sync();  // no block leaves while another may still arrive on its barriers
#else
    (void)M, (void)N, (void)K, (void)alpha, (void)map_a, (void)map_bt_half, (void)beta, (void)C, (void)pairs;
#endif
}

//! @brief Writes `Bt` (N x K, K-contiguous) = the transpose of the K x N row-major B, in 32 x 32 tiles through
//!        shared memory (block (x, y): columns 32x.. of B, rows 32y..).
static __global__ void transpose_b_kernel(const float* __restrict__ B, float* __restrict__ Bt, int K, int N)
{
    __shared__ float tile[32][33];
    const int n0 = blockIdx.x * 32;
    const int k0 = blockIdx.y * 32;
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        const int k = k0 + r;
        const int n = n0 + static_cast<int>(threadIdx.x);
        if (k < K && n < N) {
            tile[r][threadIdx.x] = B[static_cast<std::size_t>(k) * N + n];
        }
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        const int n = n0 + r;
        const int k = k0 + static_cast<int>(threadIdx.x);
        if (n < N && k < K) {
            Bt[static_cast<std::size_t>(n) * K + k] = tile[threadIdx.x][r];
        }
    }
}

//! What this step needs of the GPU and the build: `wgmma` and the rest of sm_90a.
constexpr const char* requirement = "sm_90a";

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int marker_threads = 128;
#else
constexpr int marker_threads = 32;
#endif
//! Bounded to 128 threads where built with sm_90a's instructions, else to 32: its attributes tell the launcher
//! which machine code the driver loaded for this GPU.
static __global__ void __launch_bounds__(marker_threads) requirement_marker_kernel() {}

//! @brief Whether the machine code loaded for the current GPU has the instructions this step uses.
static inline bool requirement_met()
{
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, requirement_marker_kernel) != cudaSuccess) {
        cudaGetLastError();  // no code for this GPU at all: reported as cudaErrorNotSupported instead
        return false;
    }
    return attributes.maxThreadsPerBlock == 128;
}

//! @brief The driver's `cuTensorMapEncodeTiled`, reached through the runtime: no `-lcuda` needed.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static void* const function = [] {
        void* f = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
            cudaGetLastError();
            return static_cast<void*>(nullptr);
        }
        return f;
    }();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
}

//! @brief Describes a `rows` x K fp32 matrix, rows `ld` floats apart, to the TMA: boxes of BK x `box_rows`,
//!        128-byte swizzle, elements outside the matrix read as zero.
inline bool encode_k_major(CUtensorMap* map, const float* base, int rows, int K, int ld, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
    const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(ld) * sizeof(float)};
    const cuuint32_t box[2] = {BK, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(base), dims, row_stride, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

//! @brief How many clusters of two blocks run on the current device at once (0 on an error), asked once per device.
static int resident_clusters(int device, const cudaLaunchConfig_t& config)
{
    constexpr int max_devices = 64;
    static std::atomic<int> known[max_devices];  // 0: not asked yet
    if (device >= 0 && device < max_devices && known[device].load() > 0) {
        return known[device].load();
    }
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, sgemm_kernel, &config) != cudaSuccess) {
        return 0;
    }
    if (device >= 0 && device < max_devices) {
        known[device].store(clusters);
    }
    return clusters;
}

//! @brief The memory pool of B's transposed copies on `device`: it keeps what it has allocated, so that a call
//!        reuses the last call's memory. Made on first use, once per device.
static cudaError_t copy_pool(int device, cudaMemPool_t& pool)
{
    constexpr int max_devices = 64;
    static std::atomic<cudaMemPool_t> pools[max_devices];
    if (device < 0 || device >= max_devices) {
        return cudaErrorInvalidDevice;
    }
    if ((pool = pools[device].load()) != nullptr) {
        return cudaSuccess;
    }
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t created = nullptr;
    cudaError_t error = cudaMemPoolCreate(&created, &props);
    cuuint64_t keep_everything = ~cuuint64_t{0};
    if (error == cudaSuccess) {
        error = cudaMemPoolSetAttribute(created, cudaMemPoolAttrReleaseThreshold, &keep_everything);
    }
    if (error != cudaSuccess) {
        return error;
    }
    cudaMemPool_t expected = nullptr;
    if (pools[device].compare_exchange_strong(expected, created)) {
        pool = created;
    } else {  // another thread made one first
        cudaMemPoolDestroy(created);
        pool = expected;
    }
    return cudaSuccess;
}

//! @brief C = alpha * A * B + beta * C, with A and B read by the tensor cores as TF32, accumulation in fp32.
//! @param[in]     M       rows of A and C
//! @param[in]     N       columns of B and C
//! @param[in]     K       columns of A, rows of B
//! @param[in]     alpha   scales A * B
//! @param[in]     d_A     M x K floats, row-major
//! @param[in]     d_B     K x N floats, row-major
//! @param[in]     beta    scales the old C (not read when 0)
//! @param[in,out] d_C     M x N floats, row-major
//! @param[in]     stream  stream to launch on
//! @pre M, N >= 1 (any up to INT_MAX, C of fewer than `max_cluster_tiles` clusters' tiles: any C a GPU's memory
//!      holds), K >= 1 a multiple of 4 (A's rows a multiple of 16 bytes, as the TMA reads them) and at most
//!      65535 * 32 (the grid of B's transpose); buffers not null, A 16-byte aligned, B and C 4-byte aligned; a GPU of
//!      compute capability 9.0 and this file built for it as `sm_90a`. The call writes B transposed into `N * K`
//!      floats from a stream-ordered memory pool of its own, which keeps that memory for later calls (as much as the
//!      largest call needed) until the program ends.
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` without sm_90a code for this GPU
//!         (or a driver without `cuTensorMapEncodeTiled`), the error of an allocation or of the shared-memory opt-in,
//!         else the launch's error
inline cudaError_t sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         cudaStream_t stream = 0)
{
    if (M <= 0 || N <= 0 || K <= 0 || K % 4 != 0 || K > 65535 * 32 || d_A == nullptr || d_B == nullptr ||
        d_C == nullptr || !aligned(d_A, 16) || !aligned(d_B, alignof(float)) || !aligned(d_C, alignof(float))) {
        return cudaErrorInvalidValue;
    }
    const long long cluster_tiles = static_cast<long long>(tiles_of(tiles_of(M, BM), cluster_m)) * tiles_of(N, BN);
    if (cluster_tiles >= max_cluster_tiles) {
        return cudaErrorInvalidValue;
    }
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess) {
        return error;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    error = cudaFuncSetAttribute(sgemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem_bytes));
    if (error != cudaSuccess) {
        return error;
    }
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = cluster_m;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = &cluster;
    config.numAttrs = 1;
    config.gridDim = dim3(cluster_m);
    const int clusters = resident_clusters(device, config);
    if (clusters <= 0) {
        return cudaErrorNotSupported;
    }
    cudaMemPool_t pool = nullptr;
    float* Bt = nullptr;
    error = copy_pool(device, pool);
    if (error == cudaSuccess) {
        error = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&Bt),
                                        static_cast<std::size_t>(N) * K * sizeof(float), pool, stream);
    }
    if (error != cudaSuccess) {
        return error;
    }
    transpose_b_kernel<<<dim3(tiles_of(N, 32), tiles_of(K, 32)), dim3(32, 8), 0, stream>>>(d_B, Bt, K, N);
    CUtensorMap map_a{};
    CUtensorMap map_bt_half{};
    if (!encode_k_major(&map_a, d_A, M, K, K, BM) || !encode_k_major(&map_bt_half, Bt, N, K, K, BN / cluster_m)) {
        error = cudaErrorNotSupported;
    } else {
        config.gridDim = dim3(static_cast<unsigned>(std::min<long long>(cluster_tiles, clusters) * cluster_m));
        const bool pairs = N % 2 == 0 && aligned(d_C, 8);
        error = cudaLaunchKernelEx(&config, sgemm_kernel, M, N, K, alpha, map_a, map_bt_half, beta, d_C, pairs);
        if (error == cudaSuccess) {
            error = cudaGetLastError();
        }
    }
    const cudaError_t freed = cudaFreeAsync(Bt, stream);
    return error != cudaSuccess ? error : freed;
}

}  // namespace stepwise::sgemm::tf32_wgmma
