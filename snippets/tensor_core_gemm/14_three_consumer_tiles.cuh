//! @file 14_three_consumer_tiles.cuh
//! @brief Tensor-core GEMM step 14: three consumer warpgroups share a 192 x 192 tile where few rounds of tiles cover
//!        C (beyond the sources; needs sm_90a).
//!
//! In step 13 a consumer's accumulators fill its 232 registers at 128 x 192
//! of C, and where few rounds of tiles cover C the rounds set the time:
//! 3072^3 takes three rounds of 128 x 192 tiles on 132 SMs. Here three
//! consumers of 64 rows each (152 registers after setmaxnreg, 512 threads a
//! block) share a 192 x 192 tile. It loads a fifth less of A and B per
//! product than 128 x 192 (192 + 192 rows for 192 x 192 outputs against
//! 128 + 192 for 128 x 192), and covers 3072^3 in two rounds instead of
//! three. Each consumer keeps one staging box of its own for C, which leaves
//! room for a fourth stage of 48 KiB. No consumer hides another's epilogue,
//! so over many rounds the ping-pong tiles win: the launcher takes the three
//! consumers' tile where it needs at most `three_consumer_rounds` rounds and
//! its waves cost no more than the large configurations' (2112^3 to 4097^3
//! of the sizes timed). The rest is step 13's.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

namespace stepwise::tensor_core_gemm::three_consumer_tiles {

using bf16 = __nv_bfloat16;

constexpr int BK = 64;  // 64 bf16: one 128-byte swizzled row per row of A or B
constexpr int WGM = 64;  // wgmma's M: rows of one wgmma

//! The named barriers the consumers use (0 is __syncthreads()'s): each consumer warpgroup's own, from
//! `warpgroup_barrier`; the ping-pong consumers' turns to run a k-loop, from `k_loop_turn_barrier`; their turns to use
//! the staging area of C, from `staging_turn_barrier`: one barrier a consumer from each.
constexpr int max_consumers = 3;
constexpr int warpgroup_barrier = 1;
constexpr int k_loop_turn_barrier = warpgroup_barrier + max_consumers;
constexpr int staging_turn_barrier = k_loop_turn_barrier + 2;

//! @brief One configuration of the kernel: tiles of BM x BN, a ring of `stages` tiles of A and B, clusters of
//!        `cluster_m` x `cluster_n` tiles (two vertically adjacent tiles share B's tile, two horizontally adjacent
//!        ones A's, each block loading half of it for both), clusters visited in groups of `group_m` cluster rows.
//!        With `PING_PONG` each of the two consumer warpgroups owns whole tiles (128 x BN), taking the block's tiles
//!        in turn; without, all work on every tile: 64 rows each (BM = 64 x `CONSUMERS`), or, two of them, half the
//!        columns each (BM = 64).
template <int BM_, int BN_, int STAGES, int CLUSTER_M, int CLUSTER_N, int GROUP_M, bool PING_PONG, int CONSUMERS = 2>
struct Config {
    static constexpr int consumers = CONSUMERS;
    //! setmaxnreg: the producer's registers a thread and the consumers', within 65536 a block (multiples of 8).
    static constexpr int producer_registers = 40;
    static constexpr int consumer_registers = (65536 / 128 - producer_registers) / CONSUMERS / 8 * 8;  // 232, 152
    static constexpr bool ping_pong = PING_PONG;
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int stages = STAGES;
    static constexpr int cluster_m = CLUSTER_M;
    static constexpr int cluster_n = CLUSTER_N;
    static constexpr int cluster = CLUSTER_M * CLUSTER_N;  // blocks of a cluster
    static constexpr int group_m = GROUP_M;
    static constexpr int threads = (CONSUMERS + 1) * 128;  // the consumers and one producer warpgroup
    //! A consumer's part of a tile: all of it (ping-pong), its 64 rows (BM = 128), or half its columns (BM = 64).
    static constexpr int consumer_m = PING_PONG ? BM : WGM;
    static constexpr int consumer_n = !PING_PONG && BM == WGM ? BN / 2 : BN;
    static constexpr int stage_elems = (BM + BN) * BK;
    static constexpr unsigned stage_bytes = stage_elems * sizeof(bf16);
    //! Arrivals that free a stage: each warp of the consumers that read it, in every block of the cluster.
    static constexpr unsigned stage_readers = (PING_PONG ? 1 : consumers) * 4 * cluster;
    //! A consumer writes its part 64 rows at a time through shared memory, in boxes that the TMA stores. Ping-pong:
    //! a round of all its columns in boxes of 16 (so that any multiple of 16 leaves in whole boxes), in a staging
    //! area the two consumers take in turn (their epilogues do not overlap), which leaves room for a fifth stage.
    //! Cooperative: step 9's rounds of one box of 64 columns (the widest the 128-byte swizzle takes), in two
    //! staging boxes of each consumer's own that take turns, so that the threads fill one while the TMA still reads
    //! the other (three consumers keep one each, which leaves room for a fourth stage of their 192 x 192 tiles);
    //! parts of columns that are no multiple of 64 leave in one round of boxes of 16.
    static constexpr int box_cols = PING_PONG || consumer_n % 64 != 0 ? 16 : 64;
    static constexpr int round_cols = box_cols == 16 ? consumer_n : 64;
    static constexpr int out_buffers = consumer_n / round_cols < 2 || CONSUMERS > 2 ? 1 : 2;
    static constexpr int out_elems = (PING_PONG ? 1 : consumers) * out_buffers * WGM * round_cols;
    //! The stages, the staging areas of C, and 1 KiB to align them (the swizzle repeats every 1024 bytes).
    static constexpr std::size_t smem_bytes =
        (static_cast<std::size_t>(STAGES) * stage_elems + out_elems) * sizeof(bf16) + 1024;
    static_assert(CONSUMERS <= max_consumers, "a named barrier for each consumer");
    static_assert(PING_PONG ? BM == 2 * WGM && BN <= 192 && CONSUMERS == 2
                            : BM == CONSUMERS * WGM ? CONSUMERS == 2 || (CONSUMERS == 3 && BN <= 192)
                                                    : BM == WGM && CONSUMERS == 2,
                  "ping-pong: 128 x BN a consumer, BN accumulators a thread in its 232 registers; cooperative: 64 "
                  "rows a consumer (three: BN / 2 accumulators in 152), or two halves of 64 x BN");
    static_assert(consumer_n == 32 || consumer_n == 48 || consumer_n == 64 || consumer_n == 128 || consumer_n == 144 ||
                      consumer_n == 176 || consumer_n == 192 || consumer_n == 256,
                  "wgmma_64xNx16 exists for these");
    static_assert(consumer_n % round_cols == 0 && round_cols % box_cols == 0, "C leaves in whole boxes");
    static_assert(BN / CLUSTER_M <= 256 && BM / CLUSTER_N <= 256, "TMA boxes of at most 256 rows");
    static_assert(stage_bytes % 1024 == 0 && (BM * BK * sizeof(bf16)) % 1024 == 0, "stages on whole swizzle atoms");
    static_assert(cluster >= 1 && cluster <= 2 && GROUP_M >= 1, "clusters of one or two blocks");
    static_assert((BN / CLUSTER_M) % 8 == 0 && (BM / CLUSTER_N) % 8 == 0, "halves of whole 8-row swizzle atoms");
    static_assert(smem_bytes <= 227 * 1024, "the stages fit in a block's shared memory");
};

//! @brief Whether `p` is a multiple of `bytes` (cudaMalloc's buffers are 256-byte aligned).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

//! @brief The tiles of `tile` that cover `count`, without the int overflow of `count + tile - 1` near INT_MAX.
__host__ __device__ constexpr int tiles_of(int count, int tile) { return count / tile + (count % tile != 0); }

//! @brief The longest K the launcher takes: its rows, padded to a multiple of 8 where they are copied, must count
//!        in an int.
constexpr int max_k = 2147483647 - 7;

//! @brief The largest M and N the launcher takes: the kernel counts the rows and columns of A, B and C in an int, up
//!        to two tiles past C's last (the schedule's last cluster place may lie past C), which this keeps below
//!        INT_MAX.
constexpr int max_mn = 2147483647 - 1023;

//! @brief The kernel counts its clusters' places in C's tiles, and steps through them by the grid's clusters, in an
//!        int: the launcher takes a C of fewer 64 x 64 tiles than this, whatever its configuration (none has more
//!        places than C has 64 x 64 tiles), which is any C a GPU's memory holds.
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

//! @brief Waits until the 128 threads of consumer warpgroup `consumer` got here.
__device__ __forceinline__ void warpgroup_sync(int consumer)
{
    asm volatile("bar.sync %0, 128;\n" ::"r"(warpgroup_barrier + consumer) : "memory");
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

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 32 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[16], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 48 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[24], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %26, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23"
        "}, %24, %25, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 64 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[32], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 128 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 144 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[72], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %74, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71"
        "}, %72, %73, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 176 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[88], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %90, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87"
        "}, %88, %89, p, 1, 1, 0, 0;\n}\n"
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
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 192 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[96], std::uint64_t desc_a, std::uint64_t desc_b,
                                              int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
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
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

//! @brief d = A B + (accumulate ? d : 0) for a 64 x 256 x 16 slice: A and B in shared memory, d in registers.
__device__ __forceinline__ void wgmma_64xNx16(float (&d)[128], std::uint64_t desc_a, std::uint64_t desc_b,
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
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
          "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
          "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
          "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
          "+f"(d[126]), "+f"(d[127])
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

//! @brief Rounds a warpgroup's 64 x BN accumulators to bf16 and writes those inside C (M x N): for each 8 columns, a
//!        thread holds two adjacent ones of row `16 * warp + lane / 4` and of the row 8 below. `pairs`: N is even
//!        and C 4-byte aligned, so that two adjacent elements go in one store.
template <int BN>
__device__ __forceinline__ void store_warpgroup_tile(const float (&d)[BN / 2], bf16* C, int M, int N, int row0,
                                                     int col0, int thread_in_group, bool pairs)
{
    const int row = row0 + (thread_in_group / 32) * 16 + (thread_in_group % 32) / 4;
    const int col = col0 + (thread_in_group % 4) * 2;
    bf16* c = C + static_cast<std::size_t>(row) * N + col;
    if (pairs && row0 <= M - WGM && col0 <= N - BN) {  // the whole tile is inside C: no checks (and no overflow)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            *reinterpret_cast<__nv_bfloat162*>(c + j * 8) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
            *reinterpret_cast<__nv_bfloat162*>(c + 8 * static_cast<std::size_t>(N) + j * 8) =
                __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // (row, col), (row, col + 1), (row + 8, col), (row + 8, col + 1)
            if ((e / 2) * 8 < M - row && j * 8 + e % 2 < N - col) {  // differences: no overflow near INT_MAX
                c[(e / 2) * 8 * static_cast<std::size_t>(N) + j * 8 + e % 2] = __float2bfloat16_rn(d[4 * j + e]);
            }
        }
    }
}


//! @brief Stores `value` at `address` of the shared window.
__device__ __forceinline__ void store_shared(unsigned address, unsigned value)
{
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(value) : "memory");
}

//! @brief Writes `columns` columns of a warpgroup's 64 x N accumulators, from `first_col` on, as bf16 into `out`:
//!        boxes of 64 rows x `box_cols` columns one after the other, each swizzled as the TMA store reads it (rows of
//!        2 `box_cols` bytes, the 128-byte swizzle for 64 columns, the 32-byte one for 16: the 16-byte chunk c of row
//!        r at chunk c ^ (r * rows' bytes / 128 % chunks a row), so that a warp's 8 rows of one chunk land in distinct
//!        banks). 32-bit addresses, each a constant away from a few bases, so that none stays in a register across
//!        the k-loop.
template <int columns, int box_cols, int N>
__device__ __forceinline__ void stage_rows(const float (&d)[N / 2], int first_col, bf16* out, int thread_in_group)
{
    constexpr int row_bytes = box_cols * sizeof(bf16), chunks = box_cols / 8;
    const int row = (thread_in_group / 32) * 16 + (thread_in_group % 32) / 4;  // and row + 8: the same swizzle
    const unsigned base = smem_address(out) + row * row_bytes + (thread_in_group % 4) * 4;
    const unsigned swizzle = row * row_bytes / 128 % chunks;
#pragma unroll
    for (int c = 0; c < columns / 8; ++c) {  // the round's 8-column chunk: box c / chunks, its chunk c % chunks
        const int j = first_col / 8 + c;     // the accumulators' 8-column chunk
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const __nv_bfloat162 pair = __floats2bfloat162_rn(d[4 * j + 2 * half], d[4 * j + 2 * half + 1]);
            unsigned bits = 0;
            memcpy(&bits, &pair, sizeof bits);
            store_shared(base + (c / chunks) * (WGM * row_bytes) + ((c % chunks) ^ swizzle) * 16 + half * 8 * row_bytes,
                         bits);
        }
    }
}

//! @brief Where a loader's or a consumer's next k-tile is in the ring of stages, and the parity of that stage's
//!        phase.
struct RingPosition {
    int stage = 0;
    unsigned phase = 0;

    __device__ void advance(int stages)
    {
        if (++stage == stages) {
            stage = 0;
            phase ^= 1;
        }
    }
    //! @brief Moves past `count` k-tiles (a tile of the other consumer) without an int that counts them all.
    __device__ void skip(int count, int stages)
    {
        stage += count % stages;
        phase ^= static_cast<unsigned>(count / stages) & 1;
        if (stage >= stages) {
            stage -= stages;
            phase ^= 1;
        }
    }
};

//! @brief Waits at named barrier `id` until the 128 threads of the other consumer arrived there (turn_arrive()).
__device__ __forceinline__ void turn_wait(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }

//! @brief Lets the other consumer, waiting at named barrier `id`, go on.
__device__ __forceinline__ void turn_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

//! @brief The tiles of C, and the order in which the clusters visit them.
struct TileSchedule {
    int cluster_rows, cluster_cols;  // clusters of cluster_m x cluster_n tiles over C's tiles
    int cluster_m, cluster_n, group_m;

    __device__ int cluster_tiles() const { return cluster_rows * cluster_cols; }

    //! @brief The tile (m, n) that block `rank` of a cluster computes at the cluster's `index`-th place: groups of
    //!        `group_m` cluster rows, visited column by column within a group.
    __device__ void tile(int index, unsigned rank, int& m, int& n) const
    {
        const int per_group = group_m * cluster_cols;
        const int first_row = index / per_group * group_m;
        const int rows = min(cluster_rows - first_row, group_m);
        const int in_group = index % per_group;
        m = (first_row + in_group % rows) * cluster_m + static_cast<int>(rank) % cluster_m;
        n = in_group / rows * cluster_n + static_cast<int>(rank) / cluster_m;
    }
};


//! @brief Computes the tiles the schedule gives this block's cluster (empty where the code is not built for sm_90a).
template <class Cfg>
static __global__ void __launch_bounds__(Cfg::threads, 1)
    gemm_kernel(int M, int N, int K, const __grid_constant__ CUtensorMap map_a_part,
                const __grid_constant__ CUtensorMap map_b_part, const __grid_constant__ CUtensorMap map_c,
                bf16* __restrict__ C, bool tma_stores, bool pairs)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BM = Cfg::BM, BN = Cfg::BN, stages = Cfg::stages, cluster = Cfg::cluster;
    constexpr int CM = Cfg::consumer_m, CN = Cfg::consumer_n;
    extern __shared__ unsigned char smem_raw[];
    bf16* smem = reinterpret_cast<bf16*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    __shared__ std::uint64_t full[stages];   // a stage's tiles have landed
    __shared__ std::uint64_t empty[stages];  // the consumers that read a stage, in every block of the cluster, are done
    const int t = threadIdx.x;
    const int group = t / 128;  // 0: the producer; 1 on: the consumers
    const unsigned rank = cluster_rank();
    const int k_tiles = tiles_of(K, BK);
    const TileSchedule schedule{tiles_of(tiles_of(M, BM), Cfg::cluster_m), tiles_of(tiles_of(N, BN), Cfg::cluster_n),
                                Cfg::cluster_m, Cfg::cluster_n, Cfg::group_m};
    const int clusters = static_cast<int>(gridDim.x) / cluster;
    const int first_index = static_cast<int>(blockIdx.x) / cluster;  // this cluster's first place in the schedule

    // Starts the copies of k-tile `kt` of tile (m, n) into `stage`: what this block loads for itself alone (`own`),
    // and its half of the tile its cluster's two blocks share (`shared`), multicast to both.
    const auto load = [&](int stage, int kt, int m, int n, bool own, bool shared) {
        bf16* As = smem + stage * Cfg::stage_elems;
        bf16* Bs = As + BM * BK;
        constexpr std::uint16_t both = 0b11;
        if (Cfg::cluster_n == 1 && own) {
            tma_load(As, &map_a_part, kt * BK, m * BM, &full[stage]);
        } else if (Cfg::cluster_n == 2 && shared) {  // the two blocks' tiles share A's
            tma_load_multicast(As + rank * (BM / 2) * BK, &map_a_part, kt * BK, m * BM + rank * (BM / 2),
                               &full[stage], both);
        }
        if (Cfg::cluster_m == 1 && own) {
            tma_load(Bs, &map_b_part, kt * BK, n * BN, &full[stage]);
        } else if (Cfg::cluster_m == 2 && shared) {  // the two blocks' tiles share B's
            tma_load_multicast(Bs + rank * (BN / 2) * BK, &map_b_part, kt * BK, n * BN + rank * (BN / 2),
                               &full[stage], both);
        }
    };
    if (t == 0) {
        prefetch_tensor_map(&map_a_part);  // fetched while the barriers are set up
        prefetch_tensor_map(&map_b_part);
        if (tma_stores) {
            prefetch_tensor_map(&map_c);
        }
        for (int s = 0; s < stages; ++s) {
            mbarrier_init(&full[s], 1);
            mbarrier_init(&empty[s], Cfg::stage_readers);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the cluster and the TMA
        fence_proxy_async();  // and to this block's TMA now, before the cluster barrier
    }
    // No block multicasts into, or arrives on, a barrier not yet set up: arrive now, and wait after the registers
    // changed hands, so that the two overlap.
    cluster_arrive_relaxed();

    if (group == 0) {
        setmaxnreg_dec<Cfg::producer_registers>();
        // Two threads of different warps load, so that neither waits for the other: thread 0 the tiles this block
        // loads alone (it also announces each stage's bytes), thread 32 the halves the cluster's two blocks share.
        const bool own_loader = t == 0;
        const bool shared_loader = t == 32 && cluster > 1;
        int m = 0, n = 0;
        if (own_loader || shared_loader) {
            schedule.tile(first_index, rank, m, n);  // before the wait
        }
        cluster_wait();
        if (own_loader || shared_loader) {
            RingPosition ring;
            for (int index = first_index; index < schedule.cluster_tiles(); index += clusters) {
                if (index != first_index) {
                    schedule.tile(index, rank, m, n);
                }
                for (int kt = 0; kt < k_tiles; ++kt) {
                    const int stage = ring.stage;
                    mbarrier_wait(&empty[stage], ring.phase ^ 1);  // first pass: completes at once
                    if (own_loader) {
                        mbarrier_arrive_expect_bytes(&full[stage], Cfg::stage_bytes);
                    }
                    load(stage, kt, m, n, own_loader, shared_loader);
                    ring.advance(stages);
                }
            }
            // Before the block leaves, every consumer of the cluster must be done with every stage this block filled:
            // then no multicast into, or arrival on, this block's shared memory is still on its way.
            if (own_loader) {
                for (int tail = 0; tail < stages; ++tail) {
                    mbarrier_wait(&empty[ring.stage], ring.phase ^ 1);
                    ring.advance(stages);
                }
            }
        }
    } else {
        setmaxnreg_inc<Cfg::consumer_registers>();
        cluster_wait();
        const int consumer = group - 1;
        const auto release = [&](int stage) {  // every block of the cluster writes this stage: lane c tells block c
            if (t % 32 < cluster) {
                mbarrier_arrive_cluster(&empty[stage], t % 32);
            }
        };
        // This consumer's part of a stage, as wgmma descriptors' offsets (16-byte units; the descriptor of a tile's
        // start plus the offset is the descriptor of the slice there): its rows of A, its rows of B.
        const int row_offset = Cfg::ping_pong || BM == WGM ? 0 : consumer * WGM;  // 0, 64, 128 (cooperative)
        const int col_offset = consumer * (BN - CN);                                // 0, or BN / 2 (columns split)
        const unsigned a_offset = row_offset * BK * sizeof(bf16) / 16;
        const unsigned b_offset = col_offset * BK * sizeof(bf16) / 16;
        // Ping-pong: this consumer takes every second tile of the block, starting with tile `consumer`. It waits for
        // its turns (to run a k-loop, to use the staging area) at its own barrier of each pair, and gives the other
        // consumer its turns at the other's.
        const int my_turn = k_loop_turn_barrier + consumer, other_turn = k_loop_turn_barrier + 1 - consumer;
        const int my_staging = staging_turn_barrier + consumer, other_staging = staging_turn_barrier + 1 - consumer;
        const int tile_step = Cfg::ping_pong ? 2 * clusters : clusters;
        constexpr int staging_elems = Cfg::out_buffers * WGM * Cfg::round_cols;
        bf16* out = smem + stages * Cfg::stage_elems + (Cfg::ping_pong ? 0 : consumer * staging_elems);
        const bool issuer = t % 128 == 0;
        bool stored = false;  // this consumer has started stores that may still read its staging area
        float acc[CM / WGM][CN / 2] = {};
        RingPosition ring;
        if (Cfg::ping_pong && consumer == 1) {
            ring.skip(k_tiles, stages);  // the block's first tile is the other consumer's
        }
        for (int index = first_index + (Cfg::ping_pong ? consumer * clusters : 0); index < schedule.cluster_tiles();
             index += tile_step) {
            int m = 0, n = 0;
            schedule.tile(index, rank, m, n);
            asm volatile("" : "+r"(m), "+r"(n));  // computed now, not where the epilogue first needs them
            if (Cfg::ping_pong && index != first_index) {
                turn_wait(my_turn);  // the other consumer has issued its tile's k-loop
            }
            int previous = 0;
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int stage = ring.stage;
                mbarrier_wait(&full[stage], ring.phase);
                ring.advance(stages);
                const std::uint64_t desc_a = smem_descriptor(smem + stage * Cfg::stage_elems) + a_offset;
                const std::uint64_t desc_b = smem_descriptor(smem + stage * Cfg::stage_elems + BM * BK) + b_offset;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {  // the tile's first slice overwrites the accumulators
#pragma unroll
                    for (int h = 0; h < CM / WGM; ++h) {  // 16 columns of K are 2 units; 64 rows of A 512
                        wgmma_64xNx16(acc[h], desc_a + h * 512 + kk * 2, desc_b + kk * 2, kt > 0 || kk > 0);
                    }
                }
                wgmma_commit();
                // The previous k-tile's group is done (this one keeps the tensor cores busy): release its stage.
                wgmma_wait<1>();
                if (kt > 0) {
                    release(previous);
                }
                previous = stage;
            }
            const bool other_has_next = Cfg::ping_pong && index + clusters < schedule.cluster_tiles();
            if (other_has_next) {
                turn_arrive(other_turn);  // the k-loop is issued: the other consumer's tile may start
            }
            wgmma_wait<0>();
#pragma unroll
            for (int h = 0; h < CM / WGM; ++h) {
                fence_accumulators(acc[h]);
            }
            release(previous);
            if (Cfg::ping_pong) {
                ring.skip(k_tiles, stages);  // the other consumer's next tile
            }
            if (Cfg::ping_pong && tma_stores && index != first_index) {
                turn_wait(my_staging);  // the other consumer's last stores have read the staging area
            }
#pragma unroll
            for (int h = 0; h < CM / WGM; ++h) {
                const int row0 = m * BM + row_offset + h * WGM, col0 = n * BN + col_offset;
                if (!tma_stores) {  // C's rows are not a multiple of 16 bytes apart, or C is not 16-byte aligned
                    store_warpgroup_tile<CN>(acc[h], C, M, N, row0, col0, t % 128, pairs);
                    continue;
                }
#pragma unroll
                for (int round = 0; round < CN / Cfg::round_cols; ++round) {
                    bf16* box = out + round % Cfg::out_buffers * WGM * Cfg::round_cols;
                    if (issuer && stored) {
                        bulk_wait_read<Cfg::out_buffers - 1>();  // the stores that last read `box` are done reading
                    }
                    warpgroup_sync(consumer);
                    stage_rows<Cfg::round_cols, Cfg::box_cols, CN>(acc[h], round * Cfg::round_cols, box, t % 128);
                    fence_proxy_async();
                    warpgroup_sync(consumer);
                    if (issuer) {
                        for (int b = 0; b < Cfg::round_cols / Cfg::box_cols; ++b) {
                            tma_store(&map_c, col0 + round * Cfg::round_cols + b * Cfg::box_cols, row0,
                                      box + b * WGM * Cfg::box_cols);
                        }
                        bulk_commit();
                    }
                    stored = true;
                }
            }
            if (Cfg::ping_pong && tma_stores && other_has_next) {
                if (issuer) {
                    bulk_wait_read<0>();
                }
                warpgroup_sync(consumer);
                turn_arrive(other_staging);  // this tile's stores have read the staging area
            }
        }
        if (issuer) {
            bulk_wait_read<0>();  // the last stores have read the staging area before the block's memory goes
        }
    }
#endif
}

//! @brief Copies the `rows` x K matrix `src` (any alignment) into `dst`, rows of `K_padded` (a multiple of 8)
//!        elements, zero beyond K.
static __global__ void pad_rows_kernel(const bf16* __restrict__ src, bf16* __restrict__ dst, int rows, int K,
                                       int K_padded)
{
    const std::size_t vectors = static_cast<std::size_t>(rows) * (K_padded / 8);
    for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vectors;
         v += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t row = v / (K_padded / 8);
        const int k0 = static_cast<int>(v % (K_padded / 8)) * 8;
        __align__(16) bf16 out[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            out[e] = k0 + e < K ? src[row * K + k0 + e] : __float2bfloat16_rn(0.0f);
        }
        *reinterpret_cast<uint4*>(&dst[row * K_padded + k0]) = *reinterpret_cast<const uint4*>(out);
    }
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

//! @brief Describes a `rows` x K bf16 matrix stored K-contiguous (rows `ld` elements apart) to the TMA: boxes of
//!        BK x `box_rows`, 128-byte swizzle, elements outside the matrix read as zero.
inline bool encode_k_major(CUtensorMap* map, const bf16* base, int rows, int K, int ld, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
    const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(ld) * sizeof(bf16)};
    const cuuint32_t box[2] = {BK, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, row_stride, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

//! @brief Describes the M x N row-major C to the TMA for stores of boxes of `box_cols` (16 or 64) columns x
//!        `box_rows`, swizzled over the boxes' rows (32 or 128 bytes).
inline bool encode_c(CUtensorMap* map, bf16* base, int M, int N, int box_cols, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(N), static_cast<cuuint64_t>(M)};
    const cuuint64_t row_stride[1] = {static_cast<cuuint64_t>(N) * sizeof(bf16)};
    const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, row_stride, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE,
                  box_cols == 16 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

//! @brief The launch of `grid` blocks of `Cfg` on `stream` in clusters of `Cfg::cluster` consecutive blocks (set at
//!        launch: clusters exist from sm_90 on only); `cluster` holds the attribute the configuration points to.
template <class Cfg>
cudaLaunchConfig_t launch_config(int grid, cudaStream_t stream, cudaLaunchAttribute& cluster)
{
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = Cfg::cluster;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid);
    config.blockDim = dim3(Cfg::threads);
    config.dynamicSmemBytes = Cfg::smem_bytes;
    config.stream = stream;
    config.attrs = &cluster;
    config.numAttrs = 1;
    return config;
}

//! @brief How many clusters of this configuration run on the current device at once (0 on an error), asked of the
//!        runtime once per device and configuration.
template <class Cfg>
static int resident_clusters(int device)
{
    constexpr int max_devices = 64;
    static std::atomic<int> known[max_devices];  // 0: not asked yet
    if (device >= 0 && device < max_devices && known[device].load() > 0) {
        return known[device].load();
    }
    cudaLaunchAttribute cluster{};
    cudaLaunchConfig_t config = launch_config<Cfg>(Cfg::cluster, 0, cluster);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, gemm_kernel<Cfg>, &config) != cudaSuccess) {
        return 0;
    }
    if (device >= 0 && device < max_devices) {
        known[device].store(clusters);
    }
    return clusters;
}

constexpr int max_pool_devices = 64;  //!< devices the copies' pools are kept for

//! @brief Each device's pool of the copies of A and B (nullptr: none yet).
inline std::atomic<cudaMemPool_t> (&copy_pools())[max_pool_devices]
{
    static std::atomic<cudaMemPool_t> pools[max_pool_devices];
    return pools;
}

//! @brief The memory pool of the copies of A and B on `device`: a pool of this file's own that keeps what it has
//!        allocated (no release threshold), so that a call reuses the last call's memory instead of mapping new pages
//!        (the default pool gives them back at every synchronization). Made on first use, once per device.
static cudaError_t copy_pool(int device, cudaMemPool_t& pool)
{
    std::atomic<cudaMemPool_t>(&pools)[max_pool_devices] = copy_pools();
    if (device < 0 || device >= max_pool_devices) {
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

//! @brief Gives back the memory that the copies of unaligned A and B keep on every device (see gemm()), for a program
//!        that wants it back before it ends. A call still running keeps what it uses until it is done; a later call
//!        makes a new pool.
//! @return the first error of destroying a pool, else `cudaSuccess`
inline cudaError_t release_copy_pools()
{
    cudaError_t first = cudaSuccess;
    for (std::atomic<cudaMemPool_t>& slot : copy_pools()) {
        if (cudaMemPool_t pool = slot.exchange(nullptr); pool != nullptr) {
            const cudaError_t error = cudaMemPoolDestroy(pool);
            first = first != cudaSuccess ? first : error;
        }
    }
    return first;
}

//! @brief The signature of gemm() and of gemm_with<Cfg>().
using GemmLauncher = cudaError_t (*)(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                                     cudaStream_t stream);

//! @brief C = A B with the configuration `Cfg` (see gemm() for the arguments and what it returns).
template <class Cfg>
inline cudaError_t gemm_with(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, cudaStream_t stream = 0)
{
    if (M <= 0 || N <= 0 || M > max_mn || N > max_mn || K <= 0 || K > max_k || d_A == nullptr || d_B == nullptr ||
        d_C == nullptr || !aligned(d_A, alignof(bf16)) || !aligned(d_B, alignof(bf16)) || !aligned(d_C, alignof(bf16))) {
        return cudaErrorInvalidValue;
    }
    if (static_cast<long long>(tiles_of(M, WGM)) * tiles_of(N, WGM) >= max_cluster_tiles) {  // one limit for all
        return cudaErrorInvalidValue;
    }
    const long long cluster_tiles = static_cast<long long>(tiles_of(tiles_of(M, Cfg::BM), Cfg::cluster_m)) *
                                    tiles_of(tiles_of(N, Cfg::BN), Cfg::cluster_n);
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess) {
        return error;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    // Above 48 KiB a kernel must opt in to dynamic shared memory. Not cached in a static: a kernel included in
    // several translation units is a different kernel in each.
    error = cudaFuncSetAttribute(gemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(Cfg::smem_bytes));
    if (error != cudaSuccess) {
        return error;
    }
    const int clusters = resident_clusters<Cfg>(device);
    if (clusters <= 0) {
        return cudaErrorNotSupported;  // this configuration's cluster does not fit on the device
    }
    // The TMA wants rows of a multiple of 16 bytes starting 16-byte aligned; else copy A and B into padded rows.
    const bool copy = K % 8 != 0 || !aligned(d_A, 16) || !aligned(d_B, 16);
    const int ld = tiles_of(K, 8) * 8;
    const bf16* A = d_A;
    const bf16* B = d_B;
    bf16* padded = nullptr;
    if (copy) {
        const std::size_t a_elems = static_cast<std::size_t>(M) * ld;
        cudaMemPool_t pool = nullptr;
        error = copy_pool(device, pool);
        if (error == cudaSuccess) {
            error = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&padded),
                                            (a_elems + static_cast<std::size_t>(N) * ld) * sizeof(bf16), pool, stream);
        }
        if (error != cudaSuccess) {
            return error;
        }
        pad_rows_kernel<<<1024, 256, 0, stream>>>(d_A, padded, M, K, ld);
        pad_rows_kernel<<<1024, 256, 0, stream>>>(d_B, padded + a_elems, N, K, ld);
        A = padded;
        B = padded + a_elems;
    }
    CUtensorMap map_a_part{};
    CUtensorMap map_b_part{};
    CUtensorMap map_c{};
    // The TMA stores C where its rows are a multiple of 16 bytes apart and C is 16-byte aligned; else the threads do.
    const bool tma_stores = N % 8 == 0 && aligned(d_C, 16);
    if (!encode_k_major(&map_a_part, A, M, K, ld, Cfg::BM / Cfg::cluster_n) ||
        !encode_k_major(&map_b_part, B, N, K, ld, Cfg::BN / Cfg::cluster_m) ||
        (tma_stores && !encode_c(&map_c, d_C, M, N, Cfg::box_cols, WGM))) {
        error = cudaErrorNotSupported;
    } else {
        const int grid = static_cast<int>(std::min<long long>(cluster_tiles, clusters)) * Cfg::cluster;
        const bool pairs = N % 2 == 0 && aligned(d_C, 4);
        cudaLaunchAttribute cluster{};
        const cudaLaunchConfig_t config = launch_config<Cfg>(grid, stream, cluster);
        error = cudaLaunchKernelEx(&config, gemm_kernel<Cfg>, M, N, K, map_a_part, map_b_part, map_c, d_C,
                                   tma_stores, pairs);
        if (error == cudaSuccess) {
            error = cudaGetLastError();
        }
    }
    if (copy) {
        const cudaError_t freed = cudaFreeAsync(padded, stream);
        error = error != cudaSuccess ? error : freed;
    }
    return error;
}

//! The configurations the launcher chooses from (bench/tensor_core_gemm/tensor_core_gemm_autotune.cu times these
//! and others). Large problems: ping-pong with 128 x 176 or 128 x 192 tiles, step 9's cooperative 128 x 256, or
//! three consumers of a 192 x 192 tile where that takes few rounds;
//! problems of a few tiles an SM or less: any of them, or cooperative 128 x 128 or 128 x 144, or 64 x 128, 64 x 96 or
//! 64 x 64 with the columns split. The widths between the powers of two let one round of tiles fill more of the GPU
//! (1536^3: 132 tiles of 128 x 144 on 132 SMs; 768^3: 96 of 64 x 96).
using PingPong176 = Config<128, 176, 5, 2, 1, 8, true>;
using PingPong192 = Config<128, 192, 5, 2, 1, 8, true>;
using Cooperative256 = Config<128, 256, 4, 2, 1, 8, false>;
using Cooperative128 = Config<128, 128, 6, 2, 1, 8, false>;
using SplitColumns128 = Config<64, 128, 8, 2, 1, 8, false>;
using SplitColumns64 = Config<64, 64, 8, 1, 1, 8, false>;
using SplitColumns96 = Config<64, 96, 8, 2, 1, 8, false>;
using Cooperative144 = Config<128, 144, 5, 2, 1, 8, false>;
using ThreeConsumers192 = Config<192, 192, 4, 2, 1, 8, false, 3>;

//! @brief A configuration's tile and cluster, as the launcher's choice needs them (no GPU needed).
struct TileShape {
    int bm, bn, cluster_m, cluster_n;
};

//! @brief A configuration the launcher chooses from: its name, its tile and cluster, and its launcher.
struct Configuration {
    const char* name;
    TileShape shape;
    GemmLauncher gemm;
};

//! @brief `Cfg` under `name`, as the launcher chooses among configurations.
template <class Cfg>
constexpr Configuration configuration_of(const char* name)
{
    return {name, {Cfg::BM, Cfg::BN, Cfg::cluster_m, Cfg::cluster_n}, gemm_with<Cfg>};
}

//! The configurations by name. Large problems: each consumer's epilogue hidden behind the other's k-loop, or the
//! widest tile, or the three consumers' tile where it covers C in few rounds. Problems of a few tiles an SM or less:
//! any of these, or smaller tiles.
constexpr Configuration ping_pong_176 = configuration_of<PingPong176>("PingPong176");
constexpr Configuration ping_pong_192 = configuration_of<PingPong192>("PingPong192");
constexpr Configuration cooperative_256 = configuration_of<Cooperative256>("Cooperative256");
constexpr Configuration cooperative_128 = configuration_of<Cooperative128>("Cooperative128");
constexpr Configuration split_columns_128 = configuration_of<SplitColumns128>("SplitColumns128");
constexpr Configuration split_columns_64 = configuration_of<SplitColumns64>("SplitColumns64");
constexpr Configuration split_columns_96 = configuration_of<SplitColumns96>("SplitColumns96");
constexpr Configuration cooperative_144 = configuration_of<Cooperative144>("Cooperative144");
constexpr Configuration three_consumers_192 = configuration_of<ThreeConsumers192>("ThreeConsumers192");
//! @brief The two-consumer configurations of large problems, in the order that breaks ties.
constexpr Configuration large_problem_configurations[] = {ping_pong_176, ping_pong_192, cooperative_256};
//! @brief The configurations of small problems, in the order that breaks ties.
constexpr Configuration small_problem_configurations[] = {
    ping_pong_176,    ping_pong_192,    cooperative_256,  cooperative_128,    split_columns_128,
    split_columns_64, split_columns_96, cooperative_144,  three_consumers_192};

//! @brief The rounds of tiles of the configuration `shape` for an M x N C on `sm_count` SMs: each cluster of the
//!        persistent grid (one block an SM) computes ceil(places / clusters) places one after the other.
inline long long rounds_of(TileShape shape, int M, int N, int sm_count)
{
    const long long places = static_cast<long long>(tiles_of(tiles_of(M, shape.bm), shape.cluster_m)) *
                             tiles_of(tiles_of(N, shape.bn), shape.cluster_n);
    const long long clusters = std::max(1, sm_count / (shape.cluster_m * shape.cluster_n));
    return (places + clusters - 1) / clusters;
}

//! @brief The time of the configuration `shape` for an M x N C on `sm_count` SMs, in units of a 128 x 1 strip of
//!        tiles: its rounds, each taking time in proportion to its tile's area.
inline long long makespan(TileShape shape, int M, int N, int sm_count)
{
    return rounds_of(shape, M, N, sm_count) * shape.bm * shape.bn / 128;
}

//! @brief The cycles an SM spends on one k-tile of `shape` (in eighths) where every SM loads at once: the slower of
//!        its loads, about 2.4 cycles a 128-byte row of A and B (the L2 fed a 64 x 128 tile's k-tile in about 450
//!        cycles at 1024^3), and its product, 64 x 64 x 64 in 128 cycles on the tensor cores.
constexpr long long k_tile_cost(TileShape shape)
{
    return std::max(19LL * (shape.bm + shape.bn), 1LL * shape.bm * shape.bn / 4);
}

//! @brief The first of `candidates` of least `cost(shape)`.
template <int count, class Cost>
inline const Configuration& cheapest_of(const Configuration (&candidates)[count], Cost cost)
{
    const Configuration* best = &candidates[0];
    long long best_cost = cost(best->shape);
    for (const Configuration& candidate : candidates) {
        const long long candidate_cost = cost(candidate.shape);
        if (candidate_cost < best_cost) {
            best = &candidate;
            best_cost = candidate_cost;
        }
    }
    return *best;
}

//! @brief The most rounds of the three consumers' 192 x 192 tiles the launcher runs: each round ends in an epilogue
//!        that no other consumer hides, and over more rounds the ping-pong tiles were as fast or faster.
constexpr long long three_consumer_rounds = 4;

//! @brief The configuration gemm() runs for this shape on a GPU of `sm_count` SMs. Where 128 x 256 tiles give at
//!        least 90% of the SMs one, the large configuration whose waves cost least (ping-pong first on a tie, as it
//!        hides the epilogue), or the three consumers' 192 x 192 tile where its waves cost no more in at most
//!        `three_consumer_rounds` rounds (3072^3: two rounds of it, three of 128 x 192, the same area; it loads a
//!        fifth less per product and ends fewer rounds). Else, where the rounds are few and the loads set their
//!        pace, the configuration of least rounds x k_tile_cost(): one round of larger tiles rather than two of
//!        smaller ones (1024^3: 64 x 128 once, not 64 x 64 twice), and of two tiles that take one round the smaller
//!        (768^3: 64 x 96, not 64 x 128; 1536^3: 128 x 144, not 128 x 176).
inline const Configuration& chosen_configuration(int M, int N, int sm_count)
{
    const TileShape widest = cooperative_256.shape;
    if (10LL * tiles_of(M, widest.bm) * tiles_of(N, widest.bn) >= 9LL * sm_count) {
        const auto waves = [&](TileShape shape) { return makespan(shape, M, N, sm_count); };
        const Configuration& best = cheapest_of(large_problem_configurations, waves);
        const TileShape three = three_consumers_192.shape;
        const bool few_rounds = rounds_of(three, M, N, sm_count) <= three_consumer_rounds;
        return few_rounds && waves(three) <= waves(best.shape) ? three_consumers_192 : best;
    }
    return cheapest_of(small_problem_configurations,
                       [&](TileShape shape) { return rounds_of(shape, M, N, sm_count) * k_tile_cost(shape); });
}

//! @brief C = A B in bf16 with fp32 accumulation, any shape.
//! @param[in]  M       rows of A and C
//! @param[in]  N       columns of B and C
//! @param[in]  K       columns of A, rows of B
//! @param[in]  d_A     M x K bf16, row-major (`A[m * K + k]`)
//! @param[in]  d_B     K x N bf16, column-major (`B[n * K + k]`)
//! @param[out] d_C     M x N bf16, row-major (`C[m * N + n]`)
//! @param[in]  stream  stream to launch on
//! @pre 1 <= M, N <= `max_mn` (INT_MAX - 1023), C of fewer than `max_cluster_tiles` tiles of 64 x 64 (any C a GPU's
//!      memory holds; the same limits for every configuration), 1 <= K <= `max_k`; buffers not null and 2-byte aligned;
//!      a GPU of compute capability 9.0 and this file built for it as `sm_90a`. Where K is not a multiple of 8, or A or
//!      B not 16-byte aligned, the call copies A and B into `(M + N) * ceil(K / 8) * 8` bf16 from a stream-ordered
//!      memory pool of its own, which keeps that memory for later calls (as much as the largest such call needed) until
//!      release_copy_pools() or the program's end.
//! @return `cudaErrorInvalidValue` if a precondition fails; `cudaErrorNotSupported` without sm_90a code for this GPU
//!         (or a driver without `cuTensorMapEncodeTiled`), where the configuration's cluster does not fit on the GPU,
//!         or where a tensor map of A, B or C cannot be encoded; the error of an allocation or of the shared-memory
//!         opt-in; else the launch's error
inline cudaError_t gemm(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, cudaStream_t stream = 0)
{
    int device = 0;
    int sm_count = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess) {
        error = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
    }
    if (error != cudaSuccess) {
        return error;
    }
    return chosen_configuration(M, N, sm_count).gemm(M, N, K, d_A, d_B, d_C, stream);
}

}  // namespace stepwise::tensor_core_gemm::three_consumer_tiles
