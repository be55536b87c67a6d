//! @file 03_exp_as_exp2.cuh
//! @brief Cross-entropy step 3 (beyond the source articles): every exponential as the GPU's base-2 exponential of a
//!        scaled difference, exp2f((x - max) log2(e)), and no test of a value for -inf in the rows held in registers.
//!
//! Step 2 takes each exponential with expf(), whose full-precision range reduction costs several instructions around
//! the hardware's base-2 exponential, twice a value (once for the row's sum, once for its gradient), and tests every
//! value of a row held in registers for -inf before its exponential. Its bf16 rows take nearly as long as its fp32
//! rows for half the bytes: the work a value takes sets their time. Here every exponential is exp2f() of the
//! difference scaled by log2(e), as the softmax chapter computes it: a subtraction, a multiply and the hardware's
//! exp2 (the difference first, so that a huge maximum cancels exactly). Its relative error grows with the
//! difference, about |x - max| 2^-24, within the chapter's tolerances. A thread whose values are all -inf (padding
//! past the row's end, or a row of -inf) shifts them by 0 instead of its -inf maximum, so that each exponential is
//! exp2f(-inf) = 0 with no test a value. Step 2's launches are otherwise unchanged.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::cross_entropy::exp_as_exp2 {

constexpr int vector_bytes = 16;        //!< one load or store of the 16-byte paths
constexpr int warp_threads = 32;
constexpr int max_block_threads = 1024;  //!< the largest block of a row
constexpr int values_per_thread = 32;    //!< the registers of a row's thread
constexpr int register_row_values = max_block_threads * values_per_thread;  //!< longest row held in registers
constexpr int long_rows_block = 1024;    //!< threads of the longer rows' block
constexpr int labels_block = 1024;       //!< threads of the one block that counts the labels, and that sums the losses
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
__device__ Partial block_merge(Partial p, Partial* shared)
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

//! @brief One block: the tokens whose label is not ignored, into `*count`.
__global__ void __launch_bounds__(labels_block) count_kernel(const int* labels, int num_rows, int num_cols,
                                                             int ignore_index, int* count)
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
__global__ void __launch_bounds__(labels_block) mean_kernel(const float* row_loss, int num_rows, const int* count,
                                                            float* loss)
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

//! @brief Zeroes row `blockIdx.x` of the gradient and its loss: an ignored token.
template <typename T, int Width>
__device__ void zero_row(T* grad, std::size_t first, int num_cols, float* row_loss)
{
    Chunk<T, Width> zero;
    for (int k = 0; k < Width; ++k) {
        zero.v[k] = from_float<T>(0.0f);
    }
    for (int col = threadIdx.x * Width; col < num_cols; col += blockDim.x * Width) {
        *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = zero;
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
template <typename T, int Width>
__global__ void __launch_bounds__(max_block_threads) rows_kernel(const T* logits, const int* labels, const int* count,
                                                                 int num_cols, int ignore_index, float dloss, T* grad,
                                                                 float* row_loss)
{
    constexpr int chunks = values_per_thread / Width;
    __shared__ Partial shared[max_block_threads / warp_threads];
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const int label = labels[blockIdx.x];
    if (ignored(label, num_cols, ignore_index)) {
        zero_row<T, Width>(grad, first, num_cols, row_loss);
        return;
    }
    const float label_logit = to_float(logits[first + label]);  // read before the merge's barrier: before any write
    float v[values_per_thread];
    float max = -INFINITY;
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
        const int col = (c * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * Width;
        Chunk<T, Width> chunk{};
        if (col < num_cols) {  // a whole chunk is in the row or out of it (Width divides num_cols)
            chunk = *reinterpret_cast<const Chunk<T, Width>*>(logits + first + col);
        }
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            v[c * Width + k] = col < num_cols ? to_float(chunk.v[k]) : -INFINITY;
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
        const int col = (c * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * Width;
        if (col < num_cols) {
            Chunk<T, Width> chunk;
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                const float onehot = col + k == label ? scale : 0.0f;
                chunk.v[k] = from_float<T>(exp_of(v[c * Width + k] - total.max) * factor - onehot);
            }
            *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = chunk;
        }
    }
}

//! @brief Row `blockIdx.x`, longer than a block holds: read once for its online (max, sum), once more for the
//!        gradient. `grad` may be `logits`: each element is read, then written, by the same thread.
template <typename T, int Width>
__global__ void __launch_bounds__(long_rows_block) long_rows_kernel(const T* logits, const int* labels,
                                                                    const int* count, int num_cols, int ignore_index,
                                                                    float dloss, T* grad, float* row_loss)
{
    __shared__ Partial shared[long_rows_block / warp_threads];
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const int label = labels[blockIdx.x];
    if (ignored(label, num_cols, ignore_index)) {
        zero_row<T, Width>(grad, first, num_cols, row_loss);
        return;
    }
    const float label_logit = to_float(logits[first + label]);
    Partial p{-INFINITY, 0.0f};
    for (int col = threadIdx.x * Width; col < num_cols; col += long_rows_block * Width) {
        const Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(logits + first + col);
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            const float x = to_float(chunk.v[k]);
            if (x > p.max) {  // a new maximum rescales the sum: online softmax
                p = {x, p.sum * exp_of(p.max - x) + 1.0f};
            } else if (x != -INFINITY) {  // -inf adds 0, even under a -inf maximum; NaN reaches the sum
                p.sum += exp_of(x - p.max);
            }
        }
    }
    const Partial total = block_merge(p, shared);
    float scale = 0.0f;
    const float factor = finish_row(total, label_logit, count, dloss, row_loss, &scale);
    for (int col = threadIdx.x * Width; col < num_cols; col += long_rows_block * Width) {
        Chunk<T, Width> chunk = *reinterpret_cast<const Chunk<T, Width>*>(logits + first + col);
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            const float onehot = col + k == label ? scale : 0.0f;
            chunk.v[k] = from_float<T>(exp_of(to_float(chunk.v[k]) - total.max) * factor - onehot);
        }
        *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = chunk;
    }
}

//! @brief The three launches with `Width` elements an access.
template <typename T, int Width>
cudaError_t launch(int* count, float* row_loss, const T* d_logits, const int* d_labels, T* d_grad, float* d_loss,
                   int num_rows, int num_cols, int ignore_index, float dloss, cudaStream_t stream)
{
    count_kernel<<<1, labels_block, 0, stream>>>(d_labels, num_rows, num_cols, ignore_index, count);
    if (num_cols <= register_row_values) {
        // Just enough whole warps that each thread holds at most values_per_thread values.
        const int warps = (num_cols + warp_threads * values_per_thread - 1) / (warp_threads * values_per_thread);
        rows_kernel<T, Width><<<num_rows, warps * warp_threads, 0, stream>>>(d_logits, d_labels, count, num_cols,
                                                                           ignore_index, dloss, d_grad, row_loss);
    } else {
        long_rows_kernel<T, Width><<<num_rows, long_rows_block, 0, stream>>>(d_logits, d_labels, count, num_cols,
                                                                            ignore_index, dloss, d_grad, row_loss);
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

}  // namespace stepwise::cross_entropy::exp_as_exp2
