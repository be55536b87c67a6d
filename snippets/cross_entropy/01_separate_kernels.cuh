//! @file 01_separate_kernels.cuh
//! @brief Cross-entropy step 1 (beyond the source articles, which stop at softmax): the loss and its gradient, the
//!        formulas in three plain kernels.
//!
//! The first step of the chapter: nothing changed over a previous step, there is none. It writes the formulas as they
//! read. For each token i (a row of `vocab` logits x_i and a label),
//!
//!     loss_i = logsumexp(x_i) - x_i[label_i],   logsumexp(x) = max + log(sum_j exp(x_j - max)),
//!     d_i    = (softmax(x_i) - onehot(label_i)) * dloss / N,
//!
//! N the tokens not ignored, and the loss returned is the mean of loss_i over them. Three kernels, one after the
//! other on the stream:
//!
//! 1. `row_stats_kernel`: a block per row; each thread takes a strided part of the row, and a shared-memory tree
//!    reduction gives the row's maximum, then (a second read of the row) the sum of exp(x - max).
//! 2. `loss_kernel`: one block counts the tokens not ignored and sums their losses (it reads one logit a token, at
//!    its label), and writes the mean.
//! 3. `gradient_kernel`: a block per row reads the row a third time (twice in all for the stats, once here) and
//!    writes (exp(x - max) / sum - onehot) * dloss / N.
//!
//! Its flaws, which the next step fixes: the logits are read three times and the row's statistics go through global
//! memory; each block reduction takes log2(256) synchronized rounds of shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace stepwise::cross_entropy::separate_kernels {

constexpr int block_threads = 256;       //!< threads of a row's block (a power of two: the tree halves it)
constexpr int loss_block_threads = 1024;  //!< threads of the one block that sums the losses
constexpr std::size_t workspace_alignment = 256;  //!< each array of the workspace starts at such a boundary

//! @brief A logit as a float (fp32: itself; bf16: widened exactly).
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

//! @brief A float rounded to the output's type (bf16: to nearest even).
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

//! @brief The tree reduction of one value per thread over the block (`Op`: max or sum); every thread gets the result.
template <typename Op>
__device__ float block_reduce(float value, float* shared, Op op)
{
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int half = block_threads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + half]);
        }
        __syncthreads();
    }
    const float result = shared[0];
    __syncthreads();  // shared[] is reused by the next reduction
    return result;
}

//! @brief Row `blockIdx.x`'s maximum into `row_max` and sum of exp(x - max) into `row_sum`. A NaN reaches the sum
//!        (fmaxf skips it, exp does not); a +inf maximum makes the sum NaN (exp(inf - inf)).
template <typename T>
__global__ void __launch_bounds__(block_threads) row_stats_kernel(const T* logits, int num_cols, float* row_max,
                                                                  float* row_sum)
{
    __shared__ float shared[block_threads];
    const T* row = logits + static_cast<std::size_t>(blockIdx.x) * num_cols;
    float max = -INFINITY;
    for (int j = threadIdx.x; j < num_cols; j += block_threads) {
        max = fmaxf(max, to_float(row[j]));
    }
    max = block_reduce(max, shared, [](float a, float b) { return fmaxf(a, b); });
    float sum = 0.0f;
    for (int j = threadIdx.x; j < num_cols; j += block_threads) {
        sum += expf(to_float(row[j]) - max);
    }
    sum = block_reduce(sum, shared, [](float a, float b) { return a + b; });
    if (threadIdx.x == 0) {
        row_max[blockIdx.x] = max;
        row_sum[blockIdx.x] = sum;
    }
}

//! @brief One block: counts the tokens not ignored into `*count` and writes the mean of their losses,
//!        (max - x[label]) + log(sum), into `*loss` (0 / 0 = NaN when every token is ignored).
template <typename T>
__global__ void __launch_bounds__(loss_block_threads) loss_kernel(const T* logits, const int* labels,
                                                                  const float* row_max, const float* row_sum,
                                                                  int num_rows, int num_cols, int ignore_index,
                                                                  int* count, float* loss)
{
    __shared__ float sums[loss_block_threads];
    __shared__ int counts[loss_block_threads];
    float sum = 0.0f;
    int n = 0;
    for (int i = threadIdx.x; i < num_rows; i += loss_block_threads) {
        const int label = labels[i];
        if (!ignored(label, num_cols, ignore_index)) {
            const float x = to_float(logits[static_cast<std::size_t>(i) * num_cols + label]);
            sum += (row_max[i] - x) + logf(row_sum[i]);  // log(sum) kept beside a huge max
            ++n;
        }
    }
    sums[threadIdx.x] = sum;
    counts[threadIdx.x] = n;
    __syncthreads();
    for (int half = loss_block_threads / 2; half > 0; half /= 2) {
        if (static_cast<int>(threadIdx.x) < half) {
            sums[threadIdx.x] += sums[threadIdx.x + half];
            counts[threadIdx.x] += counts[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *count = counts[0];
        *loss = sums[0] / static_cast<float>(counts[0]);
    }
}

//! @brief Row `blockIdx.x` of the gradient: (exp(x - max) / sum - onehot) * dloss / count, zero where ignored. Each
//!        thread reads and writes the same elements, so `grad` may be `logits` (in place).
template <typename T>
__global__ void __launch_bounds__(block_threads) gradient_kernel(const T* logits, const int* labels,
                                                                 const float* row_max, const float* row_sum,
                                                                 const int* count, int num_cols, int ignore_index,
                                                                 float dloss, T* grad)
{
    const std::size_t first = static_cast<std::size_t>(blockIdx.x) * num_cols;
    const int label = labels[blockIdx.x];
    if (ignored(label, num_cols, ignore_index)) {
        for (int j = threadIdx.x; j < num_cols; j += block_threads) {
            grad[first + j] = from_float<T>(0.0f);
        }
        return;
    }
    const float max = row_max[blockIdx.x];
    const float inv_sum = 1.0f / row_sum[blockIdx.x];
    const float scale = dloss / static_cast<float>(*count);
    for (int j = threadIdx.x; j < num_cols; j += block_threads) {
        const float p = expf(to_float(logits[first + j]) - max) * inv_sum;
        grad[first + j] = from_float<T>((p - (j == label ? 1.0f : 0.0f)) * scale);
    }
}

//! @brief The workspace's layout: each row's maximum and sum, and the count, each at a `workspace_alignment` boundary.
struct Workspace {
    float* row_max;
    float* row_sum;
    int* count;
};

//! @brief The bytes the workspace takes, and its arrays where it starts at `base` (nullptr: sizes only).
inline std::size_t workspace_layout(void* base, int num_rows, Workspace* w)
{
    const auto round_up = [](std::size_t b) { return (b + workspace_alignment - 1) / workspace_alignment * workspace_alignment; };
    const std::size_t rows_bytes = round_up(static_cast<std::size_t>(num_rows) * sizeof(float));
    if (base != nullptr) {
        auto* bytes = static_cast<unsigned char*>(base);
        w->row_max = reinterpret_cast<float*>(bytes);
        w->row_sum = reinterpret_cast<float*>(bytes + rows_bytes);
        w->count = reinterpret_cast<int*>(bytes + 2 * rows_bytes);
    }
    return 2 * rows_bytes + round_up(sizeof(int));
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
    Workspace w{};
    const std::size_t needed = workspace_layout(d_temp_storage, num_rows, &w);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed) {
        return cudaErrorInvalidValue;
    }
    row_stats_kernel<<<num_rows, block_threads, 0, stream>>>(d_logits, num_cols, w.row_max, w.row_sum);
    loss_kernel<<<1, loss_block_threads, 0, stream>>>(d_logits, d_labels, w.row_max, w.row_sum, num_rows, num_cols,
                                                      ignore_index, w.count, d_loss);
    gradient_kernel<<<num_rows, block_threads, 0, stream>>>(d_logits, d_labels, w.row_max, w.row_sum, w.count,
                                                            num_cols, ignore_index, dloss, d_grad);
    return cudaGetLastError();
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

}  // namespace stepwise::cross_entropy::separate_kernels
