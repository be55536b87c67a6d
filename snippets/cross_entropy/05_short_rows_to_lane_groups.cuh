//! @file 05_short_rows_to_lane_groups.cuh
//! @brief Cross-entropy step 5 (beyond the source articles): rows of up to 256 logits go to groups of lanes, several
//!        rows a block, their sums by shuffles within the group, with no barrier.
//!
//! Steps 2 to 4 give each row a block, of just enough warps for its logits: a row of 3 logits takes a block of one
//! warp, 29 of its lanes idle, and its block passes two barriers to merge the warps' parts. At most 32 blocks are
//! resident on an SM, so 100000 rows of 3 logits run in waves of a few thousand blocks, each a chain of dependent
//! steps (the label, its logit, the merge, the loss): step 4 takes 166 us there, about 3 % of the copy's speed. Here
//! a row of up to 256 logits takes a group of lanes, a power of two of them, each holding 8 logits (one or two
//! 16-byte accesses where every row starts on a 16-byte boundary, else a logit an access), and a block of 256
//! threads takes 256 / lanes rows. The group merges its lanes' parts, and sums the label's logit from the lane that
//! holds it, with `__shfl_xor_sync` within the group; the group's first lane writes the row's loss. Longer rows keep
//! step 4's kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::cross_entropy::short_rows_to_lane_groups {

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

//! @brief The merge of every thread's part of the block (a multiple of a warp); every thread gets it.
__device__ inline Partial block_merge(Partial p, Partial* shared)
{
    for (int offset = warp_threads / 2; offset > 0; offset /= 2) {
        p = merge(p, {__shfl_xor_sync(0xffffffffu, p.max, offset), __shfl_xor_sync(0xffffffffu, p.sum, offset)});
    }
    const int warp = threadIdx.x / warp_threads, lane = threadIdx.x % warp_threads;
    if (lane == 0) {
        shared[warp] = p;
    }
    __syncthreads();
    if (warp == 0) {
        p = lane < static_cast<int>(blockDim.x) / warp_threads ? shared[lane] : Partial{-INFINITY, 0.0f};
        for (int offset = warp_threads / 2; offset > 0; offset /= 2) {
            p = merge(p, {__shfl_xor_sync(0xffffffffu, p.max, offset), __shfl_xor_sync(0xffffffffu, p.sum, offset)});
        }
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

}  // namespace stepwise::cross_entropy::short_rows_to_lane_groups
