//! @file 08_label_stored_apart.cuh
//! @brief Cross-entropy step 8 (beyond the source articles): the cluster path's gradient with no test a logit; the one
//!        thread whose chunks hold the label's logit writes the label's gradient, and the row's loss, on its own.
//!
//! Step 7's cluster kernel writes each logit's gradient as v * factor less the scale where the logit is the label's:
//! a comparison and a select for every logit of the row, for the one logit in 50257 that is the label, where the
//! softmax chapter's store of the same values only multiplies. At 4096 x 151936 bf16 the kernel executed 22 % more
//! instructions than the softmax chapter's cluster kernel in the same configuration, and ran 18 % longer. Here every
//! logit's gradient is v * factor; the thread whose chunks hold the label finds it with one comparison a chunk, reads
//! the label's logit from its slice in shared memory, and after its chunks are out writes the label's gradient over
//! them, exp(x - max) scale / sum - scale, and the row's loss. Rank 0 no longer reads the label's logit from global
//! memory.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

namespace stepwise::cross_entropy::label_stored_apart {

constexpr int vector_bytes = 16;        //!< one load or store of the 16-byte paths
constexpr int warp_threads = 32;
constexpr int max_block_threads = 1024;  //!< the largest block of a row
constexpr int values_per_thread = 32;    //!< the registers of a row's thread
constexpr int register_row_values = max_block_threads * values_per_thread;  //!< longest row held in registers
constexpr int long_rows_block = 1024;    //!< threads of the longer rows' block
constexpr int labels_block = 1024;       //!< threads of the one block that counts the labels, and that sums the losses
constexpr int short_rows_block = 256;     //!< threads of the short rows' block: several rows, a group of lanes each
constexpr int short_lane_values = 8;      //!< logits each lane of a short row holds
constexpr int short_row_values = warp_threads * short_lane_values;  //!< the longest short row: a warp's, 256 logits
constexpr int cluster_block_threads = 256;    //!< the most threads of a block of a cluster
constexpr int portable_cluster_blocks = 8;    //!< the cluster size every GPU with clusters takes
constexpr int max_cluster_blocks = 16;        //!< the largest, where the GPU allows it (H100, H200)
constexpr int cluster_values = 64;            //!< logits a thread of a cluster holds (fp32 rows of 16 blocks of 32: 32)
constexpr int cluster_thread_bytes = 128;     //!< the bytes of its logits a thread holds at three blocks an SM

//! @brief Blocks of the cluster kernel an SM holds: three (at most 80 registers a thread) where a thread's logits take
//!        cluster_thread_bytes, two (128 registers) where they take more (fp32 rows past 16 blocks of 32 logits).
template <typename T, int Values>
constexpr int cluster_blocks_per_sm = Values * static_cast<int>(sizeof(T)) <= cluster_thread_bytes ? 3 : 2;
constexpr std::size_t workspace_alignment = 256;
constexpr float log2e = 1.4426950408889634f;  //!< log2(e): exp(d) = exp2(d log2(e))

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

//! @brief Whether a token's label leaves it out: `ignore_index`, or any label outside [0, num_cols) (treated alike).
__device__ __forceinline__ bool ignored(int label, int num_cols, int ignore_index)
{
    return label == ignore_index || label < 0 || label >= num_cols;
}

//! @brief `Width` consecutive elements, loaded or stored as one access.
template <typename T, int Width>
struct alignas(sizeof(T) * Width) Chunk {
    T v[Width];
};

//! @brief How a row is held where it may start off a 16-byte boundary: `lead` logits before its first boundary (all of
//!        them in a row that has none), `body` whole chunks from there, `tail` logits after them. Slot `s` of the
//!        aligned layout holds chunk `s` of the body where `s < body`; the slots after them hold the ends, value by
//!        value: slot position `k = (s - body) * Width + i` is logit `k` where `k < lead`, logit
//!        `lead + body * Width + (k - lead)` where `lead <= k < lead + tail`, and none after.
struct Peel {
    int lead;
    int body;
    int tail;
};

//! @brief The peel of a row of `num_cols` logits whose first is `head` logits past a 16-byte boundary. An aligned
//!        row is its body alone when `Width` divides `num_cols`.
template <int Width>
__host__ __device__ constexpr Peel peel_for(int head, int num_cols)
{
    const int to_boundary = (Width - head) % Width;
    const int lead = to_boundary < num_cols ? to_boundary : num_cols;
    const int body = (num_cols - lead) / Width;
    return {lead, body, num_cols - lead - body * Width};
}

//! @brief The column of position `k` of a row's ends (see Peel), or -1 past them.
template <int Width>
__host__ __device__ constexpr int end_column(const Peel& peel, int k)
{
    return k < peel.lead ? k : k < peel.lead + peel.tail ? peel.body * Width + k : -1;
}

//! @brief The logits of a row at `row` that precede it since the 16-byte boundary at or before it.
template <typename T>
__device__ __forceinline__ int head_of(const T* row)
{
    return static_cast<int>(reinterpret_cast<std::uintptr_t>(row) % vector_bytes / sizeof(T));
}

//! @brief Part of a row: its maximum and the sum of exp(x - max) over it (sum 0: no values, whatever the maximum).
struct Partial {
    float max;
    float sum;
};

//! @brief exp(d) as the hardware's base-2 exponential of d log2(e): exp2f(-inf) = 0, NaN stays NaN.
__device__ __forceinline__ float exp_of(float d) { return exp2f(d * log2e); }

//! @brief Online softmax's merge of two parts. A part of sum 0 adds nothing, even where both maxima are -inf; a NaN
//!        sum stays NaN.
__device__ __forceinline__ Partial merge(Partial a, Partial b)
{
    const float max = fmaxf(a.max, b.max);
    const float sa = a.sum == 0.0f ? 0.0f : a.sum * exp_of(a.max - max);
    const float sb = b.sum == 0.0f ? 0.0f : b.sum * exp_of(b.max - max);
    return {max, sa + sb};
}

//! @brief The merge of a warp's parts (shuffles within `width` lanes, a power of two); every lane gets it.
__device__ __forceinline__ Partial merge_lanes(Partial p, int width)
{
    for (int offset = width / 2; offset > 0; offset /= 2) {
        p = merge(p, {__shfl_xor_sync(0xffffffffu, p.max, offset), __shfl_xor_sync(0xffffffffu, p.sum, offset)});
    }
    return p;
}

//! @brief The merge of every thread's part of the block (a multiple of a warp); every thread gets it.
__device__ inline Partial block_merge(Partial p, Partial* shared)
{
    p = merge_lanes(p, warp_threads);
    const int warp = threadIdx.x / warp_threads, lane = threadIdx.x % warp_threads;
    if (lane == 0) {
        shared[warp] = p;
    }
    __syncthreads();
    if (warp == 0) {
        p = merge_lanes(lane < static_cast<int>(blockDim.x) / warp_threads ? shared[lane] : Partial{-INFINITY, 0.0f},
                        warp_threads);
        if (lane == 0) {
            shared[0] = p;
        }
    }
    __syncthreads();
    return shared[0];
}

//! @brief One block: the tokens whose label is not ignored, into `*count`. Static, as mean_kernel(), and
//!        block_merge() inline: each program file that includes this one has its own (the tests include it beside
//!        the timing program).
static __global__ void __launch_bounds__(labels_block)
    count_kernel(const int* labels, int num_rows, int num_cols, int ignore_index, int* count)
{
    __shared__ int counts[labels_block / warp_threads];
    int n = 0;
    for (int i = threadIdx.x; i < num_rows; i += labels_block) {
        n += ignored(labels[i], num_cols, ignore_index) ? 0 : 1;
    }
    for (int offset = warp_threads / 2; offset > 0; offset /= 2) {
        n += __shfl_xor_sync(0xffffffffu, n, offset);
    }
    if (threadIdx.x % warp_threads == 0) {
        counts[threadIdx.x / warp_threads] = n;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < labels_block / warp_threads; ++w) {
            total += counts[w];
        }
        *count = total;
    }
}

//! @brief One block: the mean of the rows' losses (ignored rows hold 0) over `*count`, summed in a fixed order.
static __global__ void __launch_bounds__(labels_block)
    mean_kernel(const float* row_loss, int num_rows, const int* count, float* loss)
{
    __shared__ float sums[labels_block];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < num_rows; i += labels_block) {
        sum += row_loss[i];
    }
    sums[threadIdx.x] = sum;
    __syncthreads();
    for (int half = labels_block / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            sums[threadIdx.x] += sums[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *loss = sums[0] / static_cast<float>(*count);  // 0 / 0 = NaN when every token is ignored
    }
}

//! @brief Zeroes row `blockIdx.x` of the gradient and its loss: an ignored token. Where `Peeled`, the row's body a
//!        chunk an access and its ends a value an access (see Peel).
template <typename T, int Width, bool Peeled>
__device__ void zero_row(T* grad, std::size_t first, int num_cols, float* row_loss)
{
    Chunk<T, Width> zero;
    for (int k = 0; k < Width; ++k) {
        zero.v[k] = from_float<T>(0.0f);
    }
    const Peel peel = Peeled ? peel_for<Width>(head_of(grad + first), num_cols) : Peel{0, num_cols / Width, 0};
    for (int slot = threadIdx.x; slot < peel.body; slot += blockDim.x) {
        *reinterpret_cast<Chunk<T, Width>*>(grad + first + peel.lead + slot * Width) = zero;
    }
    if (Peeled && static_cast<int>(threadIdx.x) < peel.lead + peel.tail) {
        grad[first + end_column<Width>(peel, threadIdx.x)] = from_float<T>(0.0f);
    }
    if (threadIdx.x == 0) {
        row_loss[blockIdx.x] = 0.0f;
    }
}

//! @brief The row's log-sum-exp from its merged part (a +inf maximum makes it NaN), its loss into `row_loss`, and the
//!        factor of exp(x - max) in the gradient: the gradient's scale over the sum.
__device__ __forceinline__ float finish_row(Partial total, float label_logit, const int* count, float dloss,
                                            float* row_loss, float* scale)
{
    const float sum = total.max == INFINITY ? NAN : total.sum;
    if (threadIdx.x == 0) {
        row_loss[blockIdx.x] = (total.max - label_logit) + logf(sum);  // log(sum) kept beside a huge max
    }
    *scale = dloss / static_cast<float>(*count);
    return *scale / sum;
}

//! @brief Row `blockIdx.x` (at most blockDim.x * values_per_thread values) held in registers: its loss into
//!        `row_loss`, its gradient into `grad` (which may be `logits`: every value is read before any is written).
//!        Slot `s` of the row (chunk `s / blockDim.x` of thread `s % blockDim.x`) holds columns `s * Width` on, or
//!        where `Peeled`, the row's body and ends (see Peel; `grad` as far past a boundary as `logits`).
template <typename T, int Width, bool Peeled>
__global__ void __launch_bounds__(max_block_threads) rows_kernel(const T* logits, const int* labels, const int* count,
                                                                 int num_cols, int ignore_index, float dloss, T* grad,
                                                                 float* row_loss)
{
    constexpr int chunks = values_per_thread / Width;
    __shared__ Partial shared[max_block_threads / warp_threads];
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const int label = labels[blockIdx.x];
    if (ignored(label, num_cols, ignore_index)) {
        zero_row<T, Width, Peeled>(grad, first, num_cols, row_loss);
        return;
    }
    const float label_logit = to_float(logits[first + label]);  // read before the merge's barrier: before any write
    const Peel peel = Peeled ? peel_for<Width>(head_of(logits + first), num_cols) : Peel{0, num_cols / Width, 0};
    // The column of position k of a slot past the body, or -1 where it holds none.
    const auto end_at = [&](int slot, int k) { return end_column<Width>(peel, (slot - peel.body) * Width + k); };
    float v[values_per_thread];
    float max = -INFINITY;
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
        const int slot = c * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
        Chunk<T, Width> chunk{};
        if (slot < peel.body) {  // a whole chunk of the body: one access
            chunk = *reinterpret_cast<const Chunk<T, Width>*>(logits + first + peel.lead + slot * Width);
        }
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            v[c * Width + k] = slot < peel.body ? to_float(chunk.v[k]) : -INFINITY;
            if (Peeled && slot >= peel.body && end_at(slot, k) >= 0) {  // an end: a logit an access
                v[c * Width + k] = to_float(logits[first + end_at(slot, k)]);
            }
            max = fmaxf(max, v[c * Width + k]);
        }
    }
    // A thread of -inf values only (padding, or a row of -inf) shifts by 0: exp_of(-inf) = 0, with no test a value.
    const float shift = max == -INFINITY ? 0.0f : max;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < values_per_thread; ++i) {
        sum += exp_of(v[i] - shift);  // NaN stays
    }
    const Partial total = block_merge({max, sum}, shared);
    float scale = 0.0f;
    const float factor = finish_row(total, label_logit, count, dloss, row_loss, &scale);
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
        const int slot = c * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
        if (slot < peel.body) {
            const int col = peel.lead + slot * Width;
            Chunk<T, Width> chunk;
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                const float onehot = col + k == label ? scale : 0.0f;
                chunk.v[k] = from_float<T>(exp_of(v[c * Width + k] - total.max) * factor - onehot);
            }
            *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = chunk;
        } else if (Peeled) {  // the ends: a logit an access
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                const int col = end_at(slot, k);
                if (col >= 0) {
                    const float onehot = col == label ? scale : 0.0f;
                    grad[first + col] = from_float<T>(exp_of(v[c * Width + k] - total.max) * factor - onehot);
                }
            }
        }
    }
}

//! @brief Adds logit `x` to a part of the row: the online softmax's update (a new maximum rescales the sum; -inf adds
//!        0, even under a -inf maximum; NaN reaches the sum).
__device__ __forceinline__ void add_logit(Partial& p, float x)
{
    if (x > p.max) {
        p = {x, p.sum * exp_of(p.max - x) + 1.0f};
    } else if (x != -INFINITY) {
        p.sum += exp_of(x - p.max);
    }
}

//! @brief Row `blockIdx.x`, longer than a block holds: read once for its online (max, sum), once more for the
//!        gradient: its body chunk by chunk, and where `Peeled` its ends value by value (see Peel). `grad` may be
//!        `logits`: each element is read, then written, by the same thread.
template <typename T, int Width, bool Peeled>
__global__ void __launch_bounds__(long_rows_block) long_rows_kernel(const T* logits, const int* labels,
                                                                    const int* count, int num_cols, int ignore_index,
                                                                    float dloss, T* grad, float* row_loss)
{
    __shared__ Partial shared[long_rows_block / warp_threads];
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const int label = labels[blockIdx.x];
    if (ignored(label, num_cols, ignore_index)) {
        zero_row<T, Width, Peeled>(grad, first, num_cols, row_loss);
        return;
    }
    const float label_logit = to_float(logits[first + label]);
    const Peel peel = Peeled ? peel_for<Width>(head_of(logits + first), num_cols) : Peel{0, num_cols / Width, 0};
    const int ends = peel.lead + peel.tail;  // the thread's end position, if any, is threadIdx.x
    const int end_col = static_cast<int>(threadIdx.x) < ends ? end_column<Width>(peel, threadIdx.x) : -1;
    Partial p{-INFINITY, 0.0f};
    for (int slot = threadIdx.x; slot < peel.body; slot += long_rows_block) {
        const int col = peel.lead + slot * Width;
        const Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(logits + first + col);
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            add_logit(p, to_float(chunk.v[k]));
        }
    }
    if (Peeled && end_col >= 0) {
        add_logit(p, to_float(logits[first + end_col]));
    }
    const Partial total = block_merge(p, shared);
    float scale = 0.0f;
    const float factor = finish_row(total, label_logit, count, dloss, row_loss, &scale);
    for (int slot = threadIdx.x; slot < peel.body; slot += long_rows_block) {
        const int col = peel.lead + slot * Width;
        Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(logits + first + col);
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            const float onehot = col + k == label ? scale : 0.0f;
            chunk.v[k] = from_float<T>(exp_of(to_float(chunk.v[k]) - total.max) * factor - onehot);
        }
        *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = chunk;
    }
    if (Peeled && end_col >= 0) {
        const float onehot = end_col == label ? scale : 0.0f;
        grad[first + end_col] = from_float<T>(exp_of(to_float(logits[first + end_col]) - total.max) * factor - onehot);
    }
}

//! @brief Rows of at most short_row_values logits, `group_lanes` lanes a row (a power of two, at most a warp), several
//!        rows a block: lane `l` of a row's group holds its logits `8 l` to `8 l + 7`, 16 bytes an access where
//!        `Chunked` (every row on a 16-byte boundary), else a logit an access. The group merges its lanes' parts and
//!        sums the label's logit (held by one lane, 0 in the others) by shuffles within the group; every lane then
//!        writes its logits' gradient, and the group's first lane the row's loss. `grad` may be `logits`: each lane
//!        reads its own logits, then writes them.
template <typename T, bool Chunked>
static __global__ void __launch_bounds__(short_rows_block)
    short_rows_kernel(const T* logits, const int* labels, const int* count, int num_rows, int num_cols,
                      int group_lanes, int ignore_index, float dloss, T* grad, float* row_loss)
{
    constexpr int width = Chunked ? vector_bytes / static_cast<int>(sizeof(T)) : 1;
    const int lanes_log2 = __ffs(group_lanes) - 1;  // a power of two of lanes: shifts, not a division
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (short_rows_block >> lanes_log2) +
                             (static_cast<int>(threadIdx.x) >> lanes_log2);
    const int lane = static_cast<int>(threadIdx.x) & (group_lanes - 1);
    const bool in_matrix = row < num_rows;  // lanes past the last row still take part in the shuffles
    const std::size_t first = static_cast<std::size_t>(in_matrix ? row : 0) * num_cols;
    const int label = in_matrix ? labels[row] : ignore_index;
    const bool skip = ignored(label, num_cols, ignore_index);  // the same in every lane of the group
    const int first_col = lane * short_lane_values;
    float v[short_lane_values];
#pragma unroll
    for (int c = 0; c < short_lane_values / width; ++c) {
        const int col = first_col + c * width;  // a whole access is in the row or out of it (Chunked: Width divides num_cols)
        Chunk<T, width> chunk{};
        if (!skip && col < num_cols) {
            chunk = *reinterpret_cast<const Chunk<T, width>*>(logits + first + col);
        }
#pragma unroll
        for (int k = 0; k < width; ++k) {
            v[c * width + k] = !skip && col < num_cols ? to_float(chunk.v[k]) : -INFINITY;
        }
    }
    float max = -INFINITY, label_logit = 0.0f;
#pragma unroll
    for (int k = 0; k < short_lane_values; ++k) {
        max = fmaxf(max, v[k]);
        label_logit = first_col + k == label ? v[k] : label_logit;
    }
    const float shift = max == -INFINITY ? 0.0f : max;  // a lane of -inf only (padding) adds 0, as in step 3
    Partial part{max, 0.0f};
#pragma unroll
    for (int k = 0; k < short_lane_values; ++k) {
        part.sum += exp_of(v[k] - shift);  // NaN stays
    }
    for (int offset = group_lanes / 2; offset > 0; offset /= 2) {  // within the group: offsets below its lanes
        part = merge(part, {__shfl_xor_sync(0xffffffffu, part.max, offset),
                            __shfl_xor_sync(0xffffffffu, part.sum, offset)});
        label_logit += __shfl_xor_sync(0xffffffffu, label_logit, offset);  // one lane holds it, the others 0
    }
    if (!in_matrix) {
        return;
    }
    float scale = 0.0f, factor = 0.0f;
    if (!skip) {
        const float sum = part.max == INFINITY ? NAN : part.sum;
        if (lane == 0) {
            row_loss[row] = (part.max - label_logit) + logf(sum);
        }
        scale = dloss / static_cast<float>(*count);
        factor = scale / sum;
    } else if (lane == 0) {
        row_loss[row] = 0.0f;
    }
#pragma unroll
    for (int c = 0; c < short_lane_values / width; ++c) {
        const int col = first_col + c * width;
        if (col < num_cols) {
            Chunk<T, width> chunk;
#pragma unroll
            for (int k = 0; k < width; ++k) {
                const float onehot = col + k == label ? scale : 0.0f;
                chunk.v[k] = from_float<T>(skip ? 0.0f : exp_of(v[c * width + k] - part.max) * factor - onehot);
            }
            *reinterpret_cast<Chunk<T, width>*>(grad + first + col) = chunk;
        }
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
//! @brief The shared-memory address of `p`, as barriers and bulk copies take it.
__device__ __forceinline__ std::uint32_t smem_address(const void* p)
{
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

//! @brief A transaction barrier in shared memory that one arrival and the bytes it expects complete.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* barrier)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(barrier)) : "memory");
}

//! @brief The barrier's one arrival of this phase, which then waits for `bytes` more to land (0: complete now).
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

//! @brief The merge of every thread's part of the block behind one barrier; every thread gets it. `warp_partials`
//!        alternates from row to row, so that no warp of the next row overwrites a part another warp still reads.
__device__ __forceinline__ Partial merge_block_once(Partial p, Partial* warp_partials)
{
    const int lane = static_cast<int>(threadIdx.x) % warp_threads;
    p = merge_lanes(p, warp_threads);
    if (lane == 0) {
        warp_partials[threadIdx.x / warp_threads] = p;
    }
    __syncthreads();
    const int warps = static_cast<int>(blockDim.x) / warp_threads;
    return merge_lanes(lane < warps ? warp_partials[lane] : Partial{-INFINITY, 0.0f}, warp_threads);
}

//! @brief Fills the thread's chunks of the staged slice (its columns from `first` on) that lie past the row with -inf:
//!        the bulk copy brings only the row's. Each thread reads only its own chunks of the slice, so no barrier
//!        follows.
template <int Width, typename T>
__device__ __forceinline__ void stage_padding(T* staged, int base, int stride, int chunks, int first, int num_cols)
{
#pragma unroll 1
    for (int c = 0; c < chunks; ++c) {
        const int col = base + c * stride;
        if (col >= num_cols) {
            Chunk<T, Width> chunk;
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                chunk.v[k] = from_float<T>(-INFINITY);
            }
            *reinterpret_cast<Chunk<T, Width>*>(staged + (col - first)) = chunk;
        }
    }
}

//! @brief Whether the chunk at window column `col` holds only logits of the row (window column `col` being the row's
//!        logit `col - head`).
template <int Width>
__device__ __forceinline__ bool whole_chunk(int col, int head, int num_cols)
{
    return col >= head && col + Width <= head + num_cols;
}

//! @brief Fills the thread's chunks of the staged slice (its window columns from `first` on) that the bulk copy left
//!        out: a chunk across the row's start or end with its logits from `in` and -inf outside the row, a chunk past
//!        the row with -inf. Each thread reads only its own chunks of the slice, so no barrier follows.
template <int Width, typename T>
__device__ __forceinline__ void stage_ends(T* staged, const T* in, int base, int stride, int chunks, int first,
                                           int head, int num_cols)
{
#pragma unroll 1
    for (int c = 0; c < chunks; ++c) {
        const int col = base + c * stride;
        if (!whole_chunk<Width>(col, head, num_cols)) {
            Chunk<T, Width> chunk;
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                const int j = col + k - head;
                chunk.v[k] = j >= 0 && j < num_cols ? in[j] : from_float<T>(-INFINITY);
            }
            *reinterpret_cast<Chunk<T, Width>*>(staged + (col - first)) = chunk;
        }
    }
}

//! @brief Loads the thread's chunks of the staged slice as floats (`Width` logits an access).
template <int Width, typename T, int Values>
__device__ __forceinline__ void load_staged(float (&v)[Values], const T* staged, int base, int stride, int first)
{
#pragma unroll
    for (int c = 0; c < Values / Width; ++c) {
        const Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(staged + (base + c * stride - first));
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            v[c * Width + k] = to_float(chunk.v[k]);
        }
    }
}

//! @brief Writes `v * factor` into the thread's chunks of the row (window columns
//!        `base` on, `stride` apart; window column `col` is the row's column `col - head`), one access a chunk; nothing
//!        of a chunk past the row. Every chunk of the thread is whole where the row does not start past it.
template <int Width, typename T, int Values>
__device__ __forceinline__ void store_chunks(const float (&v)[Values], T* out, int base, int stride, int head,
                                             int num_cols, float factor)
{
#pragma unroll
    for (int c = 0; c < Values / Width; ++c) {
        const int col = base + c * stride;
        Chunk<T, Width> chunk;
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            chunk.v[k] = from_float<T>(v[c * Width + k] * factor);
        }
        if (col < head + num_cols) {
            *reinterpret_cast<Chunk<T, Width>*>(out + (col - head)) = chunk;
        }
    }
}

//! @brief Writes `v * factor` into the thread's chunks of the row's window: a
//!        chunk wholly in the row as one access; a chunk across the row's start or end into `ends` (slot 0 the start's,
//!        1 the end's) for store_ends(); nothing of a chunk past the row.
template <int Width, typename T, int Values>
__device__ __forceinline__ void store_window(const float (&v)[Values], T* out, int base, int stride, int head,
                                             int num_cols, float factor, Chunk<T, Width>* ends)
{
#pragma unroll
    for (int c = 0; c < Values / Width; ++c) {
        const int col = base + c * stride;
        Chunk<T, Width> chunk;
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            chunk.v[k] = from_float<T>(v[c * Width + k] * factor);
        }
        if (whole_chunk<Width>(col, head, num_cols)) {
            *reinterpret_cast<Chunk<T, Width>*>(out + (col - head)) = chunk;
        } else if (col + Width > head && col < head + num_cols) {
            ends[col < head ? 0 : 1] = chunk;
        }
    }
}

//! @brief Writes the row's logits of the chunks across its start and end that store_window() left in `ends`, a logit
//!        an access, by the threads that hold them.
template <int Width, typename T>
__device__ __forceinline__ void store_ends(const Chunk<T, Width>* ends, T* out, int base, int stride, int chunks,
                                           int head, int num_cols)
{
#pragma unroll 1
    for (int c = 0; c < chunks; ++c) {
        const int col = base + c * stride;
        if (!whole_chunk<Width>(col, head, num_cols) && col + Width > head && col < head + num_cols) {
            const Chunk<T, Width> chunk = ends[col < head ? 0 : 1];
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                const int j = col + k - head;
                if (j >= 0 && j < num_cols) {
                    out[j] = chunk.v[k];
                }
            }
        }
    }
}

//! @brief Rows split over the blocks of a cluster, block `rank` holding window columns [rank s, (rank + 1) s) of every
//!        row, s = blockDim.x * Values; the grid's clusters take rows in turn (persistent). A row's window starts at
//!        the 16-byte boundary at or before its first logit, `head` logits before it (0 where `Windowed` is false:
//!        every row on a boundary). A block's whole chunks of its next row arrive in shared memory by bulk copy while
//!        it works on this one. The threads whose chunks cross the row's start or end, or lie past it, write those
//!        chunks into the slice before they wait for the copy (stage_ends()), so that every thread then reads all its
//!        chunks from the slice with no test a chunk; the threads whose chunks are all in the row store them as step 6
//!        does, the others a logit an access across the ends (store_window(), store_ends()). Those tests kept in the
//!        loops that hold the row made the bf16 kernel spill some 200 bytes a thread. The block's (max, sum) goes to
//!        every block of the cluster by st.async, whose barrier completes when all have landed: no block waits for a
//!        barrier of the whole cluster between rows. Each thread keeps exp(x - its maximum) in registers, and the
//!        gradient is that times exp(its maximum - the row's) times the loss's scale over the sum: one exponential a
//!        logit. The thread whose chunks hold the label's logit reads it from its slice before the block's merge, so
//!        before any block of the cluster writes the row (`grad` may be `logits`), and after its chunks writes the
//!        label's gradient and the row's loss.
template <typename T, int Values, bool Windowed>
static __global__ void __launch_bounds__(cluster_block_threads, cluster_blocks_per_sm<T, Values>)
    cluster_rows_kernel(const T* logits, const int* labels, const int* count, int num_rows, int num_cols,
                        int ignore_index, float dloss, T* grad, float* row_loss)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    constexpr int chunks = Values / width;
    extern __shared__ __align__(16) unsigned char slice_storage[];  // the block's slice of its current row's window
    __shared__ std::uint64_t slice_landed;
    __shared__ std::uint64_t partials_landed[2];  // even and odd exchanges
    __shared__ Partial warp_partials[2][cluster_block_threads / warp_threads];
    __shared__ alignas(16) Partial block_partials[2][max_cluster_blocks];
    __shared__ Chunk<T, width> ends[2];  // the gradient of the chunks across the row's start and end
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int blocks = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int slice = static_cast<int>(blockDim.x) * Values;
    const int first = rank * slice;  // the slice's first window column (a window is at most INT_MAX columns)
    const int base = first + static_cast<int>(threadIdx.x) * width;  // the window column of the thread's first chunk
    const int stride = static_cast<int>(blockDim.x) * width;
    const int last = base + (chunks - 1) * stride;  // of its last chunk
    T* staged = reinterpret_cast<T*>(slice_storage);
    const auto head_of_row = [&](std::int64_t row) { return Windowed ? head_of(logits + row * num_cols) : 0; };
    const auto load_row = [&](std::int64_t row) {  // by thread 0: the slice's whole chunks; an ignored row's none
        const int head = head_of_row(row);
        const int inner_first = Windowed ? max(first, head > 0 ? width : 0) : first;
        const int inner_end = min(first + slice, Windowed ? (head + num_cols) / width * width : num_cols);
        const bool skipped = ignored(labels[row], num_cols, ignore_index) || inner_end <= inner_first;
        const unsigned bytes = skipped ? 0u : static_cast<unsigned>((inner_end - inner_first) * sizeof(T));
        mbarrier_arrive_expect_bytes(&slice_landed, bytes);
        if (bytes > 0) {
            bulk_load(slice_storage + (inner_first - first) * sizeof(T), logits + row * num_cols + (inner_first - head),
                      bytes, &slice_landed);
        }
    };
    if (threadIdx.x == 0) {
        mbarrier_init(&slice_landed);
        mbarrier_init(&partials_landed[0]);
        mbarrier_init(&partials_landed[1]);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster.sync();  // every block's barriers are set before any block pushes to them
    const std::int64_t clusters = gridDim.x / blocks;
    const std::int64_t first_row = blockIdx.x / blocks;
    if (threadIdx.x == 0 && first_row < num_rows) {
        load_row(first_row);
    }
    const float scale = dloss / static_cast<float>(*count);
    int turn = 0, exchange = 0;
    for (std::int64_t row = first_row; row < num_rows; row += clusters, ++turn) {
        const int label = labels[row];
        const int head = head_of_row(row);
        const T* in = logits + row * num_cols;
        T* out = grad + row * num_cols;
        // Every chunk of the thread in the row.
        const bool inside = Windowed ? base >= head && last + width <= head + num_cols : last < num_cols;
        const bool skipped = ignored(label, num_cols, ignore_index);
        if (Windowed && !inside && !skipped) {
            // Read before the wait, these loads overlap the copy's. Only this thread reads these chunks of the slice,
            // and the copy leaves them out.
            stage_ends<width>(staged, in, base, stride, chunks, first, head, num_cols);
            // Before the next row's bulk copy (async proxy) may overwrite what this thread wrote (generic proxy).
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
        // The gradient: a chunk an access, and where the thread holds a chunk across the row's start or end, those
        // chunks a logit an access after the others.
        const auto store_row = [&](const float(&v)[Values], float factor) {
            if (!Windowed || inside) {
                store_chunks<width>(v, out, base, stride, head, num_cols, factor);
            } else {
                store_window<width>(v, out, base, stride, head, num_cols, factor, ends);
                store_ends<width>(ends, out, base, stride, chunks, head, num_cols);
            }
        };
        mbarrier_wait_cluster(&slice_landed, turn % 2);
        float v[Values];
        if (skipped) {  // every block of the cluster skips the exchange alike
#pragma unroll
            for (int i = 0; i < Values; ++i) {
                v[i] = 0.0f;
            }
            if constexpr (Windowed) {
                __syncthreads();  // no thread still reads the last row's ends (store_ends()): no merge barrier since
            }
            store_row(v, 0.0f);
            if (rank == 0 && threadIdx.x == 0) {
                row_loss[row] = 0.0f;
            }
            __syncthreads();  // every thread has waited on this phase before the next row's load arms the barrier
            if (threadIdx.x == 0 && row + clusters < num_rows) {
                load_row(row + clusters);
            }
            continue;
        }
        const int half = exchange % 2;
        if (!Windowed && !inside) {  // rows on 16-byte boundaries as step 6 holds them
            stage_padding<width>(staged, base, stride, chunks, first, num_cols);
            // Before the next row's bulk copy (async proxy) may overwrite what this thread wrote (generic proxy).
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        }
        load_staged<width>(v, staged, base, stride, first);
        // The thread whose chunks hold the label's logit reads it from the slice (before the barrier past which the
        // next row may land there); it alone writes the row's loss and the label's gradient.
        const int label_at = label + head - base;  // the label's place from the thread's first chunk
        bool holds_label = false;
#pragma unroll
        for (int c = 0; c < chunks; ++c) {
            holds_label |= static_cast<unsigned>(label_at - c * stride) < static_cast<unsigned>(width);
        }
        const float label_logit = holds_label ? to_float(staged[label + head - first]) : 0.0f;
        float max = -INFINITY;
#pragma unroll
        for (int i = 0; i < Values; ++i) {
            max = fmaxf(max, v[i]);
        }
        const float shift = max == -INFINITY ? 0.0f : max;  // a thread of -inf only (padding) sums 0
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < Values; ++i) {
            v[i] = exp_of(v[i] - shift);  // NaN stays
            sum += v[i];
        }
        // Past merge_block_once's barrier no thread reads the slice: the next row's may land there.
        const Partial block = merge_block_once({max, sum}, warp_partials[half]);
        if (threadIdx.x == 0) {
            if (row + clusters < num_rows) {
                load_row(row + clusters);
            }
            mbarrier_arrive_expect_bytes(&partials_landed[half], blocks * sizeof(Partial));
        }
        if (static_cast<int>(threadIdx.x) < blocks) {
            push(&block_partials[half][rank], &partials_landed[half], static_cast<int>(threadIdx.x), block);
        }
        mbarrier_wait_cluster(&partials_landed[half], (exchange / 2) % 2);
        Partial total{-INFINITY, 0.0f};
        for (int r = 0; r < blocks; ++r) {  // in the order of the ranks in every block: the same total everywhere
            total = merge(total, block_partials[half][r]);
        }
        const float total_sum = total.max == INFINITY ? NAN : total.sum;
        if (holds_label) {
            row_loss[row] = (total.max - label_logit) + logf(total_sum);  // log(sum) kept beside a huge max
        }
        // exp(x - max) exp(max - row max) scale / sum. A thread of -inf only holds zeros, and its factor is 0 (NaN
        // where the whole row is -inf: its sum is 0).
        const float factor = (max == -INFINITY ? 0.0f : exp_of(max - total.max)) * (scale / total_sum);
        store_row(v, factor);
        if (holds_label) {  // over what store_row() wrote there: the label's probability less one, scaled
            out[label] = from_float<T>(exp_of(label_logit - total.max) * (scale / total_sum) - scale);
        }
        ++exchange;
    }
    cluster.sync();  // no block leaves while a push to it may be in flight
#endif
}

//! @brief The launch of clusters of `cluster_blocks` blocks of `block_threads` threads, each with the shared memory
//!        of its slice; its grid is one cluster.
template <typename T, int Values>
inline void cluster_config(cudaLaunchConfig_t& config, cudaLaunchAttribute& attribute, int cluster_blocks,
                           int block_threads, cudaStream_t stream)
{
    config = {};
    config.gridDim = dim3(static_cast<unsigned>(cluster_blocks));
    config.blockDim = dim3(static_cast<unsigned>(block_threads));
    config.dynamicSmemBytes = static_cast<std::size_t>(block_threads) * Values * sizeof(T);
    config.stream = stream;
    attribute = {};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim = {static_cast<unsigned>(cluster_blocks), 1, 1};
    config.attrs = &attribute;
    config.numAttrs = 1;
}

//! @brief How many clusters of `cluster_blocks` blocks of `block_threads` threads the current device holds at once:
//!        0 where it launches no clusters or the kernel was not built for sm_90 or newer. The runtime is asked once
//!        per device and shape (a launch would otherwise pay for its queries); the kernel's shared-memory limit is
//!        raised to its largest blocks' and its clusters past the portable 8 allowed, on each device.
template <typename T, int Values, bool Windowed>
inline int active_clusters(int cluster_blocks, int block_threads)
{
    static std::mutex mutex;
    static std::map<std::tuple<int, int, int>, int> known;  // (device, cluster_blocks, block_threads) -> clusters
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    const auto [entry, unknown] = known.try_emplace({device, cluster_blocks, block_threads}, 0);
    if (!unknown) {
        return entry->second;
    }
    const auto kernel = cluster_rows_kernel<T, Values, Windowed>;
    const int largest_slice = cluster_block_threads * Values * static_cast<int>(sizeof(T));
    int cluster_launch = 0;
    cudaFuncAttributes attributes{};
    cudaLaunchConfig_t config;
    cudaLaunchAttribute attribute;
    cluster_config<T, Values>(config, attribute, cluster_blocks, block_threads, 0);
    if (cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
        cluster_launch != 0 && cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
        attributes.binaryVersion >= 90 &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, largest_slice) == cudaSuccess &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
        cudaOccupancyMaxActiveClusters(&entry->second, kernel, &config) != cudaSuccess) {
        entry->second = 0;
    }
    (void)cudaGetLastError();  // a refused query is not a launch's error: the rows take step 5's kernels
    return entry->second;
}

//! @brief The most blocks of a cluster on this device: 16 where the GPU takes clusters beyond the portable 8 of the
//!        largest blocks, 8 where only those, 0 where it launches no clusters.
template <typename T, int Values, bool Windowed>
inline int cluster_limit()
{
    for (const int blocks : {max_cluster_blocks, portable_cluster_blocks}) {
        if (active_clusters<T, Values, Windowed>(blocks, cluster_block_threads) >= 1) {
            return blocks;
        }
    }
    return 0;
}

//! @brief Rows whose window spans `span` columns over a cluster of `Values` logits a thread, where it holds them:
//!        just enough blocks of at most cluster_block_threads, just enough whole warps each, as many clusters as the
//!        GPU holds at once but no more than rows.
//! @return whether it launched: false where the GPU has no such clusters or the row is longer than the largest holds
//!         (the caller takes step 5's kernels); `status` is then the launch's result
template <typename T, int Values, bool Windowed>
bool launch_clusters(const int* count, float* row_loss, const T* d_logits, const int* d_labels, T* d_grad,
                     int num_rows, int num_cols, int span, int ignore_index, float dloss, cudaStream_t stream,
                     cudaError_t& status)
{
    const int limit = cluster_limit<T, Values, Windowed>();
    const std::int64_t threads = (std::int64_t{span} + Values - 1) / Values;
    if (threads > std::int64_t{limit} * cluster_block_threads) {
        return false;
    }
    const int cluster_blocks = static_cast<int>((threads + cluster_block_threads - 1) / cluster_block_threads);
    const std::int64_t per_block = (threads + cluster_blocks - 1) / cluster_blocks;
    const int block_threads = static_cast<int>((per_block + warp_threads - 1) / warp_threads * warp_threads);
    cudaLaunchConfig_t config;
    cudaLaunchAttribute attribute;
    cluster_config<T, Values>(config, attribute, cluster_blocks, block_threads, stream);
    const int clusters = std::min(active_clusters<T, Values, Windowed>(cluster_blocks, block_threads), num_rows);
    if (clusters < 1) {
        return false;
    }
    config.gridDim = dim3(static_cast<unsigned>(clusters * cluster_blocks));
    status = cudaLaunchKernelEx(&config, cluster_rows_kernel<T, Values, Windowed>, d_logits, d_labels, count, num_rows,
                                num_cols, ignore_index, dloss, d_grad, row_loss);
    return true;
}

//! @brief Rows the cluster path takes: 16-byte accesses (`Width` values of 16 bytes), rows whose window is longer than
//!        cluster_cols (bf16: 16384, a block of 256 threads of 64; fp32: 32768, past the rows kernel's registers) and
//!        no longer than 16 blocks of 64 logits a thread; fp32 rows of up to 16 blocks of 32 take 32 a thread (more
//!        threads, more loads in flight for their 128 bytes).
//! @return whether the cluster path took the rows (see launch_clusters()); `status` is then its launch's result
template <typename T, int Width, bool Peeled>
bool launch_long_rows(const int* count, float* row_loss, const T* d_logits, const int* d_labels, T* d_grad,
                      int num_rows, int num_cols, int ignore_index, float dloss, cudaStream_t stream,
                      cudaError_t& status)
{
    constexpr int cluster_cols = sizeof(T) == 2 ? 16384 : register_row_values;
    constexpr int short_values = cluster_values / 2;
    const std::int64_t span = std::int64_t{num_cols} + (Peeled ? Width - 1 : 0);  // the longest window
    if constexpr (Width * sizeof(T) != vector_bytes) {
        return false;
    } else {
        if (span <= cluster_cols || span > std::int64_t{max_cluster_blocks} * cluster_block_threads * cluster_values) {
            return false;
        }
        const int cols = static_cast<int>(span);
        if constexpr (sizeof(T) == 4) {
            if (span <= std::int64_t{max_cluster_blocks} * cluster_block_threads * short_values) {
                return launch_clusters<T, short_values, Peeled>(count, row_loss, d_logits, d_labels, d_grad, num_rows,
                                                                num_cols, cols, ignore_index, dloss, stream, status);
            }
        }
        return launch_clusters<T, cluster_values, Peeled>(count, row_loss, d_logits, d_labels, d_grad, num_rows,
                                                          num_cols, cols, ignore_index, dloss, stream, status);
    }
}

//! @brief The three launches with `Width` elements an access; `Peeled`: rows held as their body and ends.
template <typename T, int Width, bool Peeled = false>
cudaError_t launch(int* count, float* row_loss, const T* d_logits, const int* d_labels, T* d_grad, float* d_loss,
                   int num_rows, int num_cols, int ignore_index, float dloss, cudaStream_t stream)
{
    count_kernel<<<1, labels_block, 0, stream>>>(d_labels, num_rows, num_cols, ignore_index, count);
    if (num_cols <= short_row_values) {
        // The fewest lanes, a power of two, whose short_lane_values logits each hold the row.
        int group_lanes = 1;
        while (group_lanes * short_lane_values < num_cols) {
            group_lanes *= 2;
        }
        const int rows_per_block = short_rows_block / group_lanes;
        const unsigned blocks = static_cast<unsigned>((static_cast<std::int64_t>(num_rows) + rows_per_block - 1) /
                                                      rows_per_block);
        short_rows_kernel<T, (Width > 1 && !Peeled)><<<blocks, short_rows_block, 0, stream>>>(
            d_logits, d_labels, count, num_rows, num_cols, group_lanes, ignore_index, dloss, d_grad, row_loss);
    } else if (cudaError_t status = cudaSuccess; launch_long_rows<T, Width, Peeled>(
                   count, row_loss, d_logits, d_labels, d_grad, num_rows, num_cols, ignore_index, dloss, stream,
                   status)) {
        if (status != cudaSuccess) {
            return status;
        }
    } else if (num_cols <= register_row_values) {
        // Just enough whole warps that each thread holds at most values_per_thread values.
        const int warps = (num_cols + warp_threads * values_per_thread - 1) / (warp_threads * values_per_thread);
        rows_kernel<T, Width, Peeled><<<num_rows, warps * warp_threads, 0, stream>>>(
            d_logits, d_labels, count, num_cols, ignore_index, dloss, d_grad, row_loss);
    } else {
        long_rows_kernel<T, Width, Peeled><<<num_rows, long_rows_block, 0, stream>>>(
            d_logits, d_labels, count, num_cols, ignore_index, dloss, d_grad, row_loss);
    }
    mean_kernel<<<1, labels_block, 0, stream>>>(row_loss, num_rows, count, d_loss);
    return cudaGetLastError();
}

//! @brief The mean cross-entropy loss of `num_rows` tokens and the gradient of the logits (CUB's two phases).
//! @param d_temp_storage workspace, or nullptr to ask for its size in `temp_storage_bytes`
//! @param temp_storage_bytes the workspace's size in bytes (set on the first phase, checked on the second)
//! @param d_logits `num_rows` x `num_cols` logits, row-major
//! @param d_labels `num_rows` labels: a column in [0, num_cols), or `ignore_index`
//! @param d_grad the gradient, `num_rows` x `num_cols`: `d_logits` itself (in place) or a buffer apart from it
//! @param d_loss one float: the mean loss over the tokens not ignored
//! @param num_rows tokens (rows of logits)
//! @param num_cols the vocabulary (logits per row)
//! @param ignore_index the label of tokens left out of the mean (rows of zero gradient), -100 in PyTorch
//! @param dloss the gradient of the final loss with respect to this mean (1 for the loss itself)
//! @param stream the stream of every launch
//! @pre `num_rows >= 1`, `num_cols >= 1`; pointers non-null and aligned to their element type, the workspace to
//!      `workspace_alignment`; `d_grad` is `d_logits` or does not overlap it. A label outside [0, num_cols) other
//!      than `ignore_index` is the caller's error: this step treats it as ignored (no read out of the row). A row
//!      with a NaN or +inf, or of -inf only, has a NaN loss (so the mean is NaN) and a NaN gradient unless ignored.
//!      When every token is ignored the mean is NaN (0 / 0, as PyTorch's mean reduction) and the gradient all zero.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch error
template <typename T>
cudaError_t cross_entropy_of(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_logits,
                             const int* d_labels, T* d_grad, float* d_loss, int num_rows, int num_cols,
                             int ignore_index, float dloss, cudaStream_t stream)
{
    const auto aligned = [](const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (d_logits == nullptr || d_labels == nullptr || d_grad == nullptr || d_loss == nullptr || num_rows < 1 ||
        num_cols < 1 || !aligned(d_logits, sizeof(T)) || !aligned(d_grad, sizeof(T)) ||
        !aligned(d_labels, sizeof(int)) || !aligned(d_loss, sizeof(float)) ||
        (d_temp_storage != nullptr && !aligned(d_temp_storage, workspace_alignment))) {
        return cudaErrorInvalidValue;
    }
    const std::size_t bytes = static_cast<std::size_t>(num_rows) * num_cols * sizeof(T);
    const auto in = reinterpret_cast<std::uintptr_t>(d_logits), out = reinterpret_cast<std::uintptr_t>(d_grad);
    if (in != out && in < out + bytes && out < in + bytes) {
        return cudaErrorInvalidValue;  // partly overlapping: neither in place nor apart
    }
    // The workspace: the count, then each row's loss.
    const std::size_t needed = workspace_alignment + static_cast<std::size_t>(num_rows) * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    int* count = static_cast<int*>(d_temp_storage);
    float* row_loss = reinterpret_cast<float*>(static_cast<unsigned char*>(d_temp_storage) + workspace_alignment);
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    if (num_cols % width == 0 && aligned(d_logits, vector_bytes) && aligned(d_grad, vector_bytes)) {
        return launch<T, width>(count, row_loss, d_logits, d_labels, d_grad, d_loss, num_rows, num_cols, ignore_index,
                                dloss, stream);
    }
    // Equally far past a 16-byte boundary (or in place): body and ends, where the row is long enough that it holds a
    // whole chunk wherever it starts (a shorter row may have none: its ends would take more work than a logit an
    // access).
    if ((out - in) % vector_bytes == 0 && num_cols >= 2 * width - 1) {
        return launch<T, width, true>(count, row_loss, d_logits, d_labels, d_grad, d_loss, num_rows, num_cols,
                                      ignore_index, dloss, stream);
    }
    return launch<T, 1>(count, row_loss, d_logits, d_labels, d_grad, d_loss, num_rows, num_cols, ignore_index, dloss,
                        stream);
}

//! @brief cross_entropy_of() of fp32 logits.
inline cudaError_t cross_entropy(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_logits,
                                 const int* d_labels, float* d_grad, float* d_loss, int num_rows, int num_cols,
                                 int ignore_index, float dloss, cudaStream_t stream = 0)
{
    return cross_entropy_of(d_temp_storage, temp_storage_bytes, d_logits, d_labels, d_grad, d_loss, num_rows,
                            num_cols, ignore_index, dloss, stream);
}

//! @brief cross_entropy_of() of bf16 logits (math in fp32, the gradient rounded to bf16).
inline cudaError_t cross_entropy(void* d_temp_storage, std::size_t& temp_storage_bytes, const __nv_bfloat16* d_logits,
                                 const int* d_labels, __nv_bfloat16* d_grad, float* d_loss, int num_rows, int num_cols,
                                 int ignore_index, float dloss, cudaStream_t stream = 0)
{
    return cross_entropy_of(d_temp_storage, temp_storage_bytes, d_logits, d_labels, d_grad, d_loss, num_rows,
                            num_cols, ignore_index, dloss, stream);
}

}  // namespace stepwise::cross_entropy::label_stored_apart
