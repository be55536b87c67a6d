//! @file 14_row_ends_staged.cuh
//! @brief Softmax step 14 (beyond the sources): the cluster path stages the two chunks across a row's ends in shared
//!        memory beside its bulk-copied body, so that every thread reads its slice as an aligned row's.
//!
//! Step 13's cluster path reads a row that does not start on a 16-byte boundary through its window: the bulk copy
//! brings the row's whole chunks into each block's slice, and the threads whose chunk crosses the row's start or end
//! read its values from global memory, one by one, after the copy has landed. The blocks that hold such a chunk take
//! a checked copy of the load loop with both ways of reading in it, and their reads from global memory come on top of
//! the copy's latency, a row after row: at 8192 x 50257 bf16 the windowed cluster kernel spilled and executed 345
//! million warp instructions where the aligned one executes 296 million, and DRAM ran at 54 % of its peak against
//! 65 %. Here the thread whose chunk crosses a row's end reads its values before it waits for the copy, and stores
//! the chunk into the slice, -inf where it lies outside the row: the whole slice is then in shared memory, and the
//! threads read it with the aligned rows' loop. The rows kernel keeps step 13's peel and the split path its windows.
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
#include <mutex>
#include <tuple>

namespace stepwise::softmax::row_ends_staged {

constexpr int vector_bytes = 16;          //!< one load or store
constexpr int short_rows_block = 256;     //!< threads of a block of rows that each fit a warp
constexpr int portable_cluster_blocks = 8;   //!< the cluster size every GPU with clusters takes
constexpr int max_cluster_blocks = 16;       //!< the largest, where the GPU allows it (H100, H200)
constexpr int cluster_block_threads = 256;   //!< the most threads of a block of a cluster
constexpr int cluster_stages = 1;            //!< rows a block loads ahead (a second costs blocks per SM: slower)
constexpr int cluster_blocks_per_sm = 3;     //!< blocks of the cluster kernel an SM holds: at most 85 registers a thread
constexpr int split_block_threads = 256;  //!< blocks of the split path (rows longer than a cluster)
constexpr int block_values = 16384;      //!< a block holds at most this many values: 1024 threads of 16, 512 of 32
constexpr int split_values = 32;          //!< values per thread of the split path

//! @brief Rows longer than this take the cluster kernel where the GPU has clusters: fp32 rows beyond 8192 values (a
//!        block per row of 512 or 1024 threads is slower there), bf16 rows beyond a block.
template <typename T>
constexpr int cluster_cols = sizeof(T) == 4 ? 8192 : block_values;

//! @brief The most threads of a block whose threads hold `Values` values each.
template <int Values>
constexpr int max_block_threads = std::min(1024, block_values / Values);

//! @brief Values each thread holds in rows read 16 bytes at a time: 16 where a row is a warp's or less (512
//!        values), else 32 for bf16 (64 bytes), and 64 in bf16 rows longer than a block (a cluster block's turn
//!        then carries as many bytes as an fp32 block's); fp32 keeps 16 in a block per row (512 threads at 8192
//!        values: faster than 256 of 32), 32 in the cluster kernel (its bulk copies take 32 or 64), and 8 in short
//!        rows, up to 256 values (more lanes a row: more loads in flight). Rows read 2 or 4 bytes at a time keep 16:
//!        more threads, more loads in flight.
template <typename T>
inline int values_per_thread(int num_cols)
{
    if (sizeof(T) == 4 && num_cols <= 256) {
        return 8;
    }
    if (sizeof(T) == 2 && num_cols > block_values) {
        return 64;
    }
    return num_cols <= 512 || (sizeof(T) == 4 && num_cols <= cluster_cols<T>) ? 16 : 32;
}

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

//! @brief The softmax of part of a row: its maximum and the sum of exp(x - max) over it.
struct Partial {
    float max;
    float sum;
};

constexpr float log2e = 1.44269504088896340736f;  //!< exp(x) = 2^(x log2(e)): one MUFU.EX2 and a multiply

//! @brief exp(x - max), with exp(-inf - max) = 0 even where max is -inf (a part of -inf values sums to 0).
__device__ __forceinline__ float exp_shifted(float x, float max)
{
    return x == -INFINITY ? 0.0f : exp2f((x - max) * log2e);
}

//! @brief Two parts' maximum and sum combined (Milakov and Gimelshein's rule); commutative, bit for bit.
__device__ __forceinline__ Partial merge(Partial a, Partial b)
{
    const float max = fmaxf(a.max, b.max);
    return {max, a.sum * exp_shifted(a.max, max) + b.sum * exp_shifted(b.max, max)};
}

//! @brief Merges the partials of the `width` lanes of each segment of the warp; every lane gets the result.
__device__ __forceinline__ Partial merge_lanes(Partial p, int width)
{
    for (int offset = width / 2; offset > 0; offset /= 2) {
        p = merge(p, {__shfl_xor_sync(0xffffffffu, p.max, offset, width),
                      __shfl_xor_sync(0xffffffffu, p.sum, offset, width)});
    }
    return p;
}

//! @brief The power of two of lanes that a merge of `n` partials (1 to 32), one a lane, takes.
__device__ __forceinline__ int lanes_for(int n) { return n <= 1 ? 1 : 1 << (32 - __clz(n - 1)); }

//! @brief The maximum (`Max`) or the sum of `v` over the thread's group: its `group_threads` lanes (<= 32), or its
//!        whole block, through `warp_values` (32 floats of shared memory); every thread of the group gets it.
template <bool Max>
__device__ __forceinline__ float reduce_group(float v, int group_threads, float* warp_values)
{
    const auto op = [](float a, float b) { return Max ? fmaxf(a, b) : a + b; };
    const int width = min(group_threads, 32);
    for (int offset = width / 2; offset > 0; offset /= 2) {
        v = op(v, __shfl_xor_sync(0xffffffffu, v, offset, width));
    }
    if (group_threads <= 32) {
        return v;
    }
    const int lane = threadIdx.x % 32;
    if (lane == 0) {
        warp_values[threadIdx.x / 32] = v;
    }
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / 32) ? warp_values[lane] : (Max ? -INFINITY : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
        v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

//! @brief Merges the partials of every thread of the block; every thread gets the result.
__device__ __forceinline__ Partial merge_block(Partial p, Partial* warp_partials)
{
    const int lane = threadIdx.x % 32;
    p = merge_lanes(p, 32);
    if (lane == 0) {
        warp_partials[threadIdx.x / 32] = p;
    }
    __syncthreads();
    const int warps = blockDim.x / 32;
    return merge_lanes(lane < warps ? warp_partials[lane] : Partial{-INFINITY, 0.0f}, 32);
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

//! @brief Stores `p` into `slot` of the cluster's block `rank`, counting its 8 bytes towards that block's `barrier`.
__device__ __forceinline__ void push(Partial* slot, std::uint64_t* barrier, int rank, Partial p)
{
    std::uint32_t remote_slot, remote_barrier;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_slot) : "r"(smem_address(slot)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_barrier) : "r"(smem_address(barrier)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
                 ::"r"(remote_slot), "f"(p.max), "f"(p.sum), "r"(remote_barrier)
                 : "memory");
}
#endif

//! @brief Where a thread's part of the data lies, and which threads share its row.
struct Place {
    std::int64_t row;
    std::int64_t first;  //!< the row's first element of this block's slice
    int lane;            //!< the thread's place among the threads of its slice
    int threads;         //!< threads of the slice
};

//! @brief Loads the thread's values of the slice as floats (`-inf` past the row's end), `Width` values per access;
//!        each access checked against the row's end where `Checked`. Every chunk is loaded into registers of its own
//!        before any is widened: a checked load then waits for no other (step 9's took the registers of the chunk
//!        before it, and so waited for its load).
template <bool Checked, typename T, int Width, int Values>
__device__ __forceinline__ void load_chunks(float (&x)[Values], const T* d_row, const Place& at, int num_cols,
                                            bool row_valid)
{
    constexpr int chunks = Values / Width;
    Chunk<T, Width> raw[chunks] = {};
    bool inside[chunks];
#pragma unroll
    for (int a = 0; a < chunks; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        inside[a] = !Checked || (row_valid && col < num_cols);
        if (inside[a]) {
            raw[a] = *reinterpret_cast<const Chunk<T, Width>*>(d_row + col);
        }
    }
#pragma unroll
    for (int a = 0; a < chunks; ++a) {
        float values[Width];
        widen(raw[a], values);
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            x[a * Width + i] = inside[a] ? values[i] : -INFINITY;
        }
    }
}

//! @brief load_chunks() unchecked where the chunks of all the slice's threads lie in the row, checked for every thread
//!        otherwise: the threads of a row (or of a block's slice of it) take the same copy, and no warp runs both.
template <typename T, int Width, int Values>
__device__ __forceinline__ void load_slice(float (&x)[Values], const T* d_row, const Place& at,
                                           int num_cols, bool row_valid)
{
    const std::int64_t end = at.first + static_cast<std::int64_t>(at.threads) * Values;  // past the slice's chunks
    if (row_valid && end <= num_cols) {
        load_chunks<false, T, Width, Values>(x, d_row, at, num_cols, row_valid);
    } else {
        load_chunks<true, T, Width, Values>(x, d_row, at, num_cols, row_valid);
    }
}

//! @brief The largest of the thread's values.
template <int Values>
__device__ __forceinline__ float thread_max(const float (&x)[Values])
{
    float max = -INFINITY;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        max = fmaxf(max, x[i]);
    }
    return max;
}

//! @brief Replaces each value x by exp(x - m) (m taken as 0 where it is -inf: -inf values give 0, a NaN stays NaN);
//!        returns the sum of the new values.
template <int Values>
__device__ __forceinline__ float exponentiate_from(float (&x)[Values], float m)
{
    const float shift = m == -INFINITY ? 0.0f : m;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < Values; ++i) {
        x[i] = exp2f((x[i] - shift) * log2e);
        sum += x[i];
    }
    return sum;
}

//! @brief exponentiate_from() the thread's own maximum; returns the thread's partial: that maximum and the sum.
template <int Values>
__device__ __forceinline__ Partial exponentiate(float (&x)[Values])
{
    const float max = thread_max(x);
    return {max, exponentiate_from(x, max)};
}

//! @brief Writes `scale` times each value the thread holds.
template <typename T, int Width, int Values>
__device__ __forceinline__ void store_slice(const float (&x)[Values], T* d_row, const Place& at,
                                            int num_cols, bool row_valid, float scale)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col < num_cols) {
            Chunk<T, Width> y;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                y.v[i] = from_float<T>(x[a * Width + i] * scale);
            }
            *reinterpret_cast<Chunk<T, Width>*>(d_row + col) = y;
        }
    }
}

//! @brief One value in fp32.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

//! @brief The values of the row at `d_row` that precede it in its window, which starts at the 16-byte boundary at or
//!        before it: 0 to `vector_bytes / sizeof(T) - 1`.
template <typename T>
__device__ __forceinline__ int head_of(const T* d_row)
{
    return static_cast<int>(reinterpret_cast<std::uintptr_t>(d_row) % vector_bytes / sizeof(T));
}

//! @brief Loads the thread's chunks of a row's window as floats. Window column `col` is the row's value `col - head`.
//!        A chunk wholly inside the row is one access, at `d_whole + (col - whole_first)` (the row in global memory,
//!        or a block's staged slice of it); a chunk across the row's start or end is read value by value from `d_row`,
//!        -inf outside the row (never read); a chunk outside it is -inf. Unchecked: every chunk lies inside the row.
template <bool Checked, typename T, int Width, int Values>
__device__ __forceinline__ void load_window_chunks(float (&x)[Values], const T* d_whole, std::int64_t whole_first,
                                                   const T* d_row, const Place& at, int num_cols, int head,
                                                   bool row_valid)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (!Checked || (row_valid && col >= head && col + Width <= std::int64_t{head} + num_cols)) {
            float values[Width];
            // One 16-byte load into registers first: widen() on a reference to global memory read the chunk a
            // value (fp32) or a byte (bf16) at a time.
            const Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(d_whole + (col - whole_first));
            widen(chunk, values);
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                x[a * Width + i] = values[i];
            }
        } else {
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                const std::int64_t j = col + i - head;  // the value's place in the row
                x[a * Width + i] = -INFINITY;
                if (row_valid && j >= 0 && j < num_cols) {
                    x[a * Width + i] = to_float(d_row[j]);
                }
            }
        }
    }
}

//! @brief load_window_chunks() unchecked where all the thread's chunks lie inside the row (see load_slice()).
template <typename T, int Width, int Values>
__device__ __forceinline__ void load_window(float (&x)[Values], const T* d_whole, std::int64_t whole_first,
                                            const T* d_row, const Place& at, int num_cols, int head, bool row_valid)
{
    const std::int64_t start = at.first + std::int64_t{at.lane} * Width;
    const std::int64_t end = at.first + (static_cast<std::int64_t>(Values / Width - 1) * at.threads + at.lane + 1) * Width;
    if (row_valid && start >= head && end <= std::int64_t{head} + num_cols) {
        load_window_chunks<false, T, Width, Values>(x, d_whole, whole_first, d_row, at, num_cols, head, row_valid);
    } else {
        load_window_chunks<true, T, Width, Values>(x, d_whole, whole_first, d_row, at, num_cols, head, row_valid);
    }
}

//! @brief Stages the chunks across the ends of the row at `d_row` into a block's slice of its window (window columns
//!        [`first`, `first` + `slice`) at `d_slice`): the chunk at window column 0 where the row starts past a 16-byte
//!        boundary, and the chunk that holds its last value where it ends before one, the row's values read one by one
//!        and -inf outside the row. The thread that reads the chunk from the slice (as load_slice() lays the slice out)
//!        stages it, and is the only one that reads it: no barrier. Its reads are issued before the bulk copy of the
//!        body is waited for, so that they wait for memory alongside it.
template <typename T, int Width>
__device__ __forceinline__ void stage_row_ends(T* d_slice, std::int64_t first, int slice, const T* d_row, int num_cols,
                                               int head, const Place& at)
{
    const int lane = at.lane, threads = at.threads;
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
                chunk.v[i] = j >= 0 && j < num_cols ? d_row[j] : from_float<T>(-INFINITY);
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

//! @brief Stores a chunk as one 16-byte access at `d` (16-byte aligned). A plain copy of the Chunk here was split
//!        into 2- and 4-byte stores by the compiler (where the row's other chunks are stored a value at a time).
template <typename T, int Width>
__device__ __forceinline__ void store_chunk(T* d, const Chunk<T, Width>& chunk)
{
    static_assert(sizeof(chunk) == sizeof(uint4), "a chunk is one 16-byte access");
    uint4 bits;
    std::memcpy(&bits, &chunk, sizeof(bits));
    asm("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(d), "r"(bits.x), "r"(bits.y), "r"(bits.z), "r"(bits.w)
        : "memory");
}

//! @brief Writes `scale` times each value the thread holds of the row's window (as load_window() reads them): a chunk
//!        wholly inside the row as one access, one across its start or end value by value, only the row's values.
template <typename T, int Width, int Values>
__device__ __forceinline__ void store_window(const float (&x)[Values], T* d_row, const Place& at, int num_cols,
                                             int head, bool row_valid, float scale)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const std::int64_t col = at.first + (static_cast<std::int64_t>(a) * at.threads + at.lane) * Width;
        if (row_valid && col >= head && col + Width <= std::int64_t{head} + num_cols) {
            Chunk<T, Width> y;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                y.v[i] = from_float<T>(x[a * Width + i] * scale);
            }
            store_chunk(d_row + (col - head), y);
        } else if (row_valid && col < std::int64_t{head} + num_cols) {
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                const std::int64_t j = col + i - head;
                if (j >= 0 && j < num_cols) {
                    d_row[j] = from_float<T>(x[a * Width + i] * scale);
                }
            }
        }
    }
}

//! @brief How a row that may start off a 16-byte boundary is held in the aligned layout's slots (slot `s` is chunk
//!        `s / threads` of lane `s % threads`): slots below `body` are the row's whole chunks from its first boundary
//!        on, value `lead + s * Width` first; the slots after them hold its ends, value by value: slot position
//!        `k = (s - body) * Width + i` is value `k` where `k < lead`, value `lead + body * Width + (k - lead)` where
//!        `lead <= k < lead + tail`, and nothing after.
struct Peel {
    int lead;  //!< values before the row's first 16-byte boundary (all of them in a row that has none)
    int body;  //!< whole chunks from that boundary on
    int tail;  //!< values after the last whole chunk
};

//! @brief The peel of a row of `num_cols` values whose first value is `head` values past a 16-byte boundary.
template <int Width>
__host__ __device__ constexpr Peel peel_for(int head, int num_cols)
{
    const int to_boundary = (Width - head) % Width;
    const int lead = to_boundary < num_cols ? to_boundary : num_cols;
    const int body = (num_cols - lead) / Width;
    return {lead, body, num_cols - lead - body * Width};
}

//! @brief The peel of the row of `num_cols` values at `d_row`.
template <typename T, int Width>
__device__ __forceinline__ Peel peel_of(const T* d_row, int num_cols)
{
    return peel_for<Width>(head_of(d_row), num_cols);
}

//! @brief The row's value at position `k` of its ends (see Peel), or -1 past them.
template <int Width>
__host__ __device__ constexpr std::int64_t end_value(const Peel& peel, int k)
{
    return k < peel.lead               ? k
           : k < peel.lead + peel.tail ? std::int64_t{peel.body} * Width + k
                                       : -1;
}

//! @brief Loads the thread's slots of a peeled row (see Peel) as floats, -inf in slots and positions that hold none
//!        of its values. Unchecked: every slot of the thread is a whole chunk of the body. Checked: the whole chunks
//!        are loaded first, each into registers of its own, and the ends then value by value.
template <bool Checked, typename T, int Width, int Values>
__device__ __forceinline__ void load_peeled_chunks(float (&x)[Values], const T* d_row, const Place& at,
                                                   const Peel& peel, bool row_valid)
{
    constexpr int chunks = Values / Width;
    Chunk<T, Width> raw[chunks] = {};
    bool whole[chunks];
#pragma unroll
    for (int a = 0; a < chunks; ++a) {
        const int slot = a * at.threads + at.lane;
        whole[a] = !Checked || (row_valid && slot < peel.body);
        if (whole[a]) {
            raw[a] = *reinterpret_cast<const Chunk<T, Width>*>(d_row + peel.lead + std::int64_t{slot} * Width);
        }
    }
#pragma unroll
    for (int a = 0; a < chunks; ++a) {
        const int slot = a * at.threads + at.lane;
        float values[Width];
        widen(raw[a], values);
#pragma unroll
        for (int i = 0; i < Width; ++i) {
            x[a * Width + i] = values[i];
            if (!whole[a]) {
                const int past_body = (slot - peel.body) * Width + i;
                const std::int64_t j = row_valid && slot >= peel.body ? end_value<Width>(peel, past_body) : -1;
                x[a * Width + i] = j >= 0 ? to_float(d_row[j]) : -INFINITY;
            }
        }
    }
}

//! @brief load_peeled_chunks() unchecked where all the thread's slots are whole chunks of the body.
template <typename T, int Width, int Values>
__device__ __forceinline__ void load_peeled(float (&x)[Values], const T* d_row, const Place& at, const Peel& peel,
                                            bool row_valid)
{
    const int last_slot = (Values / Width - 1) * at.threads + at.lane;
    if (row_valid && last_slot < peel.body) {
        load_peeled_chunks<false, T, Width, Values>(x, d_row, at, peel, row_valid);
    } else {
        load_peeled_chunks<true, T, Width, Values>(x, d_row, at, peel, row_valid);
    }
}

//! @brief Writes `scale` times each value the thread holds of a peeled row (as load_peeled() reads them): a whole
//!        chunk of the body as one access, the ends value by value.
template <typename T, int Width, int Values>
__device__ __forceinline__ void store_peeled(const float (&x)[Values], T* d_row, const Place& at, const Peel& peel,
                                             bool row_valid, float scale)
{
#pragma unroll
    for (int a = 0; a < Values / Width; ++a) {
        const int slot = a * at.threads + at.lane;
        if (row_valid && slot < peel.body) {
            Chunk<T, Width> y;
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                y.v[i] = from_float<T>(x[a * Width + i] * scale);
            }
            store_chunk(d_row + peel.lead + std::int64_t{slot} * Width, y);
        } else if (row_valid) {
#pragma unroll
            for (int i = 0; i < Width; ++i) {
                const std::int64_t j = end_value<Width>(peel, (slot - peel.body) * Width + i);
                if (j >= 0) {
                    d_row[j] = from_float<T>(x[a * Width + i] * scale);
                }
            }
        }
    }
}

//! @brief What turns a thread's exp(x - m) into the row's softmax: exp(m - row max) / row sum (a row of -inf
//!        values: 0 * inf, NaN).
__device__ __forceinline__ float scale_to_row(Partial thread, Partial row)
{
    return exp_shifted(thread.max, row.max) * (1.0f / row.sum);
}

//! @brief The row of each group of `group_threads` threads is read once into registers, reduced and written.
//!        `group_threads` <= 32: several rows per block, a power of two of lanes per row. Otherwise a row per block
//!        (`group_threads == blockDim.x`). The whole row in registers, its maximum and then its sum are plain
//!        reductions. A NaN or +inf makes the row NaN (through x - max), a row of -inf values 0 / 0. `Windowed`: the
//!        threads hold the row peeled (load_peeled()), its body and ends, which vary from row to row.
template <typename T, int Width, int Values, bool Windowed = false>
static __global__ void __launch_bounds__(max_block_threads<Values>)
    softmax_rows_kernel(const T* d_in, T* d_out, int num_rows, int num_cols, int group_threads)
{
    __shared__ float warp_maxima[32], warp_sums[32];  // one array a reduction: the second waits for no reader
    const int lanes_log2 = __ffs(group_threads) - 1;  // rows of a power of two of lanes: shifts, not a division
    const Place at = group_threads <= 32
                         ? Place{static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> lanes_log2) +
                                     (threadIdx.x >> lanes_log2),
                                 0, static_cast<int>(threadIdx.x) & (group_threads - 1), group_threads}
                         : Place{blockIdx.x, 0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const bool row_valid = at.row < num_rows;  // lanes past the last row still take part in the shuffles
    const std::size_t row_offset = static_cast<std::size_t>(row_valid ? at.row : 0) * num_cols;
    float x[Values];
    if constexpr (Windowed) {
        const Peel peel = peel_of<T, Width>(d_in + row_offset, num_cols);  // d_out's rows: the same (softmax_of())
        load_peeled<T, Width, Values>(x, d_in + row_offset, at, peel, row_valid);
        const float max = reduce_group<true>(thread_max(x), group_threads, warp_maxima);
        const float sum = reduce_group<false>(exponentiate_from(x, max), group_threads, warp_sums);
        store_peeled<T, Width, Values>(x, d_out + row_offset, at, peel, row_valid, 1.0f / sum);
    } else {
        load_slice<T, Width, Values>(x, d_in + row_offset, at, num_cols, row_valid);
        const float max = reduce_group<true>(thread_max(x), group_threads, warp_maxima);
        const float sum = reduce_group<false>(exponentiate_from(x, max), group_threads, warp_sums);
        store_slice<T, Width, Values>(x, d_out + row_offset, at, num_cols, row_valid, 1.0f / sum);
    }
}

//! @brief Rows split over the blocks of a cluster, each block a slice of `blockDim.x * Values` values of every row;
//!        the grid's clusters take rows in turn (persistent). A block's slices of its next `cluster_stages` rows
//!        arrive in shared memory by bulk copy while it works on this one; it pushes its partial into every block
//!        of the cluster (st.async), whose barrier completes when all have landed. No block waits for a cluster-wide
//!        barrier, nor for a load of a later row. Rows are 16-byte aligned (`Width` values per access); clusters
//!        have 2 blocks or more (st.async does not address a cluster of one). `Windowed`: a block's slice is part of
//!        the row's window; the bulk copy moves the whole 16-byte chunks of the row in it, the threads that hold a
//!        chunk across the row's start or end stage it beside them (stage_row_ends()), and write it value by value.
template <typename T, int Width, int Values, bool Windowed = false>
static __global__ void __launch_bounds__(cluster_block_threads, cluster_blocks_per_sm)
    cluster_rows_kernel(const T* d_in, T* d_out, int num_rows, int num_cols)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    static_assert(Width * sizeof(T) == vector_bytes, "bulk copies move whole 16-byte accesses");
    extern __shared__ __align__(16) unsigned char stages[];  // cluster_stages slices of the block
    __shared__ std::uint64_t slice_landed[cluster_stages];
    __shared__ std::uint64_t partials_landed[2];             // even and odd turns
    __shared__ Partial warp_partials[2][32];
    __shared__ alignas(16) Partial block_partials[2][max_cluster_blocks];
    cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int blocks = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int slice = static_cast<int>(blockDim.x) * Values;
    const std::int64_t first = std::int64_t{rank} * slice;
    const int count = static_cast<int>(min(std::int64_t{slice}, max(std::int64_t{0}, num_cols - first)));
    const unsigned slice_bytes = static_cast<unsigned>(count * sizeof(T));
    const auto stage = [&](int s) { return reinterpret_cast<T*>(stages) + s * slice; };
    const Place staged{0, 0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};  // in the block's slice
    const auto offset = [&](int a) { return (a * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * Width; };
    const auto load_row = [&](std::int64_t row, int s) {  // by thread 0
        if constexpr (Windowed) {  // the whole chunks of the row in the slice: window columns [inner_first, inner_end)
            const T* d_row = d_in + row * num_cols;
            const int head = head_of(d_row);
            const std::int64_t inner_first = max(first, std::int64_t{head > 0 ? Width : 0});
            const std::int64_t inner_end = min(first + slice, (std::int64_t{head} + num_cols) / Width * Width);
            const unsigned bytes = inner_end > inner_first ? static_cast<unsigned>((inner_end - inner_first) * sizeof(T)) : 0;
            mbarrier_arrive_expect_bytes(&slice_landed[s], bytes);
            if (bytes > 0) {
                bulk_load(stage(s) + (inner_first - first), d_row + (inner_first - head), bytes, &slice_landed[s]);
            }
        } else {
            mbarrier_arrive_expect_bytes(&slice_landed[s], slice_bytes);
            if (slice_bytes > 0) {
                bulk_load(stage(s), d_in + row * num_cols + first, slice_bytes, &slice_landed[s]);
            }
        }
    };
    if (threadIdx.x == 0) {
        for (int s = 0; s < cluster_stages; ++s) {
            mbarrier_init(&slice_landed[s]);
        }
        mbarrier_init(&partials_landed[0]);
        mbarrier_init(&partials_landed[1]);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster.sync();  // every block's barriers are set before any block pushes to them
    const std::int64_t clusters = gridDim.x / blocks;
    const std::int64_t first_row = blockIdx.x / blocks;
    if (threadIdx.x == 0) {
        for (int s = 0; s < cluster_stages && first_row + s * clusters < num_rows; ++s) {
            load_row(first_row + s * clusters, s);
        }
    }
    const int lane = static_cast<int>(threadIdx.x) % 32;
    int turn = 0;
    for (std::int64_t row = first_row; row < num_rows; row += clusters, ++turn) {
        const int s = turn % cluster_stages, half = turn % 2;
        const int head = Windowed ? head_of(d_in + row * num_cols) : 0;
        int staged_count = count;  // the values of the slice in shared memory, -inf past them
        if constexpr (Windowed) {  // the slice's chunks up to the one that holds the row's last value
            const std::int64_t window_end = (std::int64_t{head} + num_cols + Width - 1) / Width * Width;
            staged_count = static_cast<int>(min(std::int64_t{slice}, max(std::int64_t{0}, window_end - first)));
            stage_row_ends<T, Width>(stage(s), first, slice, d_in + row * num_cols, num_cols, head, staged);
        }
        mbarrier_wait_cluster(&slice_landed[s], (turn / cluster_stages) % 2);
        float x[Values];
        load_slice<T, Width, Values>(x, stage(s), staged, staged_count, true);  // -inf past the staged values
        const Partial thread = exponentiate(x);
        const Partial block = merge_block(thread, warp_partials[half]);  // past its barrier, no thread reads stage s
        if (threadIdx.x == 0) {
            if (row + cluster_stages * clusters < num_rows) {
                load_row(row + cluster_stages * clusters, s);
            }
            mbarrier_arrive_expect_bytes(&partials_landed[half], blocks * sizeof(Partial));
        }
        if (threadIdx.x < blocks) {
            push(&block_partials[half][rank], &partials_landed[half], threadIdx.x, block);
        }
        mbarrier_wait_cluster(&partials_landed[half], (turn / 2) % 2);
        const int width = lanes_for(blocks);
        const Partial whole =
            merge_lanes(lane % width < blocks ? block_partials[half][lane % width] : Partial{-INFINITY, 0.0f}, width);
        const float scale = scale_to_row(thread, whole);
        if constexpr (Windowed) {  // the slice's window columns at d_slice; the row's values at offsets [lo, hi)
            T* d_slice = d_out + row * num_cols - head + first;
            const int lo = static_cast<int>(max(std::int64_t{0}, head - first));
            const int hi = static_cast<int>(min(std::int64_t{slice}, std::int64_t{head} + num_cols - first));
#pragma unroll
            for (int a = 0; a < Values / Width; ++a) {
                if (offset(a) >= lo && offset(a) + Width <= hi) {
                    Chunk<T, Width> y;
#pragma unroll
                    for (int i = 0; i < Width; ++i) {
                        y.v[i] = from_float<T>(x[a * Width + i] * scale);
                    }
                    store_chunk(d_slice + offset(a), y);
                } else if (offset(a) < hi && offset(a) + Width > lo) {  // a chunk across the row's start or end
#pragma unroll
                    for (int i = 0; i < Width; ++i) {
                        if (offset(a) + i >= lo && offset(a) + i < hi) {
                            d_slice[offset(a) + i] = from_float<T>(x[a * Width + i] * scale);
                        }
                    }
                }
            }
        } else {
            T* d_slice = d_out + row * num_cols + first;
#pragma unroll
            for (int a = 0; a < Values / Width; ++a) {
                if (offset(a) < count) {
                    Chunk<T, Width> y;
#pragma unroll
                    for (int i = 0; i < Width; ++i) {
                        y.v[i] = from_float<T>(x[a * Width + i] * scale);
                    }
                    *reinterpret_cast<Chunk<T, Width>*>(d_slice + offset(a)) = y;
                }
            }
        }
    }
    cluster.sync();  // no block leaves while a push to it may be in flight
#endif
}

//! @brief Rows longer than a cluster, first pass: each block's partial of its slice, into `d_partials`.
template <typename T, int Width, bool Windowed = false>
static __global__ void __launch_bounds__(split_block_threads)
    split_partials_kernel(const T* d_in, Partial* d_partials, int num_cols, int blocks_per_row)
{
    __shared__ Partial warp_partials[32];
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    float x[split_values];
    const T* d_row = d_in + static_cast<std::size_t>(at.row) * num_cols;
    if constexpr (Windowed) {
        load_window<T, Width, split_values>(x, d_row, head_of(d_row), d_row, at, num_cols, head_of(d_row), true);
    } else {
        load_slice<T, Width, split_values>(x, d_row, at, num_cols, true);
    }
    const Partial block = merge_block(exponentiate(x), warp_partials);
    if (threadIdx.x == 0) {
        d_partials[blockIdx.x] = block;
    }
}

//! @brief Rows longer than a cluster, second pass: one block per row merges its blocks' partials in `d_rows`.
static __global__ void __launch_bounds__(split_block_threads)
    split_merge_kernel(const Partial* d_partials, Partial* d_rows, int blocks_per_row)
{
    __shared__ Partial warp_partials[32];
    Partial p{-INFINITY, 0.0f};
    for (int b = threadIdx.x; b < blocks_per_row; b += blockDim.x) {
        p = merge(p, d_partials[static_cast<std::size_t>(blockIdx.x) * blocks_per_row + b]);
    }
    p = merge_block(p, warp_partials);
    if (threadIdx.x == 0) {
        d_rows[blockIdx.x] = p;
    }
}

//! @brief Rows longer than a cluster, third pass: each block reads its slice again and writes it.
template <typename T, int Width, bool Windowed = false>
static __global__ void __launch_bounds__(split_block_threads)
    split_store_kernel(const T* d_in, T* d_out, const Partial* d_rows, int num_cols, int blocks_per_row)
{
    const Place at{blockIdx.x / blocks_per_row,
                   static_cast<std::int64_t>(blockIdx.x % blocks_per_row) * blockDim.x * split_values,
                   static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
    const std::size_t row_offset = static_cast<std::size_t>(at.row) * num_cols;
    float x[split_values];
    if constexpr (Windowed) {
        const int head = head_of(d_in + row_offset);
        load_window<T, Width, split_values>(x, d_in + row_offset, head, d_in + row_offset, at, num_cols, head, true);
        const Partial thread = exponentiate(x);
        store_window<T, Width, split_values>(x, d_out + row_offset, at, num_cols, head, true,
                                             scale_to_row(thread, d_rows[at.row]));
    } else {
        load_slice<T, Width, split_values>(x, d_in + row_offset, at, num_cols, true);
        const Partial thread = exponentiate(x);
        store_slice<T, Width, split_values>(x, d_out + row_offset, at, num_cols, true,
                                            scale_to_row(thread, d_rows[at.row]));
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
//!        (0: none). Rows that one block of the cluster kernel would hold take a block per row: a cluster has 2 blocks
//!        or more.
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
        l.blocks = (std::int64_t{num_rows} + rows_per_block - 1) / rows_per_block;
    } else if (threads <= max_threads && (cluster_limit == 0 || threads <= cluster_block_threads)) {  // a block per row
        l.group_threads = l.block_threads = static_cast<int>((threads + 31) / 32 * 32);
        l.blocks = num_rows;
    } else if (threads <= std::int64_t{cluster_limit} * cluster_block_threads) {  // a cluster per row
        l.cluster_blocks = static_cast<int>(
            std::min<std::int64_t>(cluster_limit, (threads + cluster_block_threads - 1) / cluster_block_threads));
        const std::int64_t per_block = (threads + l.cluster_blocks - 1) / l.cluster_blocks;
        l.group_threads = l.block_threads = static_cast<int>((per_block + 31) / 32 * 32);
        l.blocks = l.cluster_blocks;
    } else {  // blocks of a row that merge their partials through global memory
        const std::int64_t split_threads = (static_cast<std::int64_t>(num_cols) + split_values - 1) / split_values;
        l.values = split_values;
        l.block_threads = split_block_threads;
        l.split_blocks = static_cast<int>((split_threads + split_block_threads - 1) / split_block_threads);
        l.blocks = std::int64_t{num_rows} * l.split_blocks;
    }
    return l;
}

//! @brief The launch of clusters of `cluster_blocks` blocks of `block_threads` threads, each with its shared memory
//!        for `cluster_stages` slices; its grid is one cluster.
template <typename T, int Width, int Values>
inline void cluster_config(cudaLaunchConfig_t& config, cudaLaunchAttribute& cluster, int cluster_blocks,
                           int block_threads, cudaStream_t stream)
{
    config = {};
    config.gridDim = dim3(cluster_blocks);
    config.blockDim = dim3(block_threads);
    config.dynamicSmemBytes = std::size_t{cluster_stages} * block_threads * Values * sizeof(T);
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
template <typename T, int Width, int Values, bool Windowed>
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
    const auto kernel = cluster_rows_kernel<T, Width, Values, Windowed>;
    const int largest_shared = cluster_stages * cluster_block_threads * Values * static_cast<int>(sizeof(T));
    int cluster_launch = 0;
    cudaFuncAttributes attributes{};
    cudaLaunchConfig_t config;
    cudaLaunchAttribute cluster;
    cluster_config<T, Width, Values>(config, cluster, cluster_blocks, block_threads, 0);
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
template <typename T, int Width, int Values, bool Windowed>
inline int cluster_limit()
{
    for (const int blocks : {max_cluster_blocks, portable_cluster_blocks}) {
        if (active_clusters<T, Width, Values, Windowed>(blocks, cluster_block_threads) >= 1) {
            return blocks;
        }
    }
    return 0;
}

//! @brief The cluster path: as many clusters as the GPU holds at once, but no more than rows.
template <typename T, int Width, int Values, bool Windowed>
inline cudaError_t launch_clusters(const Layout& l, const T* d_in, T* d_out, int num_rows, int num_cols,
                                   cudaStream_t stream)
{
    cudaLaunchConfig_t config;
    cudaLaunchAttribute cluster;
    cluster_config<T, Width, Values>(config, cluster, l.cluster_blocks, l.block_threads, stream);
    const int clusters =
        std::min(active_clusters<T, Width, Values, Windowed>(l.cluster_blocks, l.block_threads), num_rows);
    config.gridDim = dim3(static_cast<unsigned>(std::max(clusters, 1) * l.cluster_blocks));
    return cudaLaunchKernelEx(&config, cluster_rows_kernel<T, Width, Values, Windowed>, d_in, d_out, num_rows,
                              num_cols);
}

//! @brief The launch of rows of `num_cols` values, `Values` a thread. `Windowed` (rows not 16-byte aligned, `Width`
//!        values an access): the cluster and split paths hold each row's window, laid out for the longest,
//!        `num_cols + Width - 1` values (at most INT_MAX: softmax_of() checks); the rows kernel holds each row peeled,
//!        in the slots of `num_cols` values.
template <typename T, int Width, int Values, bool Windowed = false>
inline cudaError_t launch(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in, T* d_out,
                          int num_rows, int num_cols, cudaStream_t stream)
{
    static_assert(Values % Width == 0 && split_values % Width == 0, "a thread's values are whole accesses");
    static_assert(!Windowed || Width * sizeof(T) == vector_bytes, "a window is of 16-byte chunks");
    // The cluster path copies whole rows of 16-byte accesses, and rows that long hold 32 or 64 values a thread.
    constexpr bool bulk_copies = Width * sizeof(T) == vector_bytes && Values >= split_values;
    const int span = Windowed ? num_cols + (Width - 1) : num_cols;  // the longest window
    int limit = 0;
    if constexpr (bulk_copies) {
        limit = span > cluster_cols<T> ? cluster_limit<T, Width, Values, Windowed>() : 0;
    }
    Layout l = choose_layout(num_rows, span, Values, limit);
    if (Windowed && l.cluster_blocks == 0 && l.split_blocks == 0) {
        l = choose_layout(num_rows, num_cols, Values, limit);  // the rows kernel: a peeled row takes no more slots
    }
    if (l.blocks > INT32_MAX) {
        return cudaErrorInvalidValue;
    }
    const std::size_t partial_bytes = static_cast<std::size_t>(l.blocks) * sizeof(Partial);
    const std::size_t needed = l.split_blocks > 0 ? partial_bytes + num_rows * sizeof(Partial) : 1;
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    const unsigned grid = static_cast<unsigned>(l.blocks);
    if (l.split_blocks > 0) {
        Partial* d_partials = static_cast<Partial*>(d_temp_storage);
        Partial* d_rows = d_partials + l.blocks;
        split_partials_kernel<T, Width, Windowed><<<grid, l.block_threads, 0, stream>>>(d_in, d_partials, num_cols,
                                                                                        l.split_blocks);
        split_merge_kernel<<<num_rows, split_block_threads, 0, stream>>>(d_partials, d_rows, l.split_blocks);
        split_store_kernel<T, Width, Windowed><<<grid, l.block_threads, 0, stream>>>(d_in, d_out, d_rows, num_cols,
                                                                                     l.split_blocks);
        return cudaGetLastError();
    }
    if constexpr (bulk_copies) {
        if (l.cluster_blocks > 0) {
            return launch_clusters<T, Width, Values, Windowed>(l, d_in, d_out, num_rows, num_cols, stream);
        }
    }
    softmax_rows_kernel<T, Width, Values, Windowed><<<grid, l.block_threads, 0, stream>>>(d_in, d_out, num_rows,
                                                                                         num_cols, l.group_threads);
    return cudaGetLastError();
}

//! @brief launch() with `values` values a thread, one of `Candidates` (values_per_thread() chooses among them).
template <typename T, int Width, bool Windowed, int... Candidates>
inline cudaError_t launch_values(int values, void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,
                                 T* d_out, int num_rows, int num_cols, cudaStream_t stream)
{
    cudaError_t result = cudaErrorInvalidValue;
    (void)((values == Candidates && (result = launch<T, Width, Candidates, Windowed>(d_temp_storage, temp_storage_bytes,
                                                                                     d_in, d_out, num_rows, num_cols,
                                                                                     stream),
                                     true)) ||
           ...);
    return result;
}

//! @brief y = softmax(x) along each row of a row-major `num_rows` x `num_cols` matrix, in fp32 or bf16 (math in
//!        fp32). Two phases, as CUB: with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`.
//! @param[in] d_temp_storage device workspace of `temp_storage_bytes` (rows longer than a cluster keep their
//!            blocks' partials there), or nullptr to ask its size
//! @param[in,out] temp_storage_bytes the workspace's size (at least 1)
//! @param[in] d_in  `num_rows * num_cols` values, row-major
//! @param[out] d_out the softmax of each row; may be `d_in` (in place)
//! @param[in] num_rows, num_cols the matrix's shape
//! @param[in] stream stream to launch on
//! @pre `num_rows >= 1`, `num_cols >= 1`; `d_in` and `d_out` aligned to their element type (16-byte accesses
//!      wherever both are equally far past a 16-byte boundary, and rows of every length); `d_temp_storage`
//!      4-byte aligned. A row with a NaN or +inf is NaN, a row of -inf values is NaN (0 / 0); -inf elements of
//!      other rows give 0.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
inline cudaError_t softmax_of(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in, T* d_out,
                              int num_rows, int num_cols, cudaStream_t stream)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (d_in == nullptr || d_out == nullptr || num_rows < 1 || num_cols < 1 || !aligned(d_in, sizeof(T)) ||
        !aligned(d_out, sizeof(T)) || (d_temp_storage != nullptr && !aligned(d_temp_storage, alignof(Partial)))) {
        return cudaErrorInvalidValue;
    }
    if (num_cols % width == 0 && aligned(d_in, vector_bytes) && aligned(d_out, vector_bytes)) {
        const int values = values_per_thread<T>(num_cols);
        if constexpr (sizeof(T) == 4) {
            return launch_values<T, width, false, 8, 16, 32>(values, d_temp_storage, temp_storage_bytes, d_in, d_out,
                                                             num_rows, num_cols, stream);
        } else {
            return launch_values<T, width, false, 16, 32, 64>(values, d_temp_storage, temp_storage_bytes, d_in, d_out,
                                                              num_rows, num_cols, stream);
        }
    }
    // A row of fewer than 2 width - 1 values may hold no whole chunk: a value an access, as many values a thread as
    // an aligned row of its length takes.
    if (num_cols < 2 * width - 1) {
        constexpr int short_row_values = sizeof(T) == 4 ? 8 : 16;
        return launch<T, 1, short_row_values>(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols,
                                              stream);
    }
    // Rows at any 16-byte misalignment, the same in input and output: peeled in the rows kernel, through windows of
    // up to num_cols + width - 1 values (an int) in the cluster and split paths.
    const std::uintptr_t apart = reinterpret_cast<std::uintptr_t>(d_out) - reinterpret_cast<std::uintptr_t>(d_in);
    if (apart % vector_bytes == 0 && num_cols <= std::numeric_limits<int>::max() - (width - 1)) {
        const int values = values_per_thread<T>(num_cols + (width - 1));
        if constexpr (sizeof(T) == 4) {
            return launch_values<T, width, true, 8, 16, 32>(values, d_temp_storage, temp_storage_bytes, d_in, d_out,
                                                            num_rows, num_cols, stream);
        } else {
            return launch_values<T, width, true, 16, 32, 64>(values, d_temp_storage, temp_storage_bytes, d_in, d_out,
                                                             num_rows, num_cols, stream);
        }
    }
    return launch<T, 1, 16>(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols, stream);
}

//! @brief Softmax of fp32 rows (see softmax_of()).
inline cudaError_t softmax(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_in, float* d_out,
                           int num_rows, int num_cols, cudaStream_t stream = 0)
{
    return softmax_of(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols, stream);
}

//! @brief Softmax of bf16 rows, math in fp32 (see softmax_of()).
inline cudaError_t softmax(void* d_temp_storage, std::size_t& temp_storage_bytes, const __nv_bfloat16* d_in,
                           __nv_bfloat16* d_out, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    return softmax_of(d_temp_storage, temp_storage_bytes, d_in, d_out, num_rows, num_cols, stream);
}

}  // namespace stepwise::softmax::row_ends_staged
