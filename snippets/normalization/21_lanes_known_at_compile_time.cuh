//! @file 21_lanes_known_at_compile_time.cuh
//! @brief Normalization step 21 (beyond the sources): the rows kernel knows its row's lanes at compile time, a power
//!        of two up to a warp or the whole block, so that each of its kernels builds only the reduction it takes.
//!
//! Rows of at most 32 threads take a power of two of a warp's lanes each, several rows a block. Until now the rows
//! kernel took that number as a kernel argument, the same one that a row per block passes as the block's size: each
//! reduction was a loop over a width known only at run time (a shift, a compare and a branch around every shuffle),
//! and the kernel carried both reductions, the shuffles within a warp and the block-wide one through shared memory,
//! where a launch only ever takes one. Where rows are many and short, those instructions are a large share of a
//! value's work. Here the launcher instantiates the kernel for each power of two of lanes, 1 to 32 (`Lanes`), and for
//! a row per block (`whole_block`): the shuffles unroll, the shared memory and its barrier leave the kernels of rows
//! that fit a warp, and the lane-wise path leaves the kernel of a row per block.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>
#include <type_traits>

namespace stepwise::normalization::lanes_known_at_compile_time {

constexpr int vector_bytes = 16;             //!< one load or store
constexpr int short_rows_block = 256;        //!< threads of a block of rows that each fit a warp
constexpr int portable_cluster_blocks = 8;   //!< the cluster size every GPU with clusters takes
constexpr int max_cluster_blocks = 16;       //!< the largest, where the GPU allows it (H100, H200)
constexpr int cluster_block_threads = 256;   //!< the most threads of a block of a cluster
constexpr int cluster_stages = 1;            //!< rows a block loads ahead (a second costs blocks per SM: slower)
constexpr int shift_block_threads = 256;     //!< blocks of the kernel that writes the shifted parameters
constexpr int shift_max_blocks = 1024;       //!< its grid's cap: a few values a thread at a vocabulary's width
//! @brief Shared memory a block of the cluster kernel reserves, in slices: its stages of x, gamma's and beta's.
//!        RMSNorm's blocks leave the last one unused: two fp32 blocks an SM, not three, were faster in rows of
//!        131072 values.
constexpr int cluster_block_slices = cluster_stages + 2;
constexpr int split_block_threads = 256;     //!< blocks of the split path (rows longer than a cluster)
constexpr int block_values = 16384;          //!< a block holds at most this many values: 1024 threads of 16, 512 of 32
constexpr int split_values = 32;             //!< values per thread of the split path
constexpr int whole_block = 0;               //!< the rows kernel's `Lanes` where a row takes the whole block

//! @brief The most threads of a block whose threads hold `Values` values each.
template <int Values>
constexpr int max_block_threads = std::min(1024, block_values / Values);

//! @brief How fast a GPU's DRAM is for its SMs: `fast` where it delivers more than `fast_memory_gbps_per_sm` GB/s
//!        an SM at its peak clock (the H200 37, the H100 25), and longer rows need more of them in flight at once.
enum class Memory { usual, fast };
constexpr double fast_memory_gbps_per_sm = 30.0;

struct Squares;  // RMSNorm's statistics, below

//! @brief Values each thread holds in rows read 16 bytes at a time: 16 up to 4096 values (fp32: 8192), 32 beyond
//!        (fewer, fuller threads per row), 64 beyond 65536 (clusters of 8 blocks, not 16, each merging fewer
//!        partials); 8 in fp32 rows of up to 64 values and RMSNorm's rows of up to 1024 (more lanes a row: more
//!        loads in flight). With `Memory::fast`, bf16 rows take each step at a quarter of these lengths: fewer
//!        threads a row leave room for more rows an SM. Rows read 2 or 4 bytes at a time keep 16: more threads, more
//!        loads in flight.
template <typename T, typename Stats>
inline int values_per_thread(int num_cols, Memory memory)
{
    if (sizeof(T) == 4 && num_cols <= 64) {
        return 8;
    }
    const std::int64_t length = std::int64_t{num_cols} * (sizeof(T) == 2 && memory == Memory::fast ? 4 : 1);
    if (std::is_same_v<Stats, Squares> && length <= 1024) {
        return 8;
    }
    if (length > 65536) {
        return 64;
    }
    return length <= (sizeof(T) == 4 ? 8192 : 4096) ? 16 : 32;
}

//! @brief What the launchers ask of a device: how fast its memory is, and its SMs (0 where the runtime cannot tell).
struct DeviceTraits {
    Memory memory = Memory::usual;
    int sms = 0;
};

//! @brief The current device's DeviceTraits, asked once per device and host thread, so that a launch takes no lock
//!        (`usual` memory and 0 SMs where the runtime cannot tell).
inline DeviceTraits traits_of_current_device()
{
    thread_local std::map<int, DeviceTraits> known;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        (void)cudaGetLastError();
        return {};
    }
    const auto [entry, unknown] = known.try_emplace(device);
    if (!unknown) {
        return entry->second;
    }
    int clock_khz = 0, bus_bits = 0, sms = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1) {
        (void)cudaGetLastError();  // not an error of a launch: the usual layout is taken
        return entry->second;
    }
    const double gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // two transfers a clock
    entry->second = {gbps / sms > fast_memory_gbps_per_sm ? Memory::fast : Memory::usual, sms};
    return entry->second;
}

//! @brief The current device's Memory (traits_of_current_device()).
inline Memory memory_of_current_device() { return traits_of_current_device().memory; }

//! @brief Whether a thread whose group's plain sum of squares was out of range tries its own plain sum (thread_squares())
//!        before the scaled one: for bf16 rows read 16 bytes at a time.
template <typename T, int Width>
constexpr bool plain_squares = sizeof(T) == 2 && Width > 1;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

//! @brief `Width` consecutive values, loaded and stored as one access.
template <typename T, int Width>
struct alignas(sizeof(T) * Width) Chunk {
    T v[Width];
};

//! @brief The `Width` values of a chunk, in fp32. A bf16 is the upper half of the fp32 it widens to: one shift or one
//!        mask a value, on the 32-bit words that hold two.
template <int Width>
__device__ __forceinline__ void widen(const Chunk<float, Width>& chunk, float (&out)[Width])
{
#pragma unroll
    for (int i = 0; i < Width; ++i) {
        out[i] = chunk.v[i];
    }
}
template <int Width>
__device__ __forceinline__ void widen(const Chunk<__nv_bfloat16, Width>& chunk, float (&out)[Width])
{
    if constexpr (Width % 2 == 0) {
#pragma unroll
        for (int i = 0; i < Width; i += 2) {
            std::uint32_t word;
            std::memcpy(&word, &chunk.v[i], sizeof(word));
            out[i] = __uint_as_float(word << 16);
            out[i + 1] = __uint_as_float(word & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            out[i] = __bfloat162float(chunk.v[i]);
        }
    }
}

constexpr float smallest_scale = 0x1p-126f;  //!< the scale of no values: any other is at least as large

//! @brief A power of two at least |m| (2^-126 to 2^126; m beyond 2^126 at most 4 times it), from m's exponent bits:
//!        scaling by it, or by its inverse, is exact.
__device__ __forceinline__ float power_of_two_above(float m)
{
    const unsigned bits = (__float_as_uint(m) & 0x7f800000u) + 0x00800000u;  // 2^(floor(log2 |m|) + 1)
    return __uint_as_float(min(max(bits, 0x00800000u), 0x7e800000u));
}

//! @brief 1 / p, exactly, for a power of two p from power_of_two_above().
__device__ __forceinline__ float inverse_power_of_two(float p) { return __uint_as_float(0x7f000000u - __float_as_uint(p)); }

//! @brief A sum of squares kept as scale^2 * sum, `scale` a power of two at least the largest root: no square of an
//!        fp32 value overflows (rows of 1e30 work) or vanishes.
struct Squares {
    float scale, sum;
};

//! @brief The sum of two sums of squares, on the larger scale (ratios of powers of two: exact).
__device__ __forceinline__ Squares merge(Squares a, Squares b)
{
    const float scale = fmaxf(a.scale, b.scale);
    const float inverse = inverse_power_of_two(scale);
    const float ra = a.scale * inverse, rb = b.scale * inverse;
    return {scale, a.sum * ra * ra + b.sum * rb * rb};
}
__device__ __forceinline__ float merge(float a, float b) { return a + b; }

//! @brief LayerNorm's statistics of some values: how many, their mean, and their squared deviations from it.
struct Moments {
    float count, mean;
    Squares m2;
};

//! @brief Blocks of a cluster kernel per SM that its registers must leave room for: one block's turn hides the
//!        others' waits (LayerNorm's larger statistics take more registers; threads of 64 values leave room for 2).
template <typename Stats, int Values>
constexpr int cluster_min_blocks = Values > split_values ? 2 : std::is_same_v<Stats, Moments> ? 3 : 4;

//! @brief Whether the row kernel runs LayerNorm's bf16 rows of up to 512 values (16 a thread, blocks of rows).
template <typename T, typename Stats, int Width, int Values>
constexpr bool short_bf16_layer_norm =
    sizeof(T) == 2 && std::is_same_v<Stats, Moments> && Width > 1 && Values == 16;

//! @brief Blocks per SM that the registers of those must leave room for: at the compiler's 4 (57 registers) too few
//!        loads are in flight, so 5 (48 registers, no spills) where an SM holds 1280 threads (sm_80 and newer).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int short_rows_min_blocks = 0;  // the compiler's choice
#else
constexpr int short_rows_min_blocks = 5;
#endif

//! @brief Blocks of the largest (512 threads) an SM that the packed rows kernels of rows of 32 values a thread must
//!        leave registers for, bf16 and fp32 RMSNorm: two, which holds them to 64 registers, as their aligned twins
//!        (step 15's bf16 LayerNorm kernel had 98: three blocks of a row of 4095 values an SM, not six; the packed
//!        fp32 RMSNorm kernel took 70 unbounded, one block of 512 threads an SM). fp32 LayerNorm's would spill there.
constexpr int packed_min_blocks = 2;

template <typename T, typename Stats, int Width, int Values, bool Windowed>
constexpr int row_min_blocks = short_bf16_layer_norm<T, Stats, Width, Values>            ? short_rows_min_blocks
                               : Windowed && Width > 1 && Values == 32 &&
                                         (sizeof(T) == 2 || std::is_same_v<Stats, Squares>)
                                   ? packed_min_blocks
                                                                                         : 0;

//! @brief The most threads of a block of the row kernel: a block of short rows' where it asks for blocks per SM.
template <typename T, typename Stats, int Width, int Values>
constexpr int row_max_threads =
    short_bf16_layer_norm<T, Stats, Width, Values> ? short_rows_block : max_block_threads<Values>;

//! @brief Whether the row kernel loads its chunks of gamma (and beta) with the row, before the statistics, so that the
//!        write waits for no load: where they fit in registers beside the row (16-byte accesses, at most 16 values a
//!        thread), in rows of at most `parameters_ahead_row_threads` threads (the short rows' blocks of 256 hold
//!        several). Not in LayerNorm's bf16 rows of 16 values, whose five blocks an SM leave no registers for them; nor
//!        in rows of more threads, whose block-wide reductions need the blocks an SM that those registers cost.
template <typename T, typename Stats, int Width, int Values>
constexpr bool parameters_ahead = Width > 1 && Values <= 16 && !short_bf16_layer_norm<T, Stats, Width, Values>;
constexpr int parameters_ahead_row_threads = 128;

//! @brief Vectors of `num_cols` values that every row shares: gamma, and beta for LayerNorm.
template <typename Stats>
constexpr int row_parameters = std::is_same_v<Stats, Moments> ? 2 : 1;

//! @brief The statistics of the union of two sets of values (Chan, Golub and LeVeque); either may be empty.
__device__ __forceinline__ Moments merge(Moments a, Moments b)
{
    const float count = a.count + b.count;
    if (count == 0.0f) {
        return a;
    }
    const float delta = b.mean - a.mean;
    const float b_share = b.count / count;
    const float scale = power_of_two_above(delta);
    const float scaled = delta * inverse_power_of_two(scale);
    const Squares between{scale, scaled * scaled * a.count * b_share};
    return {count, a.mean + delta * b_share, merge(merge(a.m2, b.m2), between)};
}

__device__ __forceinline__ float shuffle_xor(float v, int offset, int width)
{
    return __shfl_xor_sync(0xffffffffu, v, offset, width);
}
__device__ __forceinline__ Squares shuffle_xor(Squares q, int offset, int width)
{
    return {shuffle_xor(q.scale, offset, width), shuffle_xor(q.sum, offset, width)};
}
__device__ __forceinline__ Moments shuffle_xor(Moments m, int offset, int width)
{
    return {shuffle_xor(m.count, offset, width), shuffle_xor(m.mean, offset, width), shuffle_xor(m.m2, offset, width)};
}

//! @brief The squares of the values' differences from `center`, summed as they are (they may overflow or vanish).
template <int Values>
__device__ __forceinline__ float plain_sum_of_squares(const float (&x)[Values], float center)
{
    float plain = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        const float d = x[i] - center;
        plain += d * d;
    }
    return plain;
}

//! @brief The squares of the values' differences from `center`, scaled by a power of two of the largest. `Plain`:
//!        summed as they are first, then scaled by a power of two of the sum's root, unless a square may have
//!        overflowed or vanished.
template <bool Plain, int Values>
__device__ __forceinline__ Squares thread_squares(const float (&x)[Values], float center)
{
    if constexpr (Plain) {
        const float plain = plain_sum_of_squares(x, center);
        if (plain >= 0x1p-90f && plain <= 0x1p126f) {  // squares below 2^-126 are negligible beside it; NaN fails
            const float scale = power_of_two_above(sqrtf(plain));
            const float inverse = inverse_power_of_two(scale);
            return {scale, plain * inverse * inverse};  // exact: a power of two
        }
    }
    float largest = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        largest = fmaxf(largest, fabsf(x[i] - center));
    }
    const float scale = power_of_two_above(largest);
    const float inverse = inverse_power_of_two(scale);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        const float d = (x[i] - center) * inverse;
        sum += d * d;
    }
    return {scale, sum};
}

//! @brief 1 / sqrt(scale^2 * sum / n + epsilon), without forming a square that would overflow.
__device__ __forceinline__ float inverse_root(Squares q, float n, float epsilon)
{
    if (q.scale > 1.0f || epsilon == 0.0f) {
        const float inverse = inverse_power_of_two(q.scale);
        return inverse * rsqrtf(q.sum / n + epsilon * inverse * inverse);
    }
    return rsqrtf(q.scale * q.scale * (q.sum / n) + epsilon);  // a square that vanishes is negligible beside epsilon
}

//! @brief What a row's output needs: y = (x - mean) * rstd * gamma (+ beta).
struct Row {
    float mean, rstd;
};
//! @brief The factor y takes of x - mean: rstd, or 0 where rstd is infinite (epsilon 0 and a row whose values are all
//!        its mean, as a LayerNorm row of equal values, each x - mean exactly 0: y is then exactly beta, where 0 times
//!        an infinite rstd would make it NaN). A NaN rstd stays NaN.
__device__ __forceinline__ float output_scale(Row r) { return isinf(r.rstd) ? 0.0f : r.rstd; }
__device__ __forceinline__ Row row_of(Squares q, int num_cols, float epsilon)
{
    return {0.0f, inverse_root(q, static_cast<float>(num_cols), epsilon)};
}
__device__ __forceinline__ Row row_of(Moments m, int, float epsilon) { return {m.mean, inverse_root(m.m2, m.count, epsilon)}; }

//! @brief Merges the statistics of the `width` lanes of each segment of the warp; every lane gets the result.
template <typename Stats>
__device__ __forceinline__ Stats merge_lanes(Stats s, int width)
{
    for (int offset = width / 2; offset > 0; offset /= 2) {
        s = merge(s, shuffle_xor(s, offset, width));
    }
    return s;
}

//! @brief The power of two of lanes that a merge of `n` values (1 to 32), one a lane, takes.
__device__ __forceinline__ int lanes_for(int n) { return n <= 1 ? 1 : 1 << (32 - __clz(n - 1)); }

//! @brief Merges the statistics of every thread of the block; every thread gets the result.
template <typename Stats>
__device__ __forceinline__ Stats merge_block(Stats s, Stats* warp_stats, Stats none)
{
    const int lane = threadIdx.x % 32;
    s = merge_lanes(s, 32);
    if (lane == 0) {
        warp_stats[threadIdx.x / 32] = s;
    }
    __syncthreads();
    const int warps = blockDim.x / 32;
    return merge_lanes(lane < warps ? warp_stats[lane] : none, 32);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
//! @brief The shared-memory address of `p` in the block's window, as barriers and bulk copies take it.
__device__ __forceinline__ std::uint32_t smem_address(const void* p)
{
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

//! @brief A transaction barrier in shared memory that one arrival and the bytes it expects complete.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* barrier)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(barrier)) : "memory");
}

//! @brief The barrier's one arrival of this phase, which then waits for `bytes` more to land.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(std::uint64_t* barrier, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(barrier)), "r"(bytes)
                 : "memory");
}

//! @brief Waits until the barrier's phase of parity `parity` has completed, acquiring at cluster scope: what landed
//!        for it, from this block or another of the cluster, is then visible. The thread sleeps meanwhile (up to
//!        `suspend_ns` a try) instead of taking issue slots from working warps.
__device__ __forceinline__ void mbarrier_wait_cluster(std::uint64_t* barrier, int parity)
{
    constexpr unsigned suspend_ns = 1000000;
    asm volatile(
        "{\n .reg .pred done;\n wait_%=:\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1, %2;\n"
        " @!done bra wait_%=;\n}" ::"r"(smem_address(barrier)),
        "r"(parity), "r"(suspend_ns)
        : "memory");
}

//! @brief Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory with the
//!        bulk copy engine; they count towards `barrier`.
__device__ __forceinline__ void bulk_load(void* d_shared, const void* d_global, unsigned bytes, std::uint64_t* barrier)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_address(d_shared)), "l"(d_global), "r"(bytes), "r"(smem_address(barrier))
                 : "memory");
}

//! @brief `slot` and `barrier` of the cluster's block `rank`, in the cluster's shared-memory window.
__device__ __forceinline__ void map_to_rank(const void* slot, const void* barrier, int rank, std::uint32_t& remote_slot,
                                            std::uint32_t& remote_barrier)
{
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_slot) : "r"(smem_address(slot)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_barrier) : "r"(smem_address(barrier)), "r"(rank));
}

//! @brief Stores `q` into `slot` of the cluster's block `rank`, counting its 8 bytes towards that block's `barrier`.
__device__ __forceinline__ void push(Squares* slot, std::uint64_t* barrier, int rank, Squares q)
{
    std::uint32_t remote_slot, remote_barrier;
    map_to_rank(slot, barrier, rank, remote_slot, remote_barrier);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
                 ::"r"(remote_slot), "f"(q.scale), "f"(q.sum), "r"(remote_barrier)
                 : "memory");
}

//! @brief Stores `m` into `slot` (16-byte aligned) of the cluster's block `rank`, counting its 16 bytes towards that
//!        block's `barrier`.
__device__ __forceinline__ void push(Moments* slot, std::uint64_t* barrier, int rank, Moments m)
{
    std::uint32_t remote_slot, remote_barrier;
    map_to_rank(slot, barrier, rank, remote_slot, remote_barrier);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                 ::"r"(remote_slot), "f"(m.count), "f"(m.mean), "f"(m.m2.scale), "f"(m.m2.sum), "r"(remote_barrier)
                 : "memory");
}
#endif

//! @brief `v` reduced over the thread's group: its `group_threads` lanes (<= 32), or its whole block (`none`: what
//!        missing warps add); every thread of the group gets it.
template <typename V>
__device__ __forceinline__ V reduce_group(V v, int group_threads, V* warp_scratch, V none)
{
    return group_threads <= 32 ? merge_lanes(v, group_threads) : merge_block(v, warp_scratch, none);
}

//! @brief Shared memory of the group reductions: one array per reduction, so that a second needs no barrier to
//!        wait for the first's readers.
struct GroupScratch {
    float sums[32];
    float plain_sums[32];  // of squares
    Squares squares[32];
};

//! @brief The sum of the squares of the group's differences from `center`: summed plainly over the group and scaled
//!        once, where that sum lies in [2^-60, 2^126] (then no square overflowed, and those that vanished are
//!        negligible beside it); else, and for a NaN, the group merges its threads' thread_squares() (the whole warp
//!        or block decides together: the sum is the same in all its threads).
template <bool Plain, int Values>
__device__ __forceinline__ Squares group_squares(const float (&x)[Values], float center, int group_threads,
                                                 GroupScratch& scratch)
{
    const float sum = reduce_group(plain_sum_of_squares(x, center), group_threads, scratch.plain_sums, 0.0f);
    if (__all_sync(0xffffffffu, sum >= 0x1p-60f && sum <= 0x1p126f)) {
        const float scale = power_of_two_above(sqrtf(sum));
        const float inverse = inverse_power_of_two(scale);
        return {scale, sum * inverse * inverse};  // exact: a power of two
    }
    return reduce_group(thread_squares<Plain>(x, center), group_threads, scratch.squares, Squares{smallest_scale, 0.0f});
}

//! @brief RMSNorm's statistics of the group's values (those outside the row are 0): their sum of squares.
template <bool Plain, int Width, int Values>
__device__ __forceinline__ Squares group_statistics(const float (&x)[Values], int, int, float, int group_threads,
                                                    GroupScratch& scratch, Squares, int = 0)
{
    return group_squares<Plain>(x, 0.0f, group_threads, scratch);
}

//! @brief Sets the thread's values outside `[begin, end)` to `value`: one branch where it holds none outside the row,
//!        not a select a value in every sum. Before `begin`: window positions before the row's start (step 12). Where
//!        `begin` and `end` are multiples of `Width`, the thread's chunks of `Width` values lie wholly inside or
//!        outside the row: one test a chunk and a select a value, not two comparisons and a select a value.
template <int Width, int Values>
__device__ __forceinline__ void pad(float (&x)[Values], int begin, int end, float value)
{
    if (begin > 0 || end < Values) {
        if (Width > 1 && begin % Width == 0 && end % Width == 0) {
#pragma unroll
            for (int a = 0; a < Values / Width; ++a) {
                const bool inside = a * Width >= begin && a * Width < end;
#pragma unroll
                for (int i = 0; i < Width; ++i) {
                    x[a * Width + i] = inside ? x[a * Width + i] : value;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < Values; ++i) {
                x[i] = i >= begin && i < end ? x[i] : value;
            }
        }
    }
}

//! @brief LayerNorm's statistics of the group's `group_count` values (0 or more), the thread's first `count`, in two
//!        reductions: the mean (of the differences from `shift`, the row's first value: exact for equal values),
//!        then the squares of the deviations from it, in the thread's registers. The values outside the row (before
//!        `begin`, the thread's first of the row, or past its `count` from there) count as `shift`, then as the mean
//!        (pad(), by chunks of `Width` where they lie wholly inside or outside the row): no difference, no deviation.
template <bool Plain, int Width, int Values>
__device__ __forceinline__ Moments group_statistics(float (&x)[Values], int count, int group_count, float shift,
                                                    int group_threads, GroupScratch& scratch, Moments, int begin = 0)
{
    pad<Width>(x, begin, begin + count, shift);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        sum += x[i] - shift;
    }
    sum = reduce_group(sum, group_threads, scratch.sums, 0.0f);
    const float mean = shift + sum / max(group_count, 1);  // a cluster's last block may have no values
    pad<Width>(x, begin, begin + count, mean);
    const Squares m2 = group_squares<Plain>(x, mean, group_threads, scratch);
    return {static_cast<float>(group_count), mean, m2};
}

//! @brief What the kernels read and write. RMSNorm has no `d_beta`, `d_mean` or `d_rstd` (nullptr).
template <typename T>
struct Args {
    const T* d_in;
    const T* d_gamma;
    const T* d_beta;
    T* d_out;
    float* d_mean;
    float* d_rstd;
    int num_rows, num_cols;
    float epsilon;
    //! Windowed kernels: `d_gamma` and `d_beta` are `Width` shifted copies of this many values each (launch()).
    std::int64_t shifted_stride = 0;
};

//! @brief The statistics of nothing: what lanes and blocks without values contribute.
template <typename Stats>
__device__ __forceinline__ Stats no_values()
{
    if constexpr (std::is_same_v<Stats, Moments>) {
        return {0.0f, 0.0f, {smallest_scale, 0.0f}};
    } else {
        return {smallest_scale, 0.0f};
    }
}

//! @brief Where a thread's part of the data lies, and which threads share its row.
struct Place {
    std::int64_t row;
    std::int64_t first;  //!< the row's first element of this block's slice
    int lane;            //!< the thread's place among the threads of its slice
    int threads;         //!< threads of the slice
};

//! @brief Loads the thread's values of the slice (0 past the row's end), `Width` values per access; returns how many
//!        it loaded: they come first, since its accesses lie in increasing columns.
template <typename T, int Width, int Values>
__device__ __forceinline__ int load_slice(float (&x)[Values], const T* d_row, const Place& at, int num_cols,
                                          bool row_valid)
{
    int count = 0;
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        Chunk<T, Width> chunk{};
        if (row_valid && col < num_cols) {
            chunk = *reinterpret_cast<const Chunk<T, Width>*>(d_row + col);
            count += Width;
        }
        float values[Width];
        widen(chunk, values);
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            x[a * Width + i] = values[i];
        }
    }
    return count;
}

//! @brief gamma's and beta's chunks of the columns of a thread's values.
template <typename T, int Width, int Values>
struct Parameters {
    Chunk<T, Width> gamma[Values / Width], beta[Values / Width];
};

//! @brief gamma's (and beta's: 0 without) chunk at column `col`.
template <typename T, bool WithBeta, int Width>
__device__ __forceinline__ void load_parameter_chunk(const Args<T>& args, std::int64_t col, Chunk<T, Width>& gamma,
                                                     Chunk<T, Width>& beta)
{
    gamma = *reinterpret_cast<const Chunk<T, Width>*>(args.d_gamma + col);
    beta = Chunk<T, Width>{};
    if constexpr (WithBeta) {
        beta = *reinterpret_cast<const Chunk<T, Width>*>(args.d_beta + col);
    }
}

//! @brief Loads gamma's (and beta's) chunks of the thread's columns; those past the row's end stay 0.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ void load_parameters(Parameters<T, Width, Values>& p, const Args<T>& args, const Place& at)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (col < args.num_cols) {
            load_parameter_chunk<T, WithBeta>(args, col, p.gamma[a], p.beta[a]);
        } else {
            p.gamma[a] = Chunk<T, Width>{};
            p.beta[a] = Chunk<T, Width>{};
        }
    }
}

//! @brief The output chunk of the thread's chunk `a` of `x`: (x - mean) * rstd * gamma (+ beta), from gamma's and
//!        beta's chunks (beta's 0 for RMSNorm).
template <typename T, int Width, int Values>
__device__ __forceinline__ Chunk<T, Width> output_chunk(const float (&x)[Values], int a, Row r,
                                                       const Chunk<T, Width>& gamma, const Chunk<T, Width>& beta)
{
    float g[Width], b[Width];
    widen(gamma, g);
    widen(beta, b);
    Chunk<T, Width> y;
#pragma unroll
    for (int i = 0; i < Width; ++i) {
        y.v[i] = from_float<T>((x[a * Width + i] - r.mean) * output_scale(r) * g[i] + b[i]);
    }
    return y;
}

//! @brief Writes (x - mean) * rstd * gamma (+ beta) for each value the thread holds, with gamma and beta from `ahead`
//!        (load_parameters()) or, where it is nullptr, loaded here.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ void store_slice(const float (&x)[Values], const Args<T>& args, std::size_t row_offset,
                                            const Place& at, bool row_valid, Row r,
                                            const Parameters<T, Width, Values>* ahead = nullptr)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col < args.num_cols) {
            Chunk<T, Width> gamma, beta;
            if (ahead != nullptr) {
                gamma = ahead->gamma[a];
                beta = ahead->beta[a];
            } else {
                load_parameter_chunk<T, WithBeta>(args, col, gamma, beta);
            }
            const Chunk<T, Width> y = output_chunk<T, Width>(x, a, r, gamma, beta);
            *reinterpret_cast<Chunk<T, Width>*>(args.d_out + row_offset + col) = y;
        }
    }
}

//! @brief The values of the row at `d_row` that precede it in its window, which starts at the 16-byte boundary at or
//!        before it: 0 to `vector_bytes / sizeof(T) - 1`. Window column `col` is the row's value `col - head`.
template <typename T>
__device__ __forceinline__ int head_of(const T* d_row)
{
    return static_cast<int>(reinterpret_cast<std::uintptr_t>(d_row) % vector_bytes / sizeof(T));
}

//! @brief Whether the chunk of `width` values at window column `col` lies wholly inside the row.
__device__ __forceinline__ bool whole_chunk(std::int64_t col, int width, int head, int num_cols)
{
    return col >= head && col + width <= std::int64_t{head} + num_cols;
}

//! @brief How many of the row's values lie in window columns `[first, first + n)`.
__device__ __forceinline__ int window_count(std::int64_t first, std::int64_t n, int head, int num_cols)
{
    return static_cast<int>(
        max(std::int64_t{0}, min(first + n, std::int64_t{head} + num_cols) - max(first, std::int64_t{head})));
}

//! @brief The thread's first value of the row among its window values: `head` for the thread of the window's first
//!        chunk (its values before are not the row's), else 0 (only that chunk reaches before the row).
template <int Width>
__device__ __forceinline__ int window_begin(const Place& at, int head)
{
    return at.first + at.lane * Width == 0 ? head : 0;
}

//! @brief Loads the thread's chunks of a row's window as floats (0 outside the row, never read); returns how many of
//!        the row's values it loaded, consecutive in `x` from window_begin(). A chunk wholly inside the row is one
//!        access at `d_whole + (col - whole_first)` (the row in global memory, or a block's staged slice of it); a
//!        chunk across the row's start or end is read value by value from `d_row`. `Checked` false: every chunk of
//!        the thread lies inside the row, and none is checked.
template <bool Checked, typename T, int Width, int Values>
__device__ __forceinline__ int load_window_chunks(float (&x)[Values], const T* d_whole, std::int64_t whole_first,
                                                  const T* d_row, const Place& at, int num_cols, int head,
                                                  bool row_valid)
{
    int count = 0;
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (!Checked || (row_valid && whole_chunk(col, Width, head, num_cols))) {
            // One 16-byte load into registers first: widen() on a reference to global memory read a bf16 chunk a
            // byte at a time (softmax's step 9).
            const Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(d_whole + (col - whole_first));
            float values[Width];
            widen(chunk, values);
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                x[a * Width + i] = values[i];
            }
            count += Width;
        } else {
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                const std::int64_t j = col + i - head;  // the value's place in the row
                x[a * Width + i] = 0.0f;
                if (row_valid && j >= 0 && j < num_cols) {
                    x[a * Width + i] = to_float(d_row[j]);
                    ++count;
                }
            }
        }
    }
    return count;
}

//! @brief load_window_chunks(), unchecked where the thread's first chunk starts at or after the row's first value and
//!        its last ends at or before the row's last: one copy of the load loop a thread.
template <typename T, int Width, int Values>
__device__ __forceinline__ int load_window(float (&x)[Values], const T* d_whole, std::int64_t whole_first,
                                           const T* d_row, const Place& at, int num_cols, int head, bool row_valid)
{
    const std::int64_t start = at.first + std::int64_t{at.lane} * Width;  // the thread's first chunk
    const std::int64_t end =  // past its last
        at.first + (static_cast<std::int64_t>(Values / Width - 1) * at.threads + at.lane + 1) * Width;
    if (row_valid && start >= head && end <= std::int64_t{head} + num_cols) {
        return load_window_chunks<false, T, Width, Values>(x, d_whole, whole_first, d_row, at, num_cols, head,
                                                           row_valid);
    }
    return load_window_chunks<true, T, Width, Values>(x, d_whole, whole_first, d_row, at, num_cols, head, row_valid);
}

//! @brief Stages the chunks across the ends of the row at `d_row` into a block's slice of its window (window columns
//!        [`first`, `first` + `slice`) at `d_slice`): the chunk at window column 0 where the row starts past a 16-byte
//!        boundary, and the chunk that holds its last value where it ends before one, the row's values read one by one
//!        and 0 outside the row. The thread that reads the chunk from the slice stages it, and is the only one that
//!        reads it: no barrier. Its reads are issued before the bulk copy of the body is waited for, so that they
//!        wait for memory alongside it.
template <typename T, int Width>
__device__ __forceinline__ void stage_row_ends(T* d_slice, std::int64_t first, int slice, const T* d_row, int num_cols,
                                               int head, int lane, int threads)
{
    const std::int64_t end = std::int64_t{head} + num_cols;  // the window column past the row
    const std::int64_t ends[2] = {head > 0 ? 0 : -1, end % Width != 0 ? end / Width * Width : -1};
    bool staged = false;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const std::int64_t offset = ends[e] - first;  // in the slice
        // The chunk's thread: 32-bit arithmetic, and only in the blocks whose slice holds the chunk.
        if (ends[e] >= 0 && offset >= 0 && offset < slice &&
            static_cast<unsigned>(offset) / Width % static_cast<unsigned>(threads) == static_cast<unsigned>(lane)) {
            Chunk<T, Width> chunk;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                const std::int64_t j = ends[e] + i - head;  // the value's place in the row
                chunk.v[i] = j >= 0 && j < num_cols ? d_row[j] : from_float<T>(0.0f);
            }
            *reinterpret_cast<Chunk<T, Width>*>(d_slice + offset) = chunk;
            staged = true;
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (staged) {  // a later row's bulk copy may write where this chunk lies: order this write before it
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
#endif
}

//! @brief gamma's (and beta's: 0 without) chunk of window column `col` of a row whose head is `head`: one access in
//!        copy `head` of the shifted parameters (shift_parameters_kernel()), 0 for a chunk past the window's end.
template <typename T, bool WithBeta, int Width>
__device__ __forceinline__ void load_window_parameter_chunk(const Args<T>& args, std::int64_t col, int head,
                                                            Chunk<T, Width>& gamma, Chunk<T, Width>& beta)
{
    gamma = Chunk<T, Width>{};
    beta = Chunk<T, Width>{};
    if (col < std::int64_t{head} + args.num_cols) {
        const std::int64_t at = head * args.shifted_stride + col;
        gamma = *reinterpret_cast<const Chunk<T, Width>*>(args.d_gamma + at);
        if constexpr (WithBeta) {
            beta = *reinterpret_cast<const Chunk<T, Width>*>(args.d_beta + at);
        }
    }
}

//! @brief Where a row whose head is `head` (head_of()) lies against its 16-byte boundaries: `first` values before the
//!        first boundary, then its body of `body` values in whole chunks; the rest, fewer than `Width`, after it.
struct Packing {
    int first, body;
};
template <int Width>
__host__ __device__ __forceinline__ Packing packing_of(int head, int num_cols)
{
    const int first = head == 0 ? 0 : Width - head < num_cols ? Width - head : num_cols;
    return {first, (num_cols - first) / Width * Width};
}

//! @brief The row's column of the packed row's column `col`: the body's (the row's from `first` on), then past the
//!        body the values before it, then those after it.
__host__ __device__ __forceinline__ int packed_column(int col, Packing p)
{
    return col < p.body ? p.first + col : col < p.body + p.first ? col - p.body : col;
}

//! @brief Whether windowed rows of `num_cols` values fit a block (their longest window, `num_cols + Width - 1` values,
//!        does): the rows kernel then holds each row packed (load_packed()), as long as the row, and longer rows take
//!        the windows of the cluster or split path.
template <int Width>
constexpr bool packed_rows(int num_cols)
{
    return std::int64_t{num_cols} + (Width - 1) <= block_values;
}

//! @brief Writes `Width` copies of gamma (and, `WithBeta`, of beta after them) of `stride` values each, 0 where a
//!        position holds no column of the row. Windowed (`Packed` false): copy `h` holds gamma[j - h] at position j,
//!        so that a window whose head is `h` finds the parameters of its window column `c` at position `c` of copy
//!        `h`. `Packed`: copy `h` holds at position `c` the parameters of a packed row's column `c` (load_packed()),
//!        the row's head being `h`.
template <typename T, bool WithBeta, int Width, bool Packed>
__global__ void shift_parameters_kernel(const T* __restrict__ d_gamma, const T* __restrict__ d_beta,
                                        T* __restrict__ d_shifted, int num_cols, std::int64_t stride)
{
    const std::int64_t total = Width * stride;
    for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < total;
         i += std::int64_t{gridDim.x} * blockDim.x) {
        const std::int64_t position = i % stride;
        const int copy = static_cast<int>(i / stride);
        std::int64_t j = position - copy;  // the row's column of `position` in copy `copy`
        if constexpr (Packed) {
            const Packing p = packing_of<Width>(copy, num_cols);
            j = position < num_cols ? packed_column(static_cast<int>(position), p) : -1;
        }
        const bool inside = j >= 0 && j < num_cols;
        d_shifted[i] = inside ? d_gamma[j] : from_float<T>(0.0f);
        if constexpr (WithBeta) {
            d_shifted[total + i] = inside ? d_beta[j] : from_float<T>(0.0f);
        }
    }
}

//! @brief load_parameters() for the thread's chunks of a row's window.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ void load_window_parameters(Parameters<T, Width, Values>& p, const Args<T>& args,
                                                       const Place& at, int head)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        load_window_parameter_chunk<T, WithBeta>(args, col, head, p.gamma[a], p.beta[a]);
    }
}

//! @brief Stores a chunk as one 16-byte access at `d` (16-byte aligned). A plain copy of the Chunk was split into 2-
//!        and 4-byte stores by the compiler where the row's other chunks are stored a value at a time (softmax's
//!        step 9).
template <typename T, int Width>
__device__ __forceinline__ void store_chunk(T* d, const Chunk<T, Width>& chunk)
{
    static_assert(sizeof(chunk) == sizeof(uint4), "a chunk is one 16-byte access");
    uint4 bits;
    std::memcpy(&bits, &chunk, sizeof(bits));
    asm("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(d), "r"(bits.x), "r"(bits.y), "r"(bits.z), "r"(bits.w)
        : "memory");
}

//! @brief store_slice() for the thread's chunks of a row's window (load_window()): a chunk wholly inside the row as
//!        one access, one across its start or end value by value, only the row's values.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ void store_window(const float (&x)[Values], const Args<T>& args, std::size_t row_offset,
                                             const Place& at, int head, bool row_valid, Row r,
                                             const Parameters<T, Width, Values>* ahead = nullptr)
{
    T* d_row = args.d_out + row_offset;
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col < std::int64_t{head} + args.num_cols) {
            Chunk<T, Width> gamma, beta;
            if (ahead != nullptr) {
                gamma = ahead->gamma[a];
                beta = ahead->beta[a];
            } else {
                load_window_parameter_chunk<T, WithBeta>(args, col, head, gamma, beta);
            }
            const Chunk<T, Width> y = output_chunk<T, Width>(x, a, r, gamma, beta);
            if (whole_chunk(col, Width, head, args.num_cols)) {
                store_chunk(d_row + (col - head), y);
            } else {
#pragma unroll
                for (int i = 0; i < Width; ++i) {
                    const std::int64_t j = col + i - head;
                    if (j >= 0 && j < args.num_cols) {
                        d_row[j] = y.v[i];
                    }
                }
            }
        }
    }
}

//! @brief The packed row's chunk at column `col` (a row of `num_cols` values): one access where it lies in the body
//!        (16-byte aligned at `d_row + p.first`), else value by value, `T(0)` past the row's end.
template <typename T, int Width>
__device__ __forceinline__ Chunk<T, Width> packed_chunk(const T* d_row, int col, int num_cols, Packing p)
{
    if (col + Width <= p.body) {
        return *reinterpret_cast<const Chunk<T, Width>*>(d_row + p.first + col);
    }
    Chunk<T, Width> chunk{};
#pragma unroll
    for (int i = 0; i < Width; ++i) {
        if (col + i < num_cols) {
            chunk.v[i] = d_row[packed_column(col + i, p)];
        }
    }
    return chunk;
}

//! @brief load_slice() of a packed row (the rows kernel: a row's threads from its column 0): a chunk of the body as one
//!        access, the chunks past the body (at most two a row) value by value.
template <typename T, int Width, int Values>
__device__ __forceinline__ int load_packed(float (&x)[Values], const T* d_row, const Place& at, int num_cols,
                                           Packing p, bool row_valid)
{
    int count = 0;
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const int col = (a * at.threads + at.lane) * Width;
        Chunk<T, Width> chunk{};
        if (row_valid && col < num_cols) {
            chunk = packed_chunk<T, Width>(d_row, col, num_cols, p);
            count += min(Width, num_cols - col);
        }
        float values[Width];
        widen(chunk, values);
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            x[a * Width + i] = values[i];
        }
    }
    return count;
}

//! @brief `args` with gamma and beta at copy `head` of their packed copies (shift_parameters_kernel()), whose position
//!        `c` holds the parameters of the packed row's column `c`: every chunk of them is then one access, as an
//!        aligned row's.
template <typename T>
__device__ __forceinline__ Args<T> packed_parameters_of(Args<T> args, int head)
{
    args.d_gamma += head * args.shifted_stride;
    if (args.d_beta != nullptr) {
        args.d_beta += head * args.shifted_stride;
    }
    return args;
}

//! @brief store_slice() of a packed row (load_packed()), with `args`' gamma and beta packed as the row is
//!        (packed_parameters_of()): a chunk of the body as one access, the chunk past the body value by value, each
//!        value to its column.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ void store_packed(const float (&x)[Values], const Args<T>& args, std::size_t row_offset,
                                             const Place& at, Packing p, bool row_valid, Row r,
                                             const Parameters<T, Width, Values>* ahead = nullptr)
{
    T* d_row = args.d_out + row_offset;
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const int col = (a * at.threads + at.lane) * Width;
        if (row_valid && col < args.num_cols) {
            Chunk<T, Width> gamma, beta;
            if (ahead != nullptr) {
                gamma = ahead->gamma[a];
                beta = ahead->beta[a];
            } else {
                load_parameter_chunk<T, WithBeta>(args, col, gamma, beta);
            }
            const Chunk<T, Width> y = output_chunk<T, Width>(x, a, r, gamma, beta);
            if (col + Width <= p.body) {
                store_chunk(d_row + p.first + col, y);
            } else {
#pragma unroll
                for (int i = 0; i < Width; ++i) {
                    if (col + i < args.num_cols) {
                        d_row[packed_column(col + i, p)] = y.v[i];
                    }
                }
            }
        }
    }
}

//! @brief The output chunk of the thread's chunk `a` of `x`, with gamma's (and beta's) chunk from shared memory.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ Chunk<T, Width> staged_output(const float (&x)[Values], int a, Row r, const T* gamma,
                                                         const T* beta)
{
    const Chunk<T, Width> g = *reinterpret_cast<const Chunk<T, Width>*>(gamma);
    Chunk<T, Width> b{};
    if constexpr (WithBeta) {
        b = *reinterpret_cast<const Chunk<T, Width>*>(beta);
    }
    return output_chunk<T, Width>(x, a, r, g, b);
}

//! @brief LayerNorm keeps each row's mean and rstd.
template <typename T>
__device__ __forceinline__ void write_row(const Args<T>& args, std::int64_t row, Row r)
{
    if (args.d_mean != nullptr) {
        args.d_mean[row] = r.mean;
        args.d_rstd[row] = r.rstd;
    }
}

//! @brief The row of each group of threads is read once into registers, reduced and written. `Lanes` 1 to 32: rows
//!        of `Lanes` lanes of a warp each (a power of two), several rows per block; their reductions are unrolled
//!        shuffles. `Lanes` == `whole_block`: a row per block, reduced through shared memory. `Stats`: Moments
//!        (LayerNorm) or Squares (RMSNorm). `ParametersAhead`: gamma and beta are loaded with the row
//!        (parameters_ahead), in blocks of at most `short_rows_block` threads. `Windowed`: rows off 16-byte
//!        boundaries, packed (load_packed()): the body, then the values before and after it; their heads vary from row
//!        to row.
template <typename T, typename Stats, int Width, int Values, bool ParametersAhead, bool Windowed, int Lanes>
static __global__ void __launch_bounds__(ParametersAhead ? short_rows_block
                                                         : row_max_threads<T, Stats, Width, Values>,
                                         row_min_blocks<T, Stats, Width, Values, Windowed>)
    norm_rows_kernel(Args<T> args)
{
    static_assert(Lanes == whole_block || (Lanes > 0 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0),
                  "a power of two of lanes, at most a warp, or the whole block");
    static_assert(max_block_threads<Values> > 32, "a row per block is wider than a warp");
    __shared__ GroupScratch scratch;  // a row per block's reductions (none where the row fits a warp)
    // A constant either way: past a warp, reduce_group() takes the block-wide path alone.
    constexpr int group_threads = Lanes != whole_block ? Lanes : max_block_threads<Values>;
    const Place at = [] {
        if constexpr (Lanes != whole_block) {  // a power of two: shifts, not a division
            return Place{static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / Lanes) + threadIdx.x / Lanes, 0,
                         static_cast<int>(threadIdx.x % Lanes), Lanes};
        } else {
            return Place{blockIdx.x, 0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
        }
    }();
    const bool row_valid = at.row < args.num_rows;  // lanes past the last row still take part in the shuffles
    const std::size_t row_offset = static_cast<std::size_t>(row_valid ? at.row : 0) * args.num_cols;
    float x[Values];
    constexpr bool with_beta = std::is_same_v<Stats, Moments>;
    Parameters<T, Width, Values> parameters;
    int count = 0;
    Packing packing{};
    int head = 0;  // windowed: how far the row starts past a 16-byte boundary
    if constexpr (Windowed) {
        head = head_of(args.d_in + row_offset);  // d_out's rows: the same (normalize() checks)
        packing = packing_of<Width>(head, args.num_cols);
        count = load_packed<T, Width, Values>(x, args.d_in + row_offset, at, args.num_cols, packing, row_valid);
        if constexpr (ParametersAhead) {
            load_parameters<T, with_beta>(parameters, packed_parameters_of(args, head), at);
        }
    } else {
        count = load_slice<T, Width, Values>(x, args.d_in + row_offset, at, args.num_cols, row_valid);
        if constexpr (ParametersAhead) {
            load_parameters<T, with_beta>(parameters, args, at);
        }
    }
    const int group_count =
        static_cast<int>(max(std::int64_t{0}, min(args.num_cols - at.first, std::int64_t{at.threads} * Values)));
    const float shift = row_valid ? to_float(args.d_in[row_offset]) : 0.0f;
    const Stats s =
        group_statistics<plain_squares<T, Width>, Width>(x, count, group_count, shift, group_threads, scratch, Stats{});
    const Row r = row_of(s, args.num_cols, args.epsilon);
    if constexpr (Windowed) {
        store_packed<T, with_beta>(x, packed_parameters_of(args, head), row_offset, at, packing, row_valid, r,
                                   ParametersAhead ? &parameters : nullptr);
    } else {
        store_slice<T, with_beta>(x, args, row_offset, at, row_valid, r, ParametersAhead ? &parameters : nullptr);
    }
    if (row_valid && at.lane == 0) {
        write_row(args, at.row, r);
    }
}

//! @brief Rows split over the blocks of a cluster, each block a slice of `blockDim.x * Values` values of every row;
//!        the grid's clusters take rows in turn (persistent). A block's slices of its next `cluster_stages` rows
//!        arrive in shared memory by bulk copy while it works on this one; it pushes its statistics into every block
//!        of the cluster (st.async), whose barrier completes when all have landed. No block waits for a cluster-wide
//!        barrier, nor for a load of a later row. The block's slices of gamma and beta stay in shared memory for
//!        every row. Rows are 16-byte aligned (`Width` values per access). `Windowed`: a block's slice is part of the
//!        row's window; the bulk copy moves the whole 16-byte chunks of the row in it, the threads that hold a chunk
//!        across the row's start or end stage it beside them (stage_row_ends()) and write it value by value, and the
//!        block's slices of gamma and beta are those of the shifted copy of the rows' head, the same for every row of
//!        the cluster
//!        (launch_clusters()).
template <typename T, typename Stats, int Width, int Values, bool Windowed = false>
static __global__ void __launch_bounds__(cluster_block_threads, cluster_min_blocks<Stats, Values>)
    cluster_norm_kernel(Args<T> args)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    static_assert(Width * sizeof(T) == vector_bytes, "bulk copies move whole 16-byte accesses");
    extern __shared__ __align__(16) unsigned char stages[];  // cluster_stages slices of x, then gamma's and beta's
    __shared__ std::uint64_t slice_landed[cluster_stages];
    __shared__ std::uint64_t parameters_landed;              // gamma and beta
    __shared__ std::uint64_t stats_landed[2];                // even and odd turns
    __shared__ GroupScratch scratch[2];
    __shared__ alignas(16) Stats block_stats[2][max_cluster_blocks];
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int blocks = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int slice = static_cast<int>(blockDim.x) * Values;
    const std::int64_t first = std::int64_t{rank} * slice;
    const int count = static_cast<int>(min(std::int64_t{slice}, max(std::int64_t{0}, args.num_cols - first)));
    const unsigned slice_bytes = static_cast<unsigned>(count * sizeof(T));
    const auto stage = [&](int s) { return reinterpret_cast<T*>(stages) + s * slice; };
    const auto offset = [&](int a) { return (a * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * Width; };
    const auto load_row = [&](std::int64_t row, int s) {  // by thread 0
        if constexpr (Windowed) {  // the whole chunks of the row in the slice: window columns [inner_first, inner_end)
            const T* d_row = args.d_in + row * args.num_cols;
            const int head = head_of(d_row);
            const std::int64_t inner_first = max(first, std::int64_t{head > 0 ? Width : 0});
            const std::int64_t inner_end = min(first + slice, (std::int64_t{head} + args.num_cols) / Width * Width);
            const unsigned bytes =
                inner_end > inner_first ? static_cast<unsigned>((inner_end - inner_first) * sizeof(T)) : 0;
            mbarrier_arrive_expect_bytes(&slice_landed[s], bytes);
            if (bytes > 0) {
                bulk_load(stage(s) + (inner_first - first), d_row + (inner_first - head), bytes, &slice_landed[s]);
            }
        } else {
            mbarrier_arrive_expect_bytes(&slice_landed[s], slice_bytes);
            if (slice_bytes > 0) {
                bulk_load(stage(s), args.d_in + row * args.num_cols + first, slice_bytes, &slice_landed[s]);
            }
        }
    };
    constexpr bool with_beta = std::is_same_v<Stats, Moments>;
    const T* gamma = stage(cluster_stages);
    const T* beta = stage(cluster_stages + 1);
    if (threadIdx.x == 0) {
        for (int s = 0; s < cluster_stages; ++s) {
            mbarrier_init(&slice_landed[s]);
        }
        mbarrier_init(&parameters_landed);
        mbarrier_init(&stats_landed[0]);
        mbarrier_init(&stats_landed[1]);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster.sync();  // every block's barriers are set before any block pushes to them
    const std::int64_t clusters = gridDim.x / blocks;
    const std::int64_t first_row = blockIdx.x / blocks;
    if (threadIdx.x == 0) {
        // The block's slices of gamma and beta; windowed, of the shifted copy of the head of every row the cluster
        // takes (its first row's: launch_clusters()).
        const std::int64_t copy = Windowed ? head_of(args.d_in + first_row * args.num_cols) * args.shifted_stride : 0;
        const std::int64_t length = Windowed ? args.shifted_stride : args.num_cols;
        const unsigned parameter_bytes =
            static_cast<unsigned>(min(std::int64_t{slice}, max(std::int64_t{0}, length - first)) * sizeof(T));
        mbarrier_arrive_expect_bytes(&parameters_landed, row_parameters<Stats> * parameter_bytes);
        if (parameter_bytes > 0) {
            bulk_load(stage(cluster_stages), args.d_gamma + copy + first, parameter_bytes, &parameters_landed);
            if constexpr (with_beta) {
                bulk_load(stage(cluster_stages + 1), args.d_beta + copy + first, parameter_bytes, &parameters_landed);
            }
        }
        for (int s = 0; s < cluster_stages && first_row + s * clusters < args.num_rows; ++s) {
            load_row(first_row + s * clusters, s);
        }
    }
    const int lane = static_cast<int>(threadIdx.x) % 32;
    mbarrier_wait_cluster(&parameters_landed, 0);
    int turn = 0;
    for (std::int64_t row = first_row; row < args.num_rows; row += clusters, ++turn) {
        const int s = turn % cluster_stages, half = turn % 2;
        // The slice's window columns in stage s; the row's values are those at offsets [lo, hi) of it (the whole
        // slice's first `count` where rows start on a 16-byte boundary), and `staged` of them are in shared memory.
        int head = 0, lo = 0, hi = count, staged = count;
        float shift = 0.0f;  // a value of the slice: exact sums for equal values
        if constexpr (Windowed) {
            const T* d_row = args.d_in + row * args.num_cols;
            head = head_of(d_row);
            lo = static_cast<int>(max(std::int64_t{0}, head - first));
            hi = static_cast<int>(min(std::int64_t{slice}, std::int64_t{head} + args.num_cols - first));
            staged = static_cast<int>(
                min(std::int64_t{slice}, (std::int64_t{head} + args.num_cols + Width - 1) / Width * Width - first));
            if (hi > lo) {
                shift = to_float(d_row[first + lo - head]);
            }
            stage_row_ends<T, Width>(stage(s), first, slice, d_row, args.num_cols, head, static_cast<int>(threadIdx.x),
                                     static_cast<int>(blockDim.x));
        }
        mbarrier_wait_cluster(&slice_landed[s], (turn / cluster_stages) % 2);
        float x[Values];
        int thread_count = 0;
#pragma unroll
        for (int a = 0; a < Values / Width; ++a) {
            Chunk<T, Width> chunk{};
            if (offset(a) < staged) {
                chunk = *reinterpret_cast<const Chunk<T, Width>*>(stage(s) + offset(a));
                thread_count += Windowed ? max(0, min(offset(a) + Width, hi) - max(offset(a), lo)) : Width;
            }
            float values[Width];
            widen(chunk, values);
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                x[a * Width + i] = values[i];
            }
        }
        if constexpr (!Windowed) {
            shift = count > 0 ? to_float(stage(s)[0]) : 0.0f;
        }
        const int begin = Windowed ? max(0, lo - offset(0)) : 0;  // the thread's first value of the row
        const int row_count = Windowed ? max(0, hi - lo) : count;
        const int threads = static_cast<int>(blockDim.x);
        constexpr bool plain = plain_squares<T, Width>;
        const Stats block =
            group_statistics<plain, Width>(x, thread_count, row_count, shift, threads, scratch[half], Stats{}, begin);
        if (threadIdx.x == 0) {  // past the statistics' barrier, no thread reads stage s
            if (row + cluster_stages * clusters < args.num_rows) {
                load_row(row + cluster_stages * clusters, s);
            }
            mbarrier_arrive_expect_bytes(&stats_landed[half], blocks * sizeof(Stats));
        }
        if (threadIdx.x < blocks) {
            push(&block_stats[half][rank], &stats_landed[half], threadIdx.x, block);
        }
        mbarrier_wait_cluster(&stats_landed[half], (turn / 2) % 2);
        const int width = lanes_for(blocks);
        const Stats mine = lane % width < blocks ? block_stats[half][lane % width] : no_values<Stats>();
        const Row r = row_of(merge_lanes(mine, width), args.num_cols, args.epsilon);
        if constexpr (Windowed) {  // the slice's window columns at d_slice; the row's values at offsets [lo, hi)
            T* d_slice = args.d_out + row * args.num_cols - head + first;
#pragma unroll
            for (int a = 0; a < Values / Width; ++a) {
                if (offset(a) < hi && offset(a) + Width > lo) {
                    const Chunk<T, Width> y = staged_output<T, with_beta, Width>(x, a, r, gamma + offset(a), beta + offset(a));
                    if (offset(a) >= lo && offset(a) + Width <= hi) {
                        store_chunk(d_slice + offset(a), y);
                    } else {  // a chunk across the row's start or end
#pragma unroll
                        for (int i = 0; i < Width; ++i) {
                            if (offset(a) + i >= lo && offset(a) + i < hi) {
                                d_slice[offset(a) + i] = y.v[i];
                            }
                        }
                    }
                }
            }
        } else {
            T* d_slice = args.d_out + row * args.num_cols + first;
#pragma unroll
            for (int a = 0; a < Values / Width; ++a) {
                if (offset(a) < count) {
                    *reinterpret_cast<Chunk<T, Width>*>(d_slice + offset(a)) =
                        staged_output<T, with_beta, Width>(x, a, r, gamma + offset(a), beta + offset(a));
                }
            }
        }
        if (rank == 0 && threadIdx.x == 0) {
            write_row(args, row, r);
        }
    }
    cluster.sync();  // no block leaves while a push to it may be in flight
#endif
}

//! @brief Rows longer than a cluster, first pass: each block's statistics of its slice, into `d_partials`.
template <typename T, typename Stats, int Width, bool Windowed = false>
static __global__ void __launch_bounds__(split_block_threads)
    split_partials_kernel(Args<T> args, Stats* d_partials, int blocks_per_row)
{
    __shared__ GroupScratch scratch;
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * args.num_cols;
    const T* d_row = args.d_in + row_offset;
    float x[split_values];
    int count = 0, slice_count = 0, begin = 0;
    if constexpr (Windowed) {
        const int head = head_of(d_row);
        count = load_window<T, Width, split_values>(x, d_row, head, d_row, at, args.num_cols, head, true);
        slice_count = window_count(at.first, std::int64_t{at.threads} * split_values, head, args.num_cols);
        begin = window_begin<Width>(at, head);
    } else {
        count = load_slice<T, Width, split_values>(x, d_row, at, args.num_cols, true);
        slice_count = static_cast<int>(
            max(std::int64_t{0}, min(args.num_cols - at.first, std::int64_t{at.threads} * split_values)));
    }
    const Stats block = group_statistics<plain_squares<T, Width>, Width>(x, count, slice_count, to_float(d_row[0]),
                                                                  at.threads, scratch, Stats{}, begin);
    if (threadIdx.x == 0) {
        d_partials[blockIdx.x] = block;
    }
}

//! @brief Rows longer than a cluster, second pass: one block per row merges its blocks' statistics into `d_rows`.
template <typename T, typename Stats>
static __global__ void __launch_bounds__(split_block_threads)
    split_merge_kernel(Args<T> args, const Stats* d_partials, Row* d_rows, int blocks_per_row)
{
    __shared__ Stats warp_stats[32];
    Stats s = no_values<Stats>();
    for (int b = threadIdx.x; b < blocks_per_row; b += blockDim.x) {
        s = merge(s, d_partials[static_cast<std::size_t>(blockIdx.x) * blocks_per_row + b]);
    }
    s = merge_block(s, warp_stats, no_values<Stats>());
    if (threadIdx.x == 0) {
        d_rows[blockIdx.x] = row_of(s, args.num_cols, args.epsilon);
        write_row(args, blockIdx.x, d_rows[blockIdx.x]);
    }
}

//! @brief Rows longer than a cluster, third pass: each block reads its slice again and writes it.
template <typename T, bool WithBeta, int Width, bool Windowed = false>
static __global__ void __launch_bounds__(split_block_threads)
    split_store_kernel(Args<T> args, const Row* d_rows, int blocks_per_row)
{
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * args.num_cols;
    float x[split_values];
    if constexpr (Windowed) {
        const int head = head_of(args.d_in + row_offset);
        load_window<T, Width, split_values>(x, args.d_in + row_offset, head, args.d_in + row_offset, at, args.num_cols,
                                            head, true);
        store_window<T, WithBeta, Width, split_values>(x, args, row_offset, at, head, true, d_rows[at.row]);
    } else {
        load_slice<T, Width, split_values>(x, args.d_in + row_offset, at, args.num_cols, true);
        store_slice<T, WithBeta, Width, split_values>(x, args, row_offset, at, true, d_rows[at.row]);
    }
}

//! @brief How the launcher lays rows over threads, from the row's length.
struct Layout {
    int values = 16;            //!< values per thread
    int group_threads = 0;      //!< threads per row (<= 32) or per block of a row's slice
    int block_threads = 0;
    int cluster_blocks = 0;     //!< blocks per row of the cluster path, 0 without
    int split_blocks = 0;       //!< blocks per row of the split path, 0 without
    std::int64_t blocks = 0;    //!< the grid (the cluster path: one cluster; the launcher fills the GPU with them)
};

//! @brief The layout of rows of `num_cols` values, `values` per thread; clusters of up to `cluster_limit` blocks
//!        (0: none).
inline Layout choose_layout(int num_rows, int num_cols, int values, int cluster_limit)
{
    const std::int64_t threads = (static_cast<std::int64_t>(num_cols) + values - 1) / values;
    const int max_threads = block_values / values;
    Layout l;
    l.values = values;
    if (threads <= 32) {  // a power of two of lanes per row, several rows per block
        l.group_threads = 1;
        while (l.group_threads < threads) {
            l.group_threads *= 2;
        }
        l.block_threads = short_rows_block;
        const int rows_per_block = short_rows_block / l.group_threads;
        l.blocks = (std::int64_t{num_rows} + rows_per_block - 1) / rows_per_block;  // no int overflow at INT_MAX
    } else if (threads <= max_threads) {  // a block per row
        l.group_threads = l.block_threads = static_cast<int>((threads + 31) / 32 * 32);
        l.blocks = num_rows;
    } else if (threads <= std::int64_t{cluster_limit} * cluster_block_threads) {  // a cluster per row
        l.cluster_blocks = static_cast<int>(
            std::min<std::int64_t>(cluster_limit, (threads + cluster_block_threads - 1) / cluster_block_threads));
        const std::int64_t per_block = (threads + l.cluster_blocks - 1) / l.cluster_blocks;
        l.group_threads = l.block_threads = static_cast<int>((per_block + 31) / 32 * 32);
        l.blocks = l.cluster_blocks;
    } else {  // blocks of a row that merge their statistics through global memory
        const std::int64_t split_threads = (static_cast<std::int64_t>(num_cols) + split_values - 1) / split_values;
        l.values = split_values;
        l.block_threads = split_block_threads;
        l.split_blocks = static_cast<int>((split_threads + split_block_threads - 1) / split_block_threads);
        l.blocks = std::int64_t{num_rows} * l.split_blocks;
    }
    return l;
}

//! @brief The launch of clusters of `cluster_blocks` blocks of `block_threads` threads, each with its shared memory
//!        for `cluster_block_slices` slices (x's stages, gamma's and beta's); its grid is one cluster.
template <typename T, typename Stats, int Width, int Values>
inline void cluster_config(cudaLaunchConfig_t& config, cudaLaunchAttribute& cluster, int cluster_blocks,
                           int block_threads, cudaStream_t stream)
{
    config = {};
    config.gridDim = dim3(cluster_blocks);
    config.blockDim = dim3(block_threads);
    config.dynamicSmemBytes = std::size_t{cluster_block_slices} * block_threads * Values * sizeof(T);
    config.stream = stream;
    cluster = {};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim = {static_cast<unsigned>(cluster_blocks), 1, 1};
    config.attrs = &cluster;
    config.numAttrs = 1;
}

//! @brief How many clusters of `cluster_blocks` blocks of `block_threads` threads the current device holds at once:
//!        0 where it launches no clusters or the kernel was not built for sm_90 or newer. The runtime is asked once
//!        per device, shape and host thread (a launch would otherwise pay for its queries, or for a lock), and the
//!        kernel's shared-memory limit is raised to its largest blocks' on each device.
template <typename T, typename Stats, int Width, int Values, bool Windowed>
inline int active_clusters(int cluster_blocks, int block_threads)
{
    thread_local std::map<std::tuple<int, int, int>, int> known;  // (device, cluster_blocks, block_threads) -> clusters
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        return 0;
    }
    const auto [entry, unknown] = known.try_emplace({device, cluster_blocks, block_threads}, 0);
    if (!unknown) {
        return entry->second;
    }
    const auto kernel = cluster_norm_kernel<T, Stats, Width, Values, Windowed>;
    const int largest_shared =
        cluster_block_slices * cluster_block_threads * Values * static_cast<int>(sizeof(T));
    int cluster_launch = 0;
    cudaFuncAttributes attributes{};
    cudaLaunchConfig_t config;
    cudaLaunchAttribute cluster;
    cluster_config<T, Stats, Width, Values>(config, cluster, cluster_blocks, block_threads, 0);
    if (cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
        cluster_launch != 0 && cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
        attributes.binaryVersion >= 90 &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, largest_shared) == cudaSuccess &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
        cudaOccupancyMaxActiveClusters(&entry->second, kernel, &config) != cudaSuccess) {
        entry->second = 0;
    }
    (void)cudaGetLastError();  // not an error of a launch: the cluster path is not taken
    return entry->second;
}

//! @brief The most blocks of a cluster of the cluster kernel on this device: 16 where the GPU takes clusters beyond
//!        the portable 8 at the largest blocks; 0 where it launches no clusters.
template <typename T, typename Stats, int Width, int Values, bool Windowed>
inline int cluster_limit()
{
    for (const int blocks : {max_cluster_blocks, portable_cluster_blocks}) {
        if (active_clusters<T, Stats, Width, Values, Windowed>(blocks, cluster_block_threads) >= 1) {
            return blocks;
        }
    }
    return 0;
}

//! @brief The rows after which a row's head (how far past a 16-byte boundary it starts) repeats: 1 where rows are a
//!        multiple of 16 bytes long, 4 for fp32 rows of odd length, 8 for bf16.
template <typename T>
inline int head_period(int num_cols)
{
    const int row_bytes = static_cast<int>(std::int64_t{num_cols} * sizeof(T) % vector_bytes);
    return vector_bytes / std::gcd(row_bytes, vector_bytes);
}

//! @brief The clusters of the windowed cluster path, from the `active` ones the GPU holds at once (at most
//!        `num_rows`): the rows of a cluster, `clusters` apart, must all have one head, so a multiple of the
//!        head_period(), or one row each where there are fewer rows (clusters beyond those the GPU holds at once run
//!        after them).
template <typename T>
inline int windowed_clusters(int active, int num_rows, int num_cols)
{
    const int period = head_period<T>(num_cols);
    return active >= period ? active - active % period : std::min(period, num_rows);
}

//! @brief The cluster path: as many clusters as the GPU holds at once, but no more than rows (windowed_clusters()).
template <typename T, typename Stats, int Width, int Values, bool Windowed>
inline cudaError_t launch_clusters(const Layout& l, const Args<T>& args, cudaStream_t stream)
{
    cudaLaunchConfig_t config;
    cudaLaunchAttribute cluster;
    cluster_config<T, Stats, Width, Values>(config, cluster, l.cluster_blocks, l.block_threads, stream);
    int clusters = std::min(active_clusters<T, Stats, Width, Values, Windowed>(l.cluster_blocks, l.block_threads),
                            args.num_rows);
    if constexpr (Windowed) {
        clusters = windowed_clusters<T>(clusters, args.num_rows, args.num_cols);
    }
    config.gridDim = dim3(static_cast<unsigned>(std::max(clusters, 1) * l.cluster_blocks));
    return cudaLaunchKernelEx(&config, cluster_norm_kernel<T, Stats, Width, Values, Windowed>, args);
}

//! @brief The rows kernel for layout `l`: rows of a warp or less with their lanes as a template argument, else a row
//!        per block. Rows of a warp or less load gamma and beta ahead wherever parameters_ahead allows it, so only
//!        those kernels are built with `Lanes` 1 to 32; and they hold at most 32 values a thread (longer rows, of 64,
//!        take more than a warp).
template <typename T, typename Stats, int Width, int Values, bool ParametersAhead, bool Windowed>
inline cudaError_t launch_rows(const Layout& l, const Args<T>& args, cudaStream_t stream)
{
    const auto rows = [&](auto lanes) {
        norm_rows_kernel<T, Stats, Width, Values, ParametersAhead, Windowed, decltype(lanes)::value>
            <<<static_cast<unsigned>(l.blocks), l.block_threads, 0, stream>>>(args);
        return cudaGetLastError();
    };
    if (l.group_threads > 32) {
        return rows(std::integral_constant<int, whole_block>{});
    }
    if constexpr (Values <= 32 && ParametersAhead == parameters_ahead<T, Stats, Width, Values>) {
        switch (l.group_threads) {
        case 1: return rows(std::integral_constant<int, 1>{});
        case 2: return rows(std::integral_constant<int, 2>{});
        case 4: return rows(std::integral_constant<int, 4>{});
        case 8: return rows(std::integral_constant<int, 8>{});
        case 16: return rows(std::integral_constant<int, 16>{});
        case 32: return rows(std::integral_constant<int, 32>{});
        default: break;
        }
    }
    return cudaErrorInvalidConfiguration;  // not a layout choose_layout() gives these values a thread
}

//! @brief The launch of rows of `num_cols` values, `Values` a thread. `Windowed`: rows not 16-byte aligned (`Width`
//!        values an access); those longer than a block hold each row's window, laid out for the longest:
//!        `num_cols + Width - 1` values (at most INT_MAX: normalize() checks); the rows kernel packs each row into
//!        `num_cols` values (load_packed()).
template <typename T, typename Stats, int Width, int Values, bool Windowed = false>
inline cudaError_t launch(void* d_temp_storage, std::size_t& temp_storage_bytes, const Args<T>& args,
                          cudaStream_t stream)
{
    static_assert(Values % Width == 0 && split_values % Width == 0, "a thread's values are whole accesses");
    static_assert(!Windowed || Width * sizeof(T) == vector_bytes, "a window is of 16-byte chunks");
    constexpr bool with_beta = std::is_same_v<Stats, Moments>;
    // The cluster path copies whole rows of 16-byte accesses, and rows that long hold 32 or 64 values a thread.
    constexpr bool bulk_copies = Width * sizeof(T) == vector_bytes && Values >= split_values;
    const int span = Windowed ? args.num_cols + (Width - 1) : args.num_cols;  // the longest window
    int limit = 0;
    if constexpr (bulk_copies) {
        limit = span > block_values ? cluster_limit<T, Stats, Width, Values, Windowed>() : 0;
    }
    Layout l = choose_layout(args.num_rows, span, Values, limit);
    const bool packed = Windowed && l.cluster_blocks == 0 && l.split_blocks == 0;  // the rows kernel: packed rows
    if (packed) {
        l = choose_layout(args.num_rows, args.num_cols, Values, 0);  // of num_cols values
    }
    if (l.blocks > INT32_MAX) {
        return cudaErrorInvalidValue;
    }
    // The workspace: windowed, the shifted copies of gamma (and beta) first, 16-byte aligned within it (its start
    // need only be 4-byte aligned); then the split path's partials and rows.
    const std::int64_t stride = Windowed ? (std::int64_t{span} + Width - 1) / Width * Width : 0;
    const std::size_t shifted_bytes =
        Windowed ? static_cast<std::size_t>(Width * stride) * sizeof(T) * (with_beta ? 2 : 1) + vector_bytes - 1 : 0;
    const std::size_t partial_bytes = static_cast<std::size_t>(l.blocks) * sizeof(Stats);
    const std::size_t rows_offset = (partial_bytes + alignof(Row) - 1) / alignof(Row) * alignof(Row);
    const std::size_t split_bytes = l.split_blocks > 0 ? rows_offset + args.num_rows * sizeof(Row) : 0;
    const std::size_t split_offset = (shifted_bytes + alignof(Moments) - 1) / alignof(Moments) * alignof(Moments);
    const std::size_t needed = std::max<std::size_t>(split_offset + split_bytes, 1);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    Args<T> kernel_args = args;  // windowed: gamma and beta pointing at their shifted copies
    if constexpr (Windowed) {
        const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(d_temp_storage);
        T* d_shifted = reinterpret_cast<T*>((base + vector_bytes - 1) / vector_bytes * vector_bytes);
        const std::int64_t values = Width * stride;
        const unsigned shift_blocks = static_cast<unsigned>(
            std::min<std::int64_t>((values + shift_block_threads - 1) / shift_block_threads, shift_max_blocks));
        if (packed) {
            shift_parameters_kernel<T, with_beta, Width, true><<<shift_blocks, shift_block_threads, 0, stream>>>(
                args.d_gamma, args.d_beta, d_shifted, args.num_cols, stride);
        } else {
            shift_parameters_kernel<T, with_beta, Width, false><<<shift_blocks, shift_block_threads, 0, stream>>>(
                args.d_gamma, args.d_beta, d_shifted, args.num_cols, stride);
        }
        if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
            return e;
        }
        kernel_args.d_gamma = d_shifted;
        kernel_args.d_beta = with_beta ? d_shifted + values : nullptr;
        kernel_args.shifted_stride = stride;
    }
    const unsigned grid = static_cast<unsigned>(l.blocks);
    if (l.split_blocks > 0) {
        char* d_split = static_cast<char*>(d_temp_storage) + split_offset;
        Stats* d_partials = reinterpret_cast<Stats*>(d_split);
        Row* d_rows = reinterpret_cast<Row*>(d_split + rows_offset);
        split_partials_kernel<T, Stats, Width, Windowed><<<grid, l.block_threads, 0, stream>>>(kernel_args, d_partials,
                                                                                              l.split_blocks);
        split_merge_kernel<T, Stats><<<args.num_rows, split_block_threads, 0, stream>>>(kernel_args, d_partials, d_rows,
                                                                                        l.split_blocks);
        split_store_kernel<T, with_beta, Width, Windowed><<<grid, l.block_threads, 0, stream>>>(kernel_args, d_rows,
                                                                                                l.split_blocks);
        return cudaGetLastError();
    }
    if constexpr (bulk_copies) {
        if (l.cluster_blocks > 0) {
            return launch_clusters<T, Stats, Width, Values, Windowed>(l, kernel_args, stream);
        }
    }
    if (l.block_threads > row_max_threads<T, Stats, Width, Values>) {  // the layout outgrew the kernel's bounds
        return cudaErrorInvalidConfiguration;
    }
    if constexpr (parameters_ahead<T, Stats, Width, Values>) {
        if (l.group_threads <= parameters_ahead_row_threads) {
            return launch_rows<T, Stats, Width, Values, true, Windowed>(l, kernel_args, stream);
        }
    }
    return launch_rows<T, Stats, Width, Values, false, Windowed>(l, kernel_args, stream);
}

//! @brief Rows an SM from which bf16 LayerNorm rows of `one_warp_shortest` to `one_warp_longest` values take one warp
//!        (or part of one) each on a GPU of fast memory: with fewer, fewer threads a row leave loads out of flight.
constexpr int many_rows_per_sm = 192;
constexpr int one_warp_shortest = 129;   //!< shorter rows keep step 10's blocks of short rows (16 values a thread)
constexpr int one_warp_longest = 1024;   //!< a warp's 32 lanes of 32 values

//! @brief Values each thread holds: values_per_thread(), but 32 in bf16 LayerNorm rows of `one_warp_shortest` to
//!        `one_warp_longest` values on a GPU of fast memory whose `sms` SMs have at least `many_rows_per_sm` rows
//!        each, so that a row lies within one warp.
template <typename T, typename Stats>
inline int values_for_rows(int num_rows, int num_cols, Memory memory, int sms)
{
    const bool one_warp = sizeof(T) == 2 && std::is_same_v<Stats, Moments> && memory == Memory::fast && sms >= 1 &&
                          num_cols >= one_warp_shortest && num_cols <= one_warp_longest &&
                          num_rows / sms >= many_rows_per_sm;
    return one_warp ? 32 : values_per_thread<T, Stats>(num_cols, memory);
}

//! @brief launch() of 16-byte accesses with `values` values a thread (values_for_rows()).
template <typename T, typename Stats, bool Windowed>
inline cudaError_t launch_values(int values, void* d_temp_storage, std::size_t& temp_storage_bytes,
                                 const Args<T>& args, cudaStream_t stream)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    return values == 8    ? launch<T, Stats, width, 8, Windowed>(d_temp_storage, temp_storage_bytes, args, stream)
           : values == 16 ? launch<T, Stats, width, 16, Windowed>(d_temp_storage, temp_storage_bytes, args, stream)
           : values == 64 ? launch<T, Stats, width, 64, Windowed>(d_temp_storage, temp_storage_bytes, args, stream)
                          : launch<T, Stats, width, 32, Windowed>(d_temp_storage, temp_storage_bytes, args, stream);
}

//! @brief Checks the arguments and picks the access width (16 bytes where every row and pointer allows it) and the
//!        values a thread for a GPU of `memory` with the current device's SMs.
template <typename T, typename Stats>
inline cudaError_t normalize(void* d_temp_storage, std::size_t& temp_storage_bytes, const Args<T>& args,
                             Memory memory, cudaStream_t stream)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    const void* pointers[] = {args.d_in, args.d_gamma, args.d_beta, args.d_out};
    const bool rms = std::is_same_v<Stats, Squares>;
    bool all_aligned = true, vector_aligned = true;
    for (const void* const& p : pointers) {
        if (p == nullptr && !(rms && &p == &pointers[2])) {  // RMSNorm has no beta
            return cudaErrorInvalidValue;
        }
        all_aligned = all_aligned && aligned(p, sizeof(T));
        vector_aligned = vector_aligned && aligned(p, vector_bytes);
    }
    if (!all_aligned || args.num_rows < 1 || args.num_cols < 1 || !(args.epsilon >= 0.0f) ||
        (!rms && (args.d_mean == nullptr || args.d_rstd == nullptr || !aligned(args.d_mean, alignof(float)) ||
                  !aligned(args.d_rstd, alignof(float)))) ||
        (d_temp_storage != nullptr && !aligned(d_temp_storage, alignof(Moments)))) {
        return cudaErrorInvalidValue;
    }
    const int sms = traits_of_current_device().sms;
    if (args.num_cols % width == 0 && vector_aligned) {
        return launch_values<T, Stats, false>(values_for_rows<T, Stats>(args.num_rows, args.num_cols, memory, sms),
                                              d_temp_storage, temp_storage_bytes, args, stream);
    }
    // Rows at any 16-byte misalignment, the same in input and output: each row packed (rows that fit a block) or
    // through its window, of up to num_cols + width - 1 values (an int). gamma and beta may lie at any alignment:
    // launch() copies them, shifted once for each head, into the workspace.
    const std::uintptr_t apart = reinterpret_cast<std::uintptr_t>(args.d_out) - reinterpret_cast<std::uintptr_t>(args.d_in);
    if (apart % vector_bytes == 0 && args.num_cols <= std::numeric_limits<int>::max() - (width - 1)) {
        const int span = args.num_cols + (width - 1);
        const int length = packed_rows<width>(args.num_cols) ? args.num_cols : span;
        return launch_values<T, Stats, true>(values_for_rows<T, Stats>(args.num_rows, length, memory, sms),
                                             d_temp_storage, temp_storage_bytes, args, stream);
    }
    return launch<T, Stats, 1, 16>(d_temp_storage, temp_storage_bytes, args, stream);
}

//! @brief LayerNorm of each row of a row-major `num_rows` x `num_cols` matrix, in fp32 or bf16 (math in fp32):
//!        y = (x - mean) / sqrt(var + epsilon) * gamma + beta. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a cluster keep their
//!            blocks' statistics there, and rows off 16-byte boundaries the shifted copies of the parameters), or
//!            nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma, d_beta `num_cols` values each: the scale and shift of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[out] d_mean, d_rstd `num_rows` values each: each row's mean and 1 / sqrt(var + epsilon)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the variance
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; `d_in`, `d_gamma`, `d_beta`, `d_out` aligned to `T` (16-byte
//!      accesses wherever `d_in` and `d_out` are equally far past a 16-byte boundary, at every row length),
//!      `d_mean`, `d_rstd` and `d_temp_storage` 4-byte aligned, the workspace overlapping no other buffer; the
//!      absolute differences of a row's values from its first one summing to less than fp32's largest (about
//!      3.4e38). A NaN in a row makes the row's outputs NaN; a row of equal values gives exactly `beta`, with
//!      epsilon 0 too (its rstd is then infinite).
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
inline cudaError_t layer_norm_of(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,
                                 const T* d_gamma, const T* d_beta, T* d_out, float* d_mean, float* d_rstd,
                                 int num_rows, int num_cols, float epsilon, cudaStream_t stream)
{
    const Args<T> args{d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows, num_cols, epsilon};
    return d_beta == nullptr ? cudaErrorInvalidValue
                             : normalize<T, Moments>(d_temp_storage, temp_storage_bytes, args,
                                                     memory_of_current_device(), stream);
}

//! @brief RMSNorm of each row of a row-major `num_rows` x `num_cols` matrix, in fp32 or bf16 (math in fp32):
//!        y = x / sqrt(mean(x^2) + epsilon) * gamma. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a cluster keep their
//!            blocks' statistics there, and rows off 16-byte boundaries the shifted copies of the parameters), or
//!            nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma `num_cols` values: the scale of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the mean square
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; `d_in`, `d_gamma`, `d_out` aligned to `T` (16-byte accesses
//!      as layer_norm_of()'s), `d_temp_storage` 4-byte aligned and overlapping no other buffer; values finite or
//!      NaN. A NaN in a row makes the row NaN.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
inline cudaError_t rms_norm_of(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in, const T* d_gamma,
                               T* d_out, int num_rows, int num_cols, float epsilon, cudaStream_t stream)
{
    const Args<T> args{d_in, d_gamma, nullptr, d_out, nullptr, nullptr, num_rows, num_cols, epsilon};
    return normalize<T, Squares>(d_temp_storage, temp_storage_bytes, args, memory_of_current_device(), stream);
}

//! @brief LayerNorm of fp32 rows (see layer_norm_of()).
inline cudaError_t layer_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                              const float* d_gamma, const float* d_beta, float* d_out, float* d_mean, float* d_rstd,
                              int num_rows, int num_cols, float epsilon, cudaStream_t stream = 0)
{
    return layer_norm_of(d_temp_storage, temp_storage_bytes, d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows,
                         num_cols, epsilon, stream);
}

//! @brief LayerNorm of bf16 rows with bf16 gamma and beta, math, mean and rstd in fp32 (see layer_norm_of()).
inline cudaError_t layer_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const __nv_bfloat16* d_in,
                              const __nv_bfloat16* d_gamma, const __nv_bfloat16* d_beta, __nv_bfloat16* d_out,
                              float* d_mean, float* d_rstd, int num_rows, int num_cols, float epsilon,
                              cudaStream_t stream = 0)
{
    return layer_norm_of(d_temp_storage, temp_storage_bytes, d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows,
                         num_cols, epsilon, stream);
}

//! @brief RMSNorm of fp32 rows (see rms_norm_of()).
inline cudaError_t rms_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in,
                            const float* d_gamma, float* d_out, int num_rows, int num_cols, float epsilon,
                            cudaStream_t stream = 0)
{
    return rms_norm_of(d_temp_storage, temp_storage_bytes, d_in, d_gamma, d_out, num_rows, num_cols, epsilon, stream);
}

//! @brief RMSNorm of bf16 rows with bf16 gamma, math in fp32 (see rms_norm_of()).
inline cudaError_t rms_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const __nv_bfloat16* d_in,
                            const __nv_bfloat16* d_gamma, __nv_bfloat16* d_out, int num_rows, int num_cols,
                            float epsilon, cudaStream_t stream = 0)
{
    return rms_norm_of(d_temp_storage, temp_storage_bytes, d_in, d_gamma, d_out, num_rows, num_cols, epsilon, stream);
}

}  // namespace stepwise::normalization::lanes_known_at_compile_time
