//! @file 08_bf16_by_words.cuh
//! @brief Normalization step 8 (beyond the sources): bf16 in and out, the same kernels for fp32 and bf16, bf16
//!        widened a 32-bit word at a time.
//!
//! Step 7 reads and writes fp32 only. A transformer keeps its activations and
//! weights in bf16: half the bytes, so half the time of a memory-bound
//! kernel. The kernels are now templates over the element type `T` of x, y,
//! gamma and beta; loads and stores stay 16 bytes wide, 8 bf16 values. Every
//! value is widened to fp32 as it is read; the statistics and the arithmetic
//! are fp32 (LayerNorm's mean and rstd are written in fp32), and only y is
//! rounded (to nearest even) back to bf16. A bf16 is the upper half of the
//! fp32 it widens to, so the two bf16 of a 32-bit word widen by one shift and
//! one mask, not a conversion each. The rest is step 7's: its values a thread,
//! its scaled squares, its selects of the values past the row, its launch
//! bounds and its shared memory.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

namespace stepwise::normalization::bf16_by_words {

constexpr int vector_bytes = 16;             //!< one load or store
constexpr int short_rows_block = 256;        //!< threads of a block of rows that each fit a warp
constexpr int portable_cluster_blocks = 8;   //!< the cluster size every GPU with clusters takes
constexpr int max_cluster_blocks = 16;       //!< the largest, where the GPU allows it (H100, H200)
constexpr int cluster_block_threads = 256;   //!< the most threads of a block of a cluster
constexpr int cluster_stages = 1;            //!< rows a block loads ahead (a second costs blocks per SM: slower)
constexpr int split_block_threads = 256;     //!< blocks of the split path (rows longer than a cluster)
constexpr int block_values = 16384;          //!< a block holds at most this many values: 1024 threads of 16, 512 of 32
constexpr int split_values = 32;             //!< values per thread of the split path

//! @brief The most threads of a block whose threads hold `Values` values each.
template <int Values>
constexpr int max_block_threads = block_values / Values;

//! @brief Values each thread holds in rows read 16 bytes at a time: 16 up to rows of 4096 values, 32 beyond
//!        (fewer, fuller threads per row). Rows read a value at a time keep 16: more threads, more loads in flight.
inline int values_per_thread(int num_cols) { return num_cols <= 4096 ? 16 : 32; }

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

//! @brief The squares of the first `count` values' differences from `center`, scaled by a power of two of the
//!        largest.
template <int Values>
__device__ __forceinline__ Squares thread_squares(const float (&x)[Values], int count, float center)
{
    float largest = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        largest = fmaxf(largest, i < count ? fabsf(x[i] - center) : 0.0f);
    }
    const float scale = power_of_two_above(largest);
    const float inverse = inverse_power_of_two(scale);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        const float d = (x[i] - center) * inverse;
        sum += i < count ? d * d : 0.0f;
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
    Squares squares[32];
};

//! @brief RMSNorm's statistics of the group's values (those past the row are 0): their sum of squares.
template <int Values>
__device__ __forceinline__ Squares group_statistics(const float (&x)[Values], int, int, float, int group_threads,
                                                    GroupScratch& scratch, Squares)
{
    return reduce_group(thread_squares(x, Values, 0.0f), group_threads, scratch.squares, Squares{smallest_scale, 0.0f});
}

//! @brief LayerNorm's statistics of the group's `group_count` values (0 or more), the thread's first `count`, in two
//!        reductions: the mean (of the differences from `shift`, the row's first value: exact for equal values),
//!        then the squares of the deviations from it, in the thread's registers.
template <int Values>
__device__ __forceinline__ Moments group_statistics(const float (&x)[Values], int count, int group_count, float shift,
                                                    int group_threads, GroupScratch& scratch, Moments)
{
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        sum += i < count ? x[i] - shift : 0.0f;
    }
    sum = reduce_group(sum, group_threads, scratch.sums, 0.0f);
    const float mean = shift + sum / max(group_count, 1);  // a cluster's last block may have no values
    const Squares m2 = reduce_group(thread_squares(x, count, mean), group_threads, scratch.squares,
                                    Squares{smallest_scale, 0.0f});
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

//! @brief Writes (x - mean) * rstd * gamma (+ beta) for each value the thread holds.
template <typename T, bool WithBeta, int Width, int Values>
__device__ __forceinline__ void store_slice(const float (&x)[Values], const Args<T>& args, std::size_t row_offset,
                                            const Place& at, bool row_valid, Row r)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col < args.num_cols) {
            Chunk<T, Width> gamma, beta;
            load_parameter_chunk<T, WithBeta>(args, col, gamma, beta);
            float g[Width], b[Width];
            widen(gamma, g);
            widen(beta, b);
            Chunk<T, Width> y;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                y.v[i] = from_float<T>((x[a * Width + i] - r.mean) * output_scale(r) * g[i] + b[i]);
            }
            *reinterpret_cast<Chunk<T, Width>*>(args.d_out + row_offset + col) = y;
        }
    }
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

//! @brief The row of each group of `group_threads` threads is read once into registers, reduced and written.
//!        `group_threads` <= 32: several rows per block, a power of two of lanes per row. Otherwise a row per block
//!        (`group_threads == blockDim.x`). `Stats`: Moments (LayerNorm) or Squares (RMSNorm).
template <typename T, typename Stats, int Width, int Values>
static __global__ void __launch_bounds__(max_block_threads<Values>)
    norm_rows_kernel(Args<T> args, int group_threads)
{
    __shared__ GroupScratch scratch;
    const Place at = group_threads <= 32
                         ? Place{static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / group_threads) +
                                     threadIdx.x / group_threads,
                                 0, static_cast<int>(threadIdx.x) % group_threads, group_threads}
                         : Place{blockIdx.x, 0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const bool row_valid = at.row < args.num_rows;  // lanes past the last row still take part in the shuffles
    const std::size_t row_offset = static_cast<std::size_t>(row_valid ? at.row : 0) * args.num_cols;
    float x[Values];
    const int count = load_slice<T, Width, Values>(x, args.d_in + row_offset, at, args.num_cols, row_valid);
    constexpr bool with_beta = std::is_same_v<Stats, Moments>;
    const int group_count =
        static_cast<int>(max(std::int64_t{0}, min(args.num_cols - at.first, std::int64_t{at.threads} * Values)));
    const float shift = row_valid ? to_float(args.d_in[row_offset]) : 0.0f;
    const Stats s = group_statistics(x, count, group_count, shift, group_threads, scratch, Stats{});
    const Row r = row_of(s, args.num_cols, args.epsilon);
    store_slice<T, with_beta, Width>(x, args, row_offset, at, row_valid, r);
    if (row_valid && at.lane == 0) {
        write_row(args, at.row, r);
    }
}

//! @brief Rows split over the blocks of a cluster, each block a slice of `blockDim.x * Values` values of every row;
//!        the grid's clusters take rows in turn (persistent). A block's slices of its next `cluster_stages` rows
//!        arrive in shared memory by bulk copy while it works on this one; it pushes its statistics into every block
//!        of the cluster (st.async), whose barrier completes when all have landed. No block waits for a cluster-wide
//!        barrier, nor for a load of a later row. The block's slices of gamma and beta stay in shared memory for
//!        every row. Rows are 16-byte aligned (`Width` values per access).
template <typename T, typename Stats, int Width, int Values>
static __global__ void __launch_bounds__(cluster_block_threads) cluster_norm_kernel(Args<T> args)
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
        mbarrier_arrive_expect_bytes(&slice_landed[s], slice_bytes);
        if (slice_bytes > 0) {
            bulk_load(stage(s), args.d_in + row * args.num_cols + first, slice_bytes, &slice_landed[s]);
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
        mbarrier_arrive_expect_bytes(&parameters_landed, row_parameters<Stats> * slice_bytes);
        if (slice_bytes > 0) {
            bulk_load(stage(cluster_stages), args.d_gamma + first, slice_bytes, &parameters_landed);
            if constexpr (with_beta) {
                bulk_load(stage(cluster_stages + 1), args.d_beta + first, slice_bytes, &parameters_landed);
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
        mbarrier_wait_cluster(&slice_landed[s], (turn / cluster_stages) % 2);
        float x[Values];
        int thread_count = 0;
#pragma unroll
        for (int a = 0; a < Values / Width; ++a) {
            Chunk<T, Width> chunk{};
            if (offset(a) < count) {
                chunk = *reinterpret_cast<const Chunk<T, Width>*>(stage(s) + offset(a));
                thread_count += Width;
            }
            float values[Width];
            widen(chunk, values);
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                x[a * Width + i] = values[i];
            }
        }
        const float shift = count > 0 ? to_float(stage(s)[0]) : 0.0f;  // the slice's first value: exact for equal ones
        const int threads = static_cast<int>(blockDim.x);
        const Stats block = count == slice  // every slice but a row's last: all the thread's values lie in the row
                                ? group_statistics(x, Values, count, shift, threads, scratch[half], Stats{})
                                : group_statistics(x, thread_count, count, shift, threads, scratch[half], Stats{});
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
        T* d_slice = args.d_out + row * args.num_cols + first;
#pragma unroll
        for (int a = 0; a < Values / Width; ++a) {
            if (offset(a) < count) {
                const Chunk<T, Width> g = *reinterpret_cast<const Chunk<T, Width>*>(gamma + offset(a));
                Chunk<T, Width> b{};
                if constexpr (with_beta) {
                    b = *reinterpret_cast<const Chunk<T, Width>*>(beta + offset(a));
                }
                float gamma_values[Width], beta_values[Width];
                widen(g, gamma_values);
                widen(b, beta_values);
                Chunk<T, Width> y;
#pragma unroll
                for (int i = 0; i < Width; ++i) {
                    y.v[i] = from_float<T>((x[a * Width + i] - r.mean) * output_scale(r) * gamma_values[i] + beta_values[i]);
                }
                *reinterpret_cast<Chunk<T, Width>*>(d_slice + offset(a)) = y;
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
template <typename T, typename Stats, int Width>
static __global__ void __launch_bounds__(split_block_threads)
    split_partials_kernel(Args<T> args, Stats* d_partials, int blocks_per_row)
{
    __shared__ GroupScratch scratch;
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * args.num_cols;
    float x[split_values];
    const int count = load_slice<T, Width, split_values>(x, args.d_in + row_offset, at, args.num_cols, true);
    const int slice_count = static_cast<int>(
        max(std::int64_t{0}, min(args.num_cols - at.first, std::int64_t{at.threads} * split_values)));
    const Stats block = group_statistics(x, count, slice_count, to_float(args.d_in[row_offset]), at.threads, scratch,
                                         Stats{});
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
template <typename T, bool WithBeta, int Width>
static __global__ void __launch_bounds__(split_block_threads)
    split_store_kernel(Args<T> args, const Row* d_rows, int blocks_per_row)
{
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * args.num_cols;
    float x[split_values];
    load_slice<T, Width, split_values>(x, args.d_in + row_offset, at, args.num_cols, true);
    store_slice<T, WithBeta, Width, split_values>(x, args, row_offset, at, true, d_rows[at.row]);
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
//!        for `cluster_stages` slices of x and its slices of gamma (and beta); its grid is one cluster.
template <typename T, typename Stats, int Width, int Values>
inline void cluster_config(cudaLaunchConfig_t& config, cudaLaunchAttribute& cluster, int cluster_blocks,
                           int block_threads, cudaStream_t stream)
{
    config = {};
    config.gridDim = dim3(cluster_blocks);
    config.blockDim = dim3(block_threads);
    config.dynamicSmemBytes = std::size_t{cluster_stages + row_parameters<Stats>} * block_threads * Values * sizeof(T);
    config.stream = stream;
    cluster = {};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim = {static_cast<unsigned>(cluster_blocks), 1, 1};
    config.attrs = &cluster;
    config.numAttrs = 1;
}

//! @brief How many clusters of `cluster_blocks` blocks of `block_threads` threads the current device holds at once:
//!        0 where it launches no clusters or the kernel was not built for sm_90 or newer. The runtime is asked once
//!        per device and shape (a launch would otherwise pay for its queries), and the kernel's shared-memory limit
//!        is raised to its largest blocks' on each device.
template <typename T, typename Stats, int Width, int Values>
inline int active_clusters(int cluster_blocks, int block_threads)
{
    static std::mutex mutex;
    static std::map<std::tuple<int, int, int>, int> known;  // (device, cluster_blocks, block_threads) -> clusters
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        return 0;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    const auto [entry, unknown] = known.try_emplace({device, cluster_blocks, block_threads}, 0);
    if (!unknown) {
        return entry->second;
    }
    const auto kernel = cluster_norm_kernel<T, Stats, Width, Values>;
    const int largest_shared =
        (cluster_stages + row_parameters<Stats>) * cluster_block_threads * Values * static_cast<int>(sizeof(T));
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
template <typename T, typename Stats, int Width, int Values>
inline int cluster_limit()
{
    for (const int blocks : {max_cluster_blocks, portable_cluster_blocks}) {
        if (active_clusters<T, Stats, Width, Values>(blocks, cluster_block_threads) >= 1) {
            return blocks;
        }
    }
    return 0;
}

//! @brief The cluster path: as many clusters as the GPU holds at once, but no more than rows.
template <typename T, typename Stats, int Width, int Values>
inline cudaError_t launch_clusters(const Layout& l, const Args<T>& args, cudaStream_t stream)
{
    cudaLaunchConfig_t config;
    cudaLaunchAttribute cluster;
    cluster_config<T, Stats, Width, Values>(config, cluster, l.cluster_blocks, l.block_threads, stream);
    const int clusters = std::min(active_clusters<T, Stats, Width, Values>(l.cluster_blocks, l.block_threads), args.num_rows);
    config.gridDim = dim3(static_cast<unsigned>(std::max(clusters, 1) * l.cluster_blocks));
    return cudaLaunchKernelEx(&config, cluster_norm_kernel<T, Stats, Width, Values>, args);
}

template <typename T, typename Stats, int Width, int Values>
inline cudaError_t launch(void* d_temp_storage, std::size_t& temp_storage_bytes, const Args<T>& args,
                          cudaStream_t stream)
{
    static_assert(Values % Width == 0 && split_values % Width == 0, "a thread's values are whole accesses");
    constexpr bool with_beta = std::is_same_v<Stats, Moments>;
    // The cluster path copies whole rows of 16-byte accesses, and rows that long hold 32 values a thread.
    constexpr bool bulk_copies = Width * sizeof(T) == vector_bytes && Values == split_values;
    int limit = 0;
    if constexpr (bulk_copies) {
        limit = args.num_cols > block_values ? cluster_limit<T, Stats, Width, Values>() : 0;
    }
    const Layout l = choose_layout(args.num_rows, args.num_cols, Values, limit);
    if (l.blocks > INT32_MAX) {
        return cudaErrorInvalidValue;
    }
    const std::size_t partial_bytes = static_cast<std::size_t>(l.blocks) * sizeof(Stats);
    const std::size_t rows_offset = (partial_bytes + alignof(Row) - 1) / alignof(Row) * alignof(Row);
    const std::size_t needed = l.split_blocks > 0 ? rows_offset + args.num_rows * sizeof(Row) : 1;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    const unsigned grid = static_cast<unsigned>(l.blocks);
    if (l.split_blocks > 0) {
        Stats* d_partials = static_cast<Stats*>(d_temp_storage);
        Row* d_rows = reinterpret_cast<Row*>(static_cast<char*>(d_temp_storage) + rows_offset);
        split_partials_kernel<T, Stats, Width><<<grid, l.block_threads, 0, stream>>>(args, d_partials,
                                                                                    l.split_blocks);
        split_merge_kernel<T, Stats><<<args.num_rows, split_block_threads, 0, stream>>>(args, d_partials, d_rows,
                                                                                        l.split_blocks);
        split_store_kernel<T, with_beta, Width><<<grid, l.block_threads, 0, stream>>>(args, d_rows, l.split_blocks);
        return cudaGetLastError();
    }
    if constexpr (bulk_copies) {
        if (l.cluster_blocks > 0) {
            return launch_clusters<T, Stats, Width, Values>(l, args, stream);
        }
    }
    norm_rows_kernel<T, Stats, Width, Values><<<grid, l.block_threads, 0, stream>>>(args, l.group_threads);
    return cudaGetLastError();
}

//! @brief Checks the arguments and picks the access width: 16 bytes where every row and pointer allows it.
template <typename T, typename Stats>
inline cudaError_t normalize(void* d_temp_storage, std::size_t& temp_storage_bytes, const Args<T>& args,
                             cudaStream_t stream)
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
    if (args.num_cols % width == 0 && vector_aligned) {
        return values_per_thread(args.num_cols) == 16
                   ? launch<T, Stats, width, 16>(d_temp_storage, temp_storage_bytes, args, stream)
                   : launch<T, Stats, width, 32>(d_temp_storage, temp_storage_bytes, args, stream);
    }
    return launch<T, Stats, 1, 16>(d_temp_storage, temp_storage_bytes, args, stream);
}

//! @brief LayerNorm of each row of a row-major `num_rows` x `num_cols` matrix, in fp32 or bf16 (math in fp32):
//!        y = (x - mean) / sqrt(var + epsilon) * gamma + beta. Two phases, as CUB: with `d_temp_storage == nullptr`
//!        it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a cluster keep their
//!            blocks' statistics there), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma, d_beta `num_cols` values each: the scale and shift of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[out] d_mean, d_rstd `num_rows` values each: each row's mean and 1 / sqrt(var + epsilon)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the variance
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; `d_in`, `d_gamma`, `d_beta`, `d_out` aligned to `T`,
//!      `d_mean`, `d_rstd` and `d_temp_storage` 4-byte aligned; the absolute differences of a row's values from its
//!      first one summing to less than fp32's largest (about 3.4e38). A NaN in a row makes the row's outputs NaN; a row
//!      of equal values gives exactly `beta`, with epsilon 0 too (its rstd is then infinite).
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
inline cudaError_t layer_norm_of(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,
                                 const T* d_gamma, const T* d_beta, T* d_out, float* d_mean, float* d_rstd,
                                 int num_rows, int num_cols, float epsilon, cudaStream_t stream)
{
    const Args<T> args{d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows, num_cols, epsilon};
    return d_beta == nullptr ? cudaErrorInvalidValue
                             : normalize<T, Moments>(d_temp_storage, temp_storage_bytes, args, stream);
}

//! @brief RMSNorm of each row of a row-major `num_rows` x `num_cols` matrix, in fp32 or bf16 (math in fp32):
//!        y = x / sqrt(mean(x^2) + epsilon) * gamma. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a cluster keep their
//!            blocks' statistics there), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[in] d_gamma `num_cols` values: the scale of every row
//! @param[out] d_out the normalized rows; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] epsilon added to the mean square
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`, `epsilon >= 0`; `d_in`, `d_gamma`, `d_out` aligned to `T`, `d_temp_storage`
//!      4-byte aligned; values finite or NaN. A NaN in a row makes the row NaN.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
inline cudaError_t rms_norm_of(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in, const T* d_gamma,
                               T* d_out, int num_rows, int num_cols, float epsilon, cudaStream_t stream)
{
    const Args<T> args{d_in, d_gamma, nullptr, d_out, nullptr, nullptr, num_rows, num_cols, epsilon};
    return normalize<T, Squares>(d_temp_storage, temp_storage_bytes, args, stream);
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

}  // namespace stepwise::normalization::bf16_by_words
