//! @file 08_persistent_tile_scheduler.cuh
//! @brief Tensor-core GEMM step 8: a persistent kernel whose clusters walk C's tiles in the order of a tile
//!        scheduler, so that the SMs never idle between tiles (beyond the sources; needs sm_90a).
//!
//! Step 7 launches one block per tile: each block sets up its barriers, fills
//! its pipeline from empty, and leaves the SM idle while it writes its tile of
//! C. Here the grid is as many clusters as fit on the GPU at once, and each
//! block walks a list of tiles: the producer runs ahead into the next tile's
//! K while the consumers write the last one, so loads overlap the epilogue.
//! Tiles are visited in groups of `group_m` cluster rows, so the blocks
//! running at one time share rows of A and columns of B in the L2. The
//! epilogue stages C a 64 x 64 box at a time in two boxes that take turns,
//! and the TMA stores them while the consumers go on to their next tile.
//! Neither the start nor the end of a block fences the whole GPU (about a
//! microsecond each, a tenth of a 1024^3 product): a relaxed cluster barrier
//! follows the barriers' set-up, and the block's own copies of its first
//! stages start before it; before leaving, the producer waits until every
//! consumer of the cluster has released every stage. The tile, the cluster
//! and the shapes taken are step 7's.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

namespace stepwise::tensor_core_gemm::persistent_tile_scheduler {

using bf16 = __nv_bfloat16;

constexpr int BM = 128;  // block tile of C
constexpr int BN = 256;
constexpr int BK = 64;   // 64 bf16: one 128-byte swizzled row per row of A or B
constexpr int WGM = 64;  // a consumer warpgroup's rows of the tile (wgmma's M)
constexpr int consumers = BM / WGM;             // 2 warpgroups multiply
constexpr int threads = (consumers + 1) * 128;  // 384: and one loads
constexpr int producer_registers = 40;          // setmaxnreg: 40 * 128 + 2 * 232 * 128 <= 65536
constexpr int consumer_registers = 232;
constexpr int stages = 4;                       // tiles of A and B in flight or in use: 4 x 48 KiB
constexpr int cluster_m = 2;                    // blocks of a cluster: vertically adjacent tiles, one tile of B
constexpr int group_m = 8;                      // clusters are visited in groups of 8 cluster rows
constexpr int stage_elems = (BM + BN) * BK;
constexpr unsigned stage_bytes = stage_elems * sizeof(bf16);  // what lands on a stage's "full" barrier
//! Each consumer's 64 rows of C's tile leave through shared memory one box of 64 x 64 at a time (rows of 128
//! bytes, the widest the 128-byte swizzle takes), which the TMA stores; two staging boxes per consumer take turns,
//! so that the threads fill one while the TMA still reads the other.
constexpr int out_cols = 64;
constexpr int out_rounds = BN / out_cols;
constexpr int out_buffers = 2;
constexpr int out_elems = BM * out_cols * out_buffers;  // both consumers' staging boxes
//! The stages, the staging area of C, and 1 KiB to align them: the swizzle repeats every 8 rows of 128 bytes, and
//! both the TMA and wgmma apply it to addresses, so a tile must start on a multiple of 1024 bytes.
constexpr std::size_t smem_bytes = (static_cast<std::size_t>(stages) * stage_elems + out_elems) * sizeof(bf16) + 1024;
static_assert(BK * sizeof(bf16) == 128, "a row of a tile is one 128-byte swizzle row");

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief The kernel counts its clusters' places in C's tiles, and steps through them by the grid's clusters, in an
//!        int: the launcher takes fewer places than this.
constexpr long long max_cluster_tiles = 1LL << 30;

//! @brief The address of `p` in the shared window, as PTX's `.shared` instructions take it.
__device__ __forceinline__ unsigned smem_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

//! @brief Sets up an mbarrier whose phase completes after `arrivals` arrivals (and the bytes announced to it).
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

//! @brief Arrives on `bar` and announces `bytes` more that copies will complete on it.
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

//! @brief Waits until the phase of `bar` with this parity (0 for its first phase, 1 for its second, ...) completed.
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

//! @brief Starts the TMA copy of the box at (`k`, `row`) of `map` into `smem_dst`; its bytes complete on `bar`.
__device__ __forceinline__ void tma_load(void* smem_dst, const CUtensorMap* map, int k, int row, std::uint64_t* bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
                 "[%4];\n" ::"r"(smem_address(smem_dst)),
                 "l"(map), "r"(k), "r"(row), "r"(smem_address(bar))
                 : "memory");
}

//! @brief Starts the TMA copy of the box at (`k`, `row`) of `map` into `smem_dst` of every block of the cluster in
//!        `cta_mask`; in each, its bytes complete on the barrier at `bar`'s place.
__device__ __forceinline__ void tma_load_multicast(void* smem_dst, const CUtensorMap* map, int k, int row,
                                                   std::uint64_t* bar, std::uint16_t cta_mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_address(smem_dst)),
                 "l"(map), "r"(k), "r"(row), "r"(smem_address(bar)), "h"(cta_mask)
                 : "memory");
}

//! @brief Starts the TMA store of the box at `smem_src` to (`col`, `row`) of `map`; parts outside the matrix are not
//!        written. It joins the group that the next bulk_commit() closes.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, int col, int row, const void* smem_src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(col),
                 "r"(row), "r"(smem_address(smem_src))
                 : "memory");
}

//! @brief Closes the group of this thread's TMA stores started since the last commit.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

//! @brief Waits until at most `pending` of this thread's committed groups of TMA stores may still read their shared
//!        memory.
template <int pending>
__device__ __forceinline__ void bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(pending) : "memory");
}

//! @brief Makes this thread's ordinary shared-memory writes visible to the TMA (the async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

//! @brief Waits until the 128 threads of consumer warpgroup `consumer` got here (named barrier 1 + consumer).
__device__ __forceinline__ void warpgroup_sync(int consumer)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + consumer) : "memory");
}

//! @brief Fetches a tensor map into the TMA unit's cache ahead of its first use.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map)
{
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

//! @brief This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank = 0;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

//! @brief Tells the cluster's barrier this thread got here. The arrival is relaxed: it orders no memory accesses, so
//!        it costs no fence of the whole GPU (`MEMBAR.ALL.GPU`, about a microsecond); the barriers' initialization
//!        is published by fence.mbarrier_init instead.
__device__ __forceinline__ void cluster_arrive_relaxed()
{
    asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
}

//! @brief Waits until every thread of every block of the cluster arrived (cluster_arrive_relaxed()).
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;\n" ::: "memory"); }

//! @brief The wgmma descriptor of a K-major tile with the 128-byte swizzle, starting at `tile` (1024-byte aligned, or
//!        32 bytes further per slice of 16 along K): 8-row groups 1024 bytes apart.
__device__ __forceinline__ std::uint64_t smem_descriptor(const bf16* tile)
{
    return ((smem_address(tile) & 0x3FFFF) >> 4)    // start address, in 16-byte units
           | (std::uint64_t{1} << 16)               // leading byte offset: unused by K-major swizzled tiles
           | (std::uint64_t{1024 >> 4} << 32)       // stride byte offset: one 8-row group
           | (std::uint64_t{1} << 62);              // 128-byte swizzle
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 256 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64x256x16(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
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
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
          "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief Orders this warpgroup's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

//! @brief Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

//! @brief Waits until at most `pending` committed groups of this warpgroup are still running.
template <int pending>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}

//! @brief Tells the compiler the accumulators change here, so that no read of them moves above a wgmma_wait.
template <int n>
__device__ __forceinline__ void fence_accumulators(float (&d)[n])
{
#pragma unroll
    for (int i = 0; i < n; ++i) {
        asm volatile("" : "+f"(d[i])::"memory");
    }
}

//! @brief Lowers this warpgroup's registers per thread to `count` (all its threads execute it).
template <int count>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief Raises this warpgroup's registers per thread to `count`, from what other warpgroups gave back.
template <int count>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief Writes the warpgroup's columns [`first_col`, `first_col` + 64) of its accumulators, as bf16, into the
//!        staging box `box`: 64 rows x 64 columns, 128-byte swizzled as the TMA store reads it (the 16-byte chunk c of
//!        row r at chunk c ^ (r % 8): a quad's 16 bytes of 8 rows land in 8 bank groups).
__device__ __forceinline__ void stage_warpgroup_tile(const float (&d)[BN / 2], bf16* box, int first_col,
                                                     int thread_in_group)
{
    static_assert(out_cols == 64, "one box of 64 columns");
    const int row = (thread_in_group / 32) * 16 + (thread_in_group % 32) / 4;
    const int quad = thread_in_group % 4;
#pragma unroll
    for (int c8 = 0; c8 < 8; ++c8) {
        const int j = first_col / 8 + c8;  // the accumulators' 8-column chunk
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = row + half * 8;
            *reinterpret_cast<__nv_bfloat162*>(&box[r * 64 + (c8 ^ (r % 8)) * 8 + quad * 2]) =
                __floats2bfloat162_rn(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
        }
    }
}

//! @brief The tiles of C, and the order in which the clusters visit them.
struct TileSchedule {
    int cluster_rows, cluster_cols;  // clusters of cluster_m x 1 tiles over C's tiles

    __device__ int cluster_tiles() const { return cluster_rows * cluster_cols; }

    //! @brief The tile (m, n) that block `rank` of a cluster computes at the cluster's `index`-th place: groups of
    //!        `group_m` cluster rows, visited column by column within a group.
    __device__ void tile(int index, unsigned rank, int& m, int& n) const
    {
        const int per_group = group_m * cluster_cols;
        const int first_row = index / per_group * group_m;
        const int rows = min(cluster_rows - first_row, group_m);
        const int in_group = index % per_group;
        m = (first_row + in_group % rows) * cluster_m + static_cast<int>(rank);
        n = in_group / rows;
    }
};

//! @brief Computes the tiles the schedule gives this block's cluster (empty where the code is not built for sm_90a).
static __global__ void __launch_bounds__(threads, 1)
    gemm_kernel(int M, int N, int K, const __grid_constant__ CUtensorMap map_a,
                const __grid_constant__ CUtensorMap map_b_half, const __grid_constant__ CUtensorMap map_c)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char smem_raw[];
    bf16* smem = reinterpret_cast<bf16*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    __shared__ std::uint64_t full[stages];   // a stage's tiles have landed
    __shared__ std::uint64_t empty[stages];  // every consumer warp of the cluster is done with a stage
    const int t = threadIdx.x;
    const int group = t / 128;  // 0: the producer; 1, 2: consumers of rows [64 (group - 1), 64 group) of the tile
    const unsigned rank = cluster_rank();
    const int k_tiles = K / BK;
    const TileSchedule schedule{M / (BM * cluster_m), N / BN};
    const int clusters = static_cast<int>(gridDim.x) / cluster_m;
    const int first_index = static_cast<int>(blockIdx.x) / cluster_m;  // this cluster's first place in the schedule

    // Starts the copies of k-tile `kt` of tile (m, n) into `stage`: what this block loads for itself alone (`own`,
    // A's tile), and its half of B's tile, which its cluster's two blocks share (`shared`), multicast to both.
    const auto load = [&](int stage, int kt, int m, int n, bool own, bool shared) {
        bf16* As = smem + stage * stage_elems;
        bf16* Bs = As + BM * BK;
        if (own) {
            tma_load(As, &map_a, kt * BK, m * BM, &full[stage]);
        }
        if (shared) {
            tma_load_multicast(Bs + rank * (BN / cluster_m) * BK, &map_b_half, kt * BK,
                               n * BN + rank * (BN / cluster_m), &full[stage], (1u << cluster_m) - 1);
        }
    };
    // The first tile's first stages: this block's own copies start before the cluster's blocks have met (their
    // barriers are this block's), the shared ones after.
    const int early = first_index < schedule.cluster_tiles() ? min(stages, k_tiles) : 0;

    if (t == 0) {
        prefetch_tensor_map(&map_a);  // fetched while the barriers are set up
        prefetch_tensor_map(&map_b_half);
        prefetch_tensor_map(&map_c);
        for (int s = 0; s < stages; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], cluster_m * consumers * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the cluster and the TMA
        fence_proxy_async();  // and to this block's TMA now, before the cluster barrier
        int m = 0, n = 0;
        schedule.tile(first_index, rank, m, n);
        for (int kt = 0; kt < early; ++kt) {
            mbarrier_arrive_expect_bytes(&full[kt], stage_bytes);
            load(kt, kt, m, n, true, false);
        }
    }
    // No block multicasts into, or arrives on, a barrier not yet set up: arrive now, and wait after the registers
    // changed hands, so that the two overlap.
    cluster_arrive_relaxed();

    if (group == 0) {
        setmaxnreg_dec<producer_registers>();
        cluster_wait();
        if (t == 0) {
            int it = 0;  // k-tiles loaded so far, over all tiles: the ring's position and phase
            for (int index = first_index; index < schedule.cluster_tiles(); index += clusters) {
                int m = 0, n = 0;
                schedule.tile(index, rank, m, n);
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                    const int stage = it % stages;
                    if (it < early) {  // its own copies started above
                        load(stage, kt, m, n, false, true);
                        continue;
                    }
                    mbarrier_wait(&empty[stage], (it / stages) % 2 ^ 1);  // first pass: completes at once
                    mbarrier_arrive_expect_bytes(&full[stage], stage_bytes);
                    load(stage, kt, m, n, true, true);
                }
            }
            // Before the block leaves, every consumer of the cluster must be done with every stage this block filled:
            // then no multicast into, or arrival on, this block's shared memory is still on its way.
            for (int tail = 0; tail < stages; ++tail, ++it) {
                mbarrier_wait(&empty[it % stages], (it / stages) % 2 ^ 1);
            }
        }
    } else {
        setmaxnreg_inc<consumer_registers>();
        cluster_wait();
        const int consumer = group - 1;
        const auto release = [&](int stage) {  // both blocks' producers write this stage
            if (t % 32 == 0) {
                for (unsigned cta = 0; cta < cluster_m; ++cta) {
                    mbarrier_arrive_cluster(&empty[stage], cta);
                }
            }
        };
        float acc[BN / 2] = {};
        int it = 0;
        for (int index = first_index; index < schedule.cluster_tiles(); index += clusters) {
            int m = 0, n = 0;
            schedule.tile(index, rank, m, n);
            for (int kt = 0; kt < k_tiles; ++kt, ++it) {
                const int stage = it % stages;
                mbarrier_wait(&full[stage], (it / stages) % 2);
                const bf16* As = smem + stage * stage_elems + consumer * WGM * BK;
                const bf16* Bs = smem + stage * stage_elems + BM * BK;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {  // the tile's first slice overwrites the accumulators
                    wgmma_64x256x16(acc, smem_descriptor(As + kk * 16), smem_descriptor(Bs + kk * 16),
                                    kt > 0 || kk > 0);
                }
                wgmma_commit();
                // The previous k-tile's group is done (this one keeps the tensor cores busy): release its stage.
                wgmma_wait<1>();
                fence_accumulators(acc);
                if (kt > 0) {
                    release((it - 1) % stages);
                }
            }
            wgmma_wait<0>();
            fence_accumulators(acc);
            release((it - 1) % stages);
            // Each consumer stages and stores its own 64 rows, a box at a time; its first thread issues the stores.
            bf16* out = smem + stages * stage_elems + consumer * out_buffers * WGM * out_cols;
            const bool issuer = t % 128 == 0;
#pragma unroll
            for (int round = 0; round < out_rounds; ++round) {
                bf16* box = out + round % out_buffers * WGM * out_cols;
                if (issuer) {
                    bulk_wait_read<out_buffers - 1>();  // the store that last read this box is done reading
                }
                warpgroup_sync(consumer);
                stage_warpgroup_tile(acc, box, round * out_cols, t % 128);
                fence_proxy_async();
                warpgroup_sync(consumer);
                if (issuer) {
                    tma_store(&map_c, n * BN + round * out_cols, m * BM + consumer * WGM, box);
                    bulk_commit();
                }
            }
        }
        if (t % 128 == 0) {
            bulk_wait_read<0>();  // the last stores have read the staging boxes before the block's memory goes
        }
    }
#endif
}

//! What this step needs of the GPU and the build: `wgmma` and the rest of sm_90a, compute capability 9.0 and code
//! built for it (`-gencode=arch=compute_90a,code=sm_90a`).
constexpr const char* requirement = "sm_90a";

//! Built with those instructions this kernel is bounded to 128 threads, without them to 32: its attributes tell the
//! launcher which machine code the driver loaded for this GPU, without launching anything.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
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

//! @brief The driver's `cuTensorMapEncodeTiled`, reached through the runtime: no `-lcuda` needed.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static void* const function = [] {
        void* f = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
            cudaGetLastError();  // reported as cudaErrorNotSupported by the launcher instead
            return static_cast<void*>(nullptr);
        }
        return f;
    }();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
}

//! @brief Describes a `rows` x K bf16 matrix stored K-contiguous to the TMA: boxes of BK x `box_rows`, 128-byte
//!        swizzle, elements outside the matrix read as zero.
inline bool encode_k_major(CUtensorMap* map, const bf16* base, int rows, int K, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
    const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(K) * sizeof(bf16)};
    const cuuint32_t box[2] = {BK, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, row_stride, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

//! @brief Describes the M x N row-major C to the TMA for stores of boxes of 64 columns x `box_rows`, 128-byte
//!        swizzle.
inline bool encode_c(CUtensorMap* map, bf16* base, int M, int N, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(N), static_cast<cuuint64_t>(M)};
    const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(N) * sizeof(bf16)};
    const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, row_stride, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

//! @brief The launch of `grid` blocks on `stream` in clusters of `cluster_m` consecutive blocks (set at launch:
//!        clusters exist from sm_90 on only); `cluster` holds the attribute the configuration points to.
inline cudaLaunchConfig_t launch_config(int grid, cudaStream_t stream, cudaLaunchAttribute& cluster)
{
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = cluster_m;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = &cluster;
    config.numAttrs = 1;
    return config;
}

//! @brief How many clusters of the kernel run on the current device at once (0 on an error), asked of the runtime
//!        once per device.
static inline int resident_clusters(int device)
{
    constexpr int max_devices = 64;
    static std::atomic<int> known[max_devices];  // 0: not asked yet
    if (device >= 0 && device < max_devices && known[device].load() > 0) {
        return known[device].load();
    }
    cudaLaunchAttribute cluster{};
    cudaLaunchConfig_t config = launch_config(cluster_m, 0, cluster);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, gemm_kernel, &config) != cudaSuccess) {
        return 0;
    }
    if (device >= 0 && device < max_devices) {
        known[device].store(clusters);
    }
    return clusters;
}

//! @brief C = A B in bf16 with fp32 accumulation.
//! @param[in]  M       rows of A and C
//! @param[in]  N       columns of B and C
//! @param[in]  K       columns of A, rows of B
//! @param[in]  d_A     M x K bf16, row-major (`A[m * K + k]`)
//! @param[in]  d_B     K x N bf16, column-major (`B[n * K + k]`)
//! @param[out] d_C     M x N bf16, row-major (`C[m * N + n]`)
//! @param[in]  stream  stream to launch on
//! @pre M a multiple of 256, N of 256, K of 64, C of fewer than `max_cluster_tiles` tiles of 256 x 256 (any C a GPU's
//!      memory holds); buffers not null and 16-byte aligned; a GPU of compute capability 9.0 and this file built for
//!      it as `sm_90a`
//! @return `cudaErrorInvalidValue` if a precondition fails, `cudaErrorNotSupported` without sm_90a code for this GPU
//!         (or a driver without `cuTensorMapEncodeTiled`, or a GPU where no cluster of two blocks fits), the error of
//!         querying the current device or of the shared-memory opt-in, else the launch's error
inline cudaError_t gemm(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, cudaStream_t stream = 0)
{
    if (M <= 0 || N <= 0 || K <= 0 || M % (BM * cluster_m) != 0 || N % BN != 0 || K % BK != 0 ||
        !aligned(d_A, 16) || !aligned(d_B, 16) || !aligned(d_C, 16) || d_A == nullptr || d_B == nullptr ||
        d_C == nullptr) {
        return cudaErrorInvalidValue;
    }
    const long long cluster_tiles = static_cast<long long>(M / (BM * cluster_m)) * (N / BN);
    if (cluster_tiles >= max_cluster_tiles) {
        return cudaErrorInvalidValue;
    }
    int device = 0;
    const cudaError_t found = cudaGetDevice(&device);
    if (found != cudaSuccess) {
        return found;
    }
    CUtensorMap map_a{};
    CUtensorMap map_b_half{};
    CUtensorMap map_c{};
    if (!requirement_met() || !encode_k_major(&map_a, d_A, M, K, BM) ||
        !encode_k_major(&map_b_half, d_B, N, K, BN / cluster_m) || !encode_c(&map_c, d_C, M, N, WGM)) {
        return cudaErrorNotSupported;
    }
    // Above 48 KiB a kernel must opt in to dynamic shared memory. Not cached in a static: a kernel included in
    // several translation units is a different kernel in each.
    const cudaError_t opt_in = cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(smem_bytes));
    if (opt_in != cudaSuccess) {
        return opt_in;
    }
    const int clusters = resident_clusters(device);
    if (clusters <= 0) {
        return cudaErrorNotSupported;  // the kernel's cluster does not fit on the device
    }
    // As many clusters as run at once, or as C has places for: each walks the schedule from its own first place.
    const int grid = static_cast<int>(std::min<long long>(cluster_tiles, clusters)) * cluster_m;
    cudaLaunchAttribute cluster{};
    const cudaLaunchConfig_t config = launch_config(grid, stream, cluster);
    const cudaError_t launched = cudaLaunchKernelEx(&config, gemm_kernel, M, N, K, map_a, map_b_half, map_c);
    return launched != cudaSuccess ? launched : cudaGetLastError();
}

}  // namespace stepwise::tensor_core_gemm::persistent_tile_scheduler
