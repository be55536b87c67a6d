//! @file 09_three_consumer_groups.cuh
//! @brief Attention step 9 (beyond the sources): three consumer warpgroups at head_dim 64.
//!
//! In step 8 two consumer warpgroups take turns at the tensor cores: one's products run while the other computes its
//! softmax. At head_dim 128 a tile's two products take longer than its softmax and the tensor cores stay busy; at
//! head_dim 64 they take half as long, while the softmax has the same exponentials (8192 a tile: at 16 a cycle an SM,
//! as long as the products) and its maximum and sum besides, so the tensor cores wait for it. Here a block has three
//! consumer warpgroups at head_dim 64 (192 query rows) that take turns round a ring of named barriers: a warpgroup's
//! softmax now hides behind the products of two others. They get 160 registers a thread instead of 240, enough at
//! head_dim 64 (the next S, P and O take 128); head_dim 128 keeps two. Whether the grid is persistent is decided by
//! the sequence's length, as a block's rows now depend on head_dim.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace stepwise::attention::three_consumer_groups {

using bf16 = __nv_bfloat16;

constexpr int group_rows = 64;                   //!< wgmma's M
constexpr int key_tile = 128;                    //!< keys a tile of K and V: S is 64 x 128 a warpgroup
constexpr int producer_registers = 24;
constexpr int stages = 2;                        //!< buffers of K and V
//! The grid is persistent for sequences up to this many keys; longer ones run a block an item, which measured 2 to 4 %
//! faster in trials on an H100 at 4096 to 16384 keys (see step 8 on the page).
constexpr int persistent_max_seq = 2048;

//! @brief A block's computing warpgroups (64 query rows each) and their registers at this head_dim: three at 64, where
//!        a tile's softmax takes longer than its products, two at 128, where O's accumulators need 240 registers.
template <int HeadDim>
struct Block {
    static constexpr int consumers = HeadDim == 64 ? 3 : 2;
    static constexpr int rows = consumers * group_rows;
    static constexpr int threads = (consumers + 1) * 128;  //!< and one warpgroup that loads
    static constexpr int consumer_registers = HeadDim == 64 ? 160 : 240;
    static_assert(producer_registers * 128 + consumers * consumer_registers * 128 <= 65536, "setmaxnreg's budget");
};
constexpr int chunk = 64;                        //!< head_dim values of one 128-byte swizzled row
constexpr float log2e = 1.44269504088896340736f;

//! @brief Sizes of one problem: Q and O [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim].
struct Shape {
    int batch, heads, kv_heads, seq, head_dim;
    bool causal;  //!< query i sees keys 0..i
};

//! @brief Where the block's arrays lie in its dynamic shared memory (from a 1024-byte aligned base): the two buffers of
//!        Q, then those of K, then those of V, each as head_dim / 64 regions of 128-byte rows.
template <int HeadDim>
struct Layout {
    static constexpr int chunks = HeadDim / chunk;
    static constexpr std::size_t q_region = std::size_t{Block<HeadDim>::rows} * 128;  //!< one chunk of Q's rows
    static constexpr std::size_t kv_region = std::size_t{key_tile} * 128;   //!< one chunk of a tile's keys
    static constexpr std::size_t tile_bytes = chunks * kv_region;           //!< a tile of K (or of V)
    static constexpr std::size_t q = 0;
    static constexpr std::size_t q_bytes = chunks * q_region;               //!< a buffer of Q
    static constexpr std::size_t k = q + 2 * q_bytes;
    static constexpr std::size_t v = k + stages * tile_bytes;
    static constexpr std::size_t bytes = v + stages * tile_bytes + 1024;  //!< + the base's alignment
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
//! @brief The address of `p` in the shared window, as PTX's `.shared` instructions take it.
__device__ __forceinline__ std::uint32_t smem_address(const void* p)
{
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

//! @brief Sets up an mbarrier whose phase completes after `arrivals` arrivals (and the bytes announced to it).
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

//! @brief Arrives on `bar` and announces `bytes` that copies will complete on it.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(std::uint64_t* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_address(bar)), "r"(bytes)
                 : "memory");
}

//! @brief Waits until the phase of `bar` with this parity completed (0 for its first phase, 1 for its second, ...).
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

//! @brief Starts the TMA copy of the box at (`col`, `row`, `matrix`) of `map` into `smem_dst`; its bytes complete on
//!        `bar`.
__device__ __forceinline__ void tma_load(void* smem_dst, const CUtensorMap* map, int col, int row, int matrix,
                                         std::uint64_t* bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_address(smem_dst)),
                 "l"(map), "r"(col), "r"(row), "r"(matrix), "r"(smem_address(bar))
                 : "memory");
}

//! @brief The wgmma descriptor of 128-byte swizzled rows from `tile` (1024-byte aligned, or 32 bytes further per 16
//!        values along a row): groups of 8 rows 1024 bytes apart (the stride byte offset); `leading_bytes` apart are
//!        the regions of the next 64 values of a row, where the product reads along them (V, N-major).
__device__ __forceinline__ std::uint64_t smem_descriptor(const void* tile, unsigned leading_bytes)
{
    return ((smem_address(tile) & 0x3FFFF) >> 4)                   // start address, in 16-byte units
           | (std::uint64_t{(leading_bytes >> 4) & 0x3FFF} << 16)  // leading byte offset
           | (std::uint64_t{1024 >> 4} << 32)                      // stride byte offset: one 8-row group
           | (std::uint64_t{1} << 62);                             // 128-byte swizzle
}

//! @brief Arrives on `bar`.
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar)) : "memory");
}

//! @brief Lowers this warpgroup's registers to `count` a thread, for others to take.
template <int count>
__device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief Raises this warpgroup's registers to `count` a thread.
template <int count>
__device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(count));
}

//! @brief Orders this warpgroup's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

//! @brief Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

//! @brief Tells the compiler the accumulators change here, so that no read of them moves above a wgmma_wait().
template <int n>
__device__ __forceinline__ void fence_accumulators(float (&d)[n])
{
#pragma unroll
    for (int i = 0; i < n; ++i) {
        asm volatile("" : "+f"(d[i])::"memory");
    }
}

//! @brief Two floats as a bf16 pair (the lower column in the lower half).
__device__ __forceinline__ std::uint32_t pack(float lo, float hi)
{
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    std::uint32_t out;
    std::memcpy(&out, &v, sizeof(out));
    return out;
}

//! @brief d += A B for a 64 x 64 x 16 slice: A (bf16 pairs) in registers, B in shared memory, N-major (transposed).
__device__ __forceinline__ void wgmma_64x64x16_rs(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t desc_b)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
        "%23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1)
        : "memory");
}

//! @brief d += A B for a 64 x 128 x 16 slice: A (bf16 pairs) in registers, B in shared memory, N-major (transposed).
__device__ __forceinline__ void wgmma_64x128x16_rs(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc_b)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
        "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
        "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1)
        : "memory");
}

//! @brief d = A B (+ d where `accumulate`) for a 64 x 128 x 16 slice, A (times `ScaleA`, 1 or -1) and B in shared
//!        memory, both K-major.
template <int ScaleA>
__device__ __forceinline__ void wgmma_64x128x16_ss(float (&d)[64], std::uint64_t desc_a, std::uint64_t desc_b,
                                                  int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
        "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
        "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, %67, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(ScaleA)
        : "memory");
}

//! @brief 2^x, approximate (MUFU.EX2), subnormal results flushed to zero.
__device__ __forceinline__ float exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

//! @brief Waits until at most `pending` of this warpgroup's committed groups are running.
template <int pending>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}

//! The consumers' turns at the tensor cores pass through named barriers: barrier 0 is __syncthreads(), and
//! consumer c waits for its turn at barrier first_turn_barrier + c.
constexpr int first_turn_barrier = 1;
//! The threads at a turn's barrier: the warpgroup that waits for its turn and the one that hands it over.
constexpr int turn_barrier_threads = 2 * 128;

//! @brief Waits at named barrier `id` until `count` threads arrived or waited there.
__device__ __forceinline__ void named_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

//! @brief Arrives at named barrier `id` (of `count` threads) without waiting.
__device__ __forceinline__ void named_arrive(int id, int count)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
#endif

//! @brief What a block computes at a time: its rows of one head (of matrix `q_matrix` of Q, `kv_matrix` of K
//!        and V).
struct WorkItem {
    int q_matrix, kv_matrix, first_row;
};

//! @brief Work item `w`: the items of a head are adjacent (blocks that run together share its K and V in L2), and
//!        within a head the last rows, which see the most keys under the causal mask, come first.
__device__ __forceinline__ WorkItem work_item(long long index, const Shape& sh, int row_blocks, int block_rows)
{
    const int matrix = static_cast<int>(index / row_blocks);
    const int block = row_blocks - 1 - static_cast<int>(index % row_blocks);
    const int head = matrix % sh.heads, batch = matrix / sh.heads;
    return {matrix, batch * sh.kv_heads + head / (sh.heads / sh.kv_heads), block * block_rows};
}

//! @brief One block: work item blockIdx.x, then (`Persistent`) each item it takes from the counter `d_items_taken` (0
//!        at the launch) until none is left; without `Persistent` item blockIdx.x only (a block an item). Warpgroup 0
//!        loads; warpgroup w = 1 .. Block<HeadDim>::consumers owns rows 64 (w - 1) to 64 (w - 1) + 63 of an item,
//!        its warp v rows 16 v to 16 v + 15, lane l rows g = l / 4 and g + 8 and, in each 8 columns of S and O,
//!        columns 2 (l % 4) and 2 (l % 4) + 1. `Negate`: the scale is negative, and Q K^T is computed as -Q K^T. (An
//!        empty kernel without sm_90a code.)
template <int HeadDim, bool Negate, bool Persistent>
static __global__ void __launch_bounds__(Block<HeadDim>::threads, 1)
    attention_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                     const __grid_constant__ CUtensorMap map_v, bf16* __restrict__ d_o, float* __restrict__ d_lse,
                     Shape sh, float scale, unsigned long long* __restrict__ d_items_taken)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using L = Layout<HeadDim>;
    constexpr int consumers = Block<HeadDim>::consumers, block_rows = Block<HeadDim>::rows;
    constexpr int d_tiles = HeadDim / 8;  // 8-column tiles of O
    constexpr int s_regs = key_tile / 2;  // S accumulators a thread
    extern __shared__ unsigned char smem_raw[];
    unsigned char* const smem =
        reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    __shared__ std::uint64_t q_full[2], q_empty[2];  // a buffer of Q (and its item) has landed, is read
    __shared__ long long item_of[2];                  // the work item of a buffer of Q; -1: no more
    __shared__ std::uint64_t k_full[stages], v_full[stages], k_empty[stages], v_empty[stages];
    // The warpgroup's index through a shuffle from lane 0: the compiler then knows it is the same in the whole warp and
    // keeps what follows from it (the descriptors) in uniform registers.
    const int group = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
    const int t = static_cast<int>(threadIdx.x) % 128;
    const int consumer = group - 1;  // -1: the producer
    const int warp = t / 32, lane = t % 32, g = lane / 4, quad = lane % 4;
    const int row_blocks = (sh.seq + block_rows - 1) / block_rows;
    const long long items = static_cast<long long>(row_blocks) * sh.heads * sh.batch;
    const auto tiles_of = [&](const WorkItem& item) {
        return (min(sh.seq, sh.causal ? item.first_row + block_rows : sh.seq) + key_tile - 1) / key_tile;
    };
    const auto k_buffer = [&](int s) { return smem + L::k + s * L::tile_bytes; };
    const auto v_buffer = [&](int s) { return smem + L::v + s * L::tile_bytes; };
    if (threadIdx.x == 0) {
        for (int b = 0; b < 2; ++b) {
            mbarrier_init(&q_full[b], 1);
            mbarrier_init(&q_empty[b], consumers * 4);
        }
        for (int s = 0; s < stages; ++s) {
            mbarrier_init(&k_full[s], 1);
            mbarrier_init(&v_full[s], 1);
            mbarrier_init(&k_empty[s], consumers * 4);
            mbarrier_init(&v_empty[s], consumers * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (group == 0) {
        setmaxnreg_dec<producer_registers>();
        if (t == 0) {
            unsigned tiles_before = 0;  // tiles loaded so far
            long long item_index = blockIdx.x;
            for (unsigned items_before = 0;; ++items_before) {  // work items
                const int q_buffer = Persistent ? items_before % 2 : 0;
                if constexpr (Persistent) {
                    mbarrier_wait(&q_empty[q_buffer], (items_before / 2) % 2 ^ 1);  // the item before the last is read
                    item_of[q_buffer] = item_index < items ? item_index : -1;
                    if (item_index >= items) {
                        mbarrier_arrive(&q_full[q_buffer]);  // no bytes: the consumers see -1 and stop
                        break;
                    }
                }
                const WorkItem item = work_item(item_index, sh, row_blocks, block_rows);
                mbarrier_arrive_expect_bytes(&q_full[q_buffer], static_cast<unsigned>(L::q_bytes));
                for (int c = 0; c < L::chunks; ++c) {
                    tma_load(smem + L::q + q_buffer * L::q_bytes + c * L::q_region, &map_q, c * chunk, item.first_row,
                             item.q_matrix, &q_full[q_buffer]);
                }
                if constexpr (Persistent) {
                    // the next, taken early
                    item_index = gridDim.x + static_cast<long long>(atomicAdd(d_items_taken, 1ull));
                }
                const int tiles = tiles_of(item);
                for (int tile = 0; tile < tiles; ++tile, ++tiles_before) {
                    const int s = tiles_before % stages;
                    const unsigned free_parity = (tiles_before / stages) % 2 ^ 1;
                    mbarrier_wait(&k_empty[s], free_parity);
                    mbarrier_arrive_expect_bytes(&k_full[s], static_cast<unsigned>(L::tile_bytes));
                    for (int c = 0; c < L::chunks; ++c) {
                        tma_load(k_buffer(s) + c * L::kv_region, &map_k, c * chunk, tile * key_tile, item.kv_matrix,
                                 &k_full[s]);
                    }
                    mbarrier_wait(&v_empty[s], free_parity);
                    mbarrier_arrive_expect_bytes(&v_full[s], static_cast<unsigned>(L::tile_bytes));
                    for (int c = 0; c < L::chunks; ++c) {
                        tma_load(v_buffer(s) + c * L::kv_region, &map_v, c * chunk, tile * key_tile, item.kv_matrix,
                                 &v_full[s]);
                    }
                }
                if constexpr (!Persistent) {
                    break;
                }
            }
        }
        return;
    }
    setmaxnreg_inc<Block<HeadDim>::consumer_registers>();
    // The turns go round the consumers: the barrier first_turn_barrier + c opens consumer c's.
    const int my_turn = first_turn_barrier + consumer;
    const int other_turn = first_turn_barrier + (consumer + 1) % consumers;
    if (consumer == consumers - 1) {
        named_arrive(first_turn_barrier, turn_barrier_threads);  // the first warpgroup issues first
    }
    const unsigned char* const q_rows = smem + L::q + consumer * group_rows * 128;
    const std::uint64_t q_descs = smem_descriptor(q_rows, 0), k_desc = smem_descriptor(smem + L::k, 0);
    const std::uint64_t v_desc = smem_descriptor(smem + L::v, static_cast<unsigned>(L::kv_region));
    const float scale_log2 = fabsf(scale) * log2e;  // the sign is in the product (Negate)
    const auto release = [&](std::uint64_t* bar) {
        __syncwarp();  // what every lane read of the buffer (and of its work item) comes before lane 0's arrival
        if (lane == 0) {
            mbarrier_arrive(bar);
        }
    };

    unsigned tiles_before = 0;  // tiles computed so far
    for (unsigned items_before = 0;; ++items_before) {  // work items
        const int q_buffer = Persistent ? items_before % 2 : 0;
        mbarrier_wait(&q_full[q_buffer], (items_before / 2) % 2);
        const long long item_index = Persistent ? item_of[q_buffer] : blockIdx.x;
        if (item_index < 0) {
            break;
        }
        const WorkItem item = work_item(item_index, sh, row_blocks, block_rows);
        const std::uint64_t q_desc = q_descs + q_buffer * L::q_bytes / 16;
        const int tiles = tiles_of(item);
        const int group_first = item.first_row + consumer * group_rows;
        const int group_min_keys = sh.causal ? min(group_first + 1, sh.seq) : sh.seq;  // the fewest keys a row sees
        const int rows[2] = {group_first + warp * 16 + g, group_first + warp * 16 + g + 8};
        int row_keys[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            row_keys[h] = sh.causal ? min(rows[h] + 1, sh.seq) : sh.seq;
        }
        float max[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};
        float out[HeadDim / 2];
#pragma unroll
        for (int i = 0; i < HeadDim / 2; ++i) {
            out[i] = 0.0f;
        }
        float scores[s_regs];
        std::uint32_t p_fragments[key_tile / 16][4];

        const auto issue_scores = [&](int s) {
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < HeadDim / 16; ++kk) {  // descriptors count 16-byte units
                const unsigned q_within = ((kk / 4) * L::q_region + (kk % 4) * 32) / 16;
                const unsigned k_within = (s * L::tile_bytes + (kk / 4) * L::kv_region + (kk % 4) * 32) / 16;
                wgmma_64x128x16_ss<Negate ? -1 : 1>(scores, q_desc + q_within, k_desc + k_within, kk > 0);
            }
            wgmma_commit();
        };
        const auto issue_pv = [&](int s) {
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < key_tile / 16; ++k) {
                const std::uint64_t desc = v_desc + (s * L::tile_bytes + k * 16 * 128) / 16;
                if constexpr (HeadDim == 128) {
                    wgmma_64x128x16_rs(out, p_fragments[k], desc);
                } else {
                    wgmma_64x64x16_rs(out, p_fragments[k], desc);
                }
            }
            wgmma_commit();
        };
        // The online softmax of this tile's scores (in sc) into weights (in sc); sets how much O shrinks. Every row
        // sees key 0, so its running maximum is finite after the first tile unless its scores are NaN.
        const auto softmax = [&](int first_key, auto masked, float (&rescale)[2]) {
            if constexpr (masked.value) {  // warpgroup-uniform: the tile reaches past the last key some row sees
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int limit = row_keys[h] - first_key - quad * 2;
#pragma unroll
                    for (int j = 0; j < key_tile / 8; ++j) {
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            scores[4 * j + 2 * h + e] = j * 8 + e < limit ? scores[4 * j + 2 * h + e] : -INFINITY;
                        }
                    }
                }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float part[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
                for (int j = 0; j < key_tile / 8; ++j) {
                    part[(2 * j) % 4] = fmaxf(part[(2 * j) % 4], scores[4 * j + 2 * h]);
                    part[(2 * j + 1) % 4] = fmaxf(part[(2 * j + 1) % 4], scores[4 * j + 2 * h + 1]);
                }
                float tile_max = fmaxf(fmaxf(part[0], part[1]), fmaxf(part[2], part[3]));
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
                tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
                const float new_max = fmaxf(max[h], tile_max);
                rescale[h] = max[h] == -INFINITY ? 0.0f : exp2_approx((max[h] - new_max) * scale_log2);
                const float shift = -new_max * scale_log2;
                const int limit = row_keys[h] - first_key - quad * 2;
                float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int j = 0; j < key_tile / 8; ++j) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float weight = exp2_approx(fmaf(scores[4 * j + 2 * h + e], scale_log2, shift));
                        if constexpr (masked.value) {
                            weight = j * 8 + e < limit ? weight : 0.0f;  // -inf times a scale of 0 is NaN
                        }
                        scores[4 * j + 2 * h + e] = weight;
                        sums[(2 * j + e) % 4] += weight;
                    }
                }
                sum[h] = sum[h] * rescale[h] + ((sums[0] + sums[1]) + (sums[2] + sums[3]));  // this thread's columns
                max[h] = new_max;
            }
        };
        const auto pack_weights = [&] {
#pragma unroll
            for (int k = 0; k < key_tile / 16; ++k) {
                p_fragments[k][0] = pack(scores[8 * k], scores[8 * k + 1]);
                p_fragments[k][1] = pack(scores[8 * k + 2], scores[8 * k + 3]);
                p_fragments[k][2] = pack(scores[8 * k + 4], scores[8 * k + 5]);
                p_fragments[k][3] = pack(scores[8 * k + 6], scores[8 * k + 7]);
            }
        };

        float rescale[2];
        {
            const int s = tiles_before % stages;
            mbarrier_wait(&k_full[s], (tiles_before / stages) % 2);
            named_sync(my_turn, turn_barrier_threads);
            issue_scores(s);
            named_arrive(other_turn, turn_barrier_threads);
            wgmma_wait<0>();
            fence_accumulators(scores);
            release(&k_empty[s]);
            if (tiles == 1) {
                release(&q_empty[q_buffer]);
            }
            if (key_tile > group_min_keys) {
                softmax(0, std::true_type{}, rescale);
            } else {
                softmax(0, std::false_type{}, rescale);
            }
            pack_weights();
        }
        for (int tile = 1; tile < tiles; ++tile) {
            const int s = (tiles_before + tile) % stages, prev = (tiles_before + tile - 1) % stages;
            mbarrier_wait(&k_full[s], ((tiles_before + tile) / stages) % 2);
            named_sync(my_turn, turn_barrier_threads);
            issue_scores(s);
            mbarrier_wait(&v_full[prev], ((tiles_before + tile - 1) / stages) % 2);
            issue_pv(prev);
            named_arrive(other_turn, turn_barrier_threads);
            wgmma_wait<1>();
            fence_accumulators(scores);
            release(&k_empty[s]);
            if (tile + 1 == tiles) {
                release(&q_empty[q_buffer]);
            }
            if ((tile + 1) * key_tile > group_min_keys) {  // warpgroup-uniform
                softmax(tile * key_tile, std::true_type{}, rescale);
            } else {
                softmax(tile * key_tile, std::false_type{}, rescale);
            }
            wgmma_wait<0>();
            fence_accumulators(out);
            release(&v_empty[prev]);
#pragma unroll
            for (int j = 0; j < d_tiles; ++j) {
                out[4 * j] *= rescale[0];
                out[4 * j + 1] *= rescale[0];
                out[4 * j + 2] *= rescale[1];
                out[4 * j + 3] *= rescale[1];
            }
            pack_weights();
        }
        {
            const int last = (tiles_before + tiles - 1) % stages;
            mbarrier_wait(&v_full[last], ((tiles_before + tiles - 1) / stages) % 2);
            issue_pv(last);
            wgmma_wait<0>();
            fence_accumulators(out);
            release(&v_empty[last]);
        }
        tiles_before += tiles;
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the row's sum over the quad's columns, in every lane of the quad
            sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
            sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (rows[h] >= sh.seq) {
                continue;
            }
            bf16* o_row = d_o + (static_cast<std::size_t>(item.q_matrix) * sh.seq + rows[h]) * HeadDim;
            const float inverse = 1.0f / sum[h];
#pragma unroll
            for (int j = 0; j < d_tiles; ++j) {
                *reinterpret_cast<__nv_bfloat162*>(o_row + j * 8 + quad * 2) =
                    __floats2bfloat162_rn(out[4 * j + 2 * h] * inverse, out[4 * j + 2 * h + 1] * inverse);
            }
            if (quad == 0) {
                d_lse[static_cast<std::size_t>(item.q_matrix) * sh.seq + rows[h]] =
                    (max[h] * scale_log2 + log2f(sum[h])) / log2e;
            }
        }
        if constexpr (!Persistent) {
            break;
        }
    }
    if (consumer == 0) {
        named_sync(my_turn, turn_barrier_threads);  // the last warpgroup's arrival after its last turn
    }
#endif
}

//! What this step needs of the GPU and the build: `wgmma`, the TMA and the rest of sm_90a, compute capability 9.0 and
//! code built for it (`-gencode=arch=compute_90a,code=sm_90a`).
constexpr const char* requirement = "sm_90a";

//! Built with sm_90a this kernel is bounded to 128 threads, without it to 32: its attributes tell the launcher which
//! machine code the driver loaded for this GPU, without launching anything.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr int marker_threads = 128;
#else
constexpr int marker_threads = 32;
#endif
static __global__ void __launch_bounds__(marker_threads) requirement_marker_kernel() {}

//! @brief Whether the machine code the driver loaded for the current GPU has the instructions this step uses.
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

//! @brief Describes `matrices` matrices of `seq` rows of `head_dim` bf16 to the TMA: boxes of 64 values by `box_rows`
//!        rows of one matrix, 128-byte swizzle; what lies past a matrix's rows reads as zero.
inline bool encode_rows(CUtensorMap* map, const bf16* base, int matrices, int seq, int head_dim, int box_rows)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(seq),
                                static_cast<cuuint64_t>(matrices)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_dim) * sizeof(bf16),
                                   static_cast<cuuint64_t>(seq) * head_dim * sizeof(bf16)};
    const cuuint32_t box[3] = {chunk, static_cast<cuuint32_t>(box_rows), 1};
    const cuuint32_t element_strides[3] = {1, 1, 1};
    return encode != nullptr &&
           encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<bf16*>(base), dims, strides, box,
                  element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <int HeadDim>
inline cudaError_t launch(const bf16* d_q, const bf16* d_k, const bf16* d_v, bf16* d_o, float* d_lse, const Shape& s,
                          float scale, unsigned long long* d_items_taken, cudaStream_t stream)
{
    CUtensorMap map_q{}, map_k{}, map_v{};
    constexpr int block_rows = Block<HeadDim>::rows;
    if (!encode_rows(&map_q, d_q, s.batch * s.heads, s.seq, HeadDim, block_rows) ||
        !encode_rows(&map_k, d_k, s.batch * s.kv_heads, s.seq, HeadDim, key_tile) ||
        !encode_rows(&map_v, d_v, s.batch * s.kv_heads, s.seq, HeadDim, key_tile)) {
        return cudaErrorNotSupported;
    }
    const int row_blocks = (s.seq + block_rows - 1) / block_rows;
    const long long items = static_cast<long long>(row_blocks) * s.heads * s.batch;
    const bool persistent = s.seq <= persistent_max_seq || items > std::numeric_limits<int>::max();
    const auto kernel = persistent ? (scale < 0.0f ? attention_kernel<HeadDim, true, true>
                                                   : attention_kernel<HeadDim, false, true>)
                                   : (scale < 0.0f ? attention_kernel<HeadDim, true, false>
                                                   : attention_kernel<HeadDim, false, false>);
    constexpr int bytes = static_cast<int>(Layout<HeadDim>::bytes);
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        e != cudaSuccess) {
        return e;
    }
    int grid = static_cast<int>(std::min<long long>(items, std::numeric_limits<int>::max()));  // a block an item
    if (persistent) {
        int device = 0, sms = 0;
        if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
            return e;
        }
        if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
            e != cudaSuccess) {
            return e;
        }
        grid = static_cast<int>(std::min<long long>(items, sms));  // one block an SM
        if (const cudaError_t e = cudaMemsetAsync(d_items_taken, 0, sizeof(*d_items_taken), stream);
            e != cudaSuccess) {
            return e;
        }
    }
    kernel<<<grid, Block<HeadDim>::threads, bytes, stream>>>(map_q, map_k, map_v, d_o, d_lse, s, scale, d_items_taken);
    return cudaGetLastError();
}

//! @brief O = softmax(scale Q K^T (+ causal mask)) V and each row's log-sum-exp, for bf16 Q, K, V, O.
//!        Causal, a NaN in row j of V reaches the rows that see key j and also the rows before j in j's tile
//!        (a tile of 128 keys; at head_dim 64, blocks of 192 rows: back to the first row of the block that
//!        holds the tile's first key): P multiplies V a whole tile at a time, and a masked weight of 0 times
//!        NaN is NaN. The rows before that are exact.
//! @param[in] d_temp_storage device workspace (the count of work items taken, set to 0 here first), or nullptr: only
//!            `temp_storage_bytes` is set
//! @param[in,out] temp_storage_bytes the workspace's size (8)
//! @param[in] d_q, d_k, d_v Q [batch, heads, seq, head_dim], K and V [batch, kv_heads, seq, head_dim], contiguous
//! @param[out] d_o O, as Q
//! @param[out] d_lse log(sum_j exp(scale q_i k_j)) of each row (natural log), fp32 [batch, heads, seq]
//! @param[in] s the problem: batch, heads, kv_heads, seq, head_dim, causal
//! @param[in] scale multiplies the scores (1 / sqrt(head_dim) in the usual attention)
//! @param[in] stream stream to launch on
//! @pre head_dim 64 or 128; kv_heads divides heads; every size >= 1, heads and batch <= 65535, batch * heads and seq <
//!      2^31; Q, K, V, O and the LSE not null, Q, K, V 16-byte aligned, O and the LSE 4-byte aligned, the workspace
//!      8-byte aligned; a GPU of compute capability 9.0 and this file built for it as `sm_90a`
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, `cudaErrorNotSupported`
//!         without sm_90a code for this GPU (or a driver without `cuTensorMapEncodeTiled`), the error of the
//!         shared-memory opt-in or of zeroing the workspace, else the launch's error
inline cudaError_t attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q, const bf16* d_k,
                             const bf16* d_v, bf16* d_o, float* d_lse, const Shape& s, float scale,
                             cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) {
        return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
    };
    if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || s.heads > 65535 || s.batch > 65535 || !aligned(d_q, 16) ||
        !aligned(d_k, 16) || !aligned(d_v, 16) || !aligned(d_o, 4) || !aligned(d_lse, 4) || d_q == nullptr ||
        d_k == nullptr || d_v == nullptr || d_o == nullptr || d_lse == nullptr ||
        static_cast<long long>(s.batch) * s.heads >= (1LL << 31)) {
        return cudaErrorInvalidValue;
    }
    using Counter = unsigned long long;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = sizeof(Counter);
        return cudaSuccess;
    }
    if (temp_storage_bytes < sizeof(Counter) || !aligned(d_temp_storage, alignof(Counter))) {
        return cudaErrorInvalidValue;
    }
    if (!requirement_met()) {
        return cudaErrorNotSupported;
    }
    Counter* const d_items_taken = static_cast<Counter*>(d_temp_storage);
    return s.head_dim == 64 ? launch<64>(d_q, d_k, d_v, d_o, d_lse, s, scale, d_items_taken, stream)
                            : launch<128>(d_q, d_k, d_v, d_o, d_lse, s, scale, d_items_taken, stream);
}

}  // namespace stepwise::attention::three_consumer_groups
