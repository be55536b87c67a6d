//! @file 03_cluster_split.cuh
//! @brief Cross-entropy step 3 (beyond the source articles): a row longer than a block holds is split over a
//!        thread-block cluster, each block holding its slice in registers; the blocks merge their (max, sum) through
//!        distributed shared memory, so the row is read once (sm_90 and newer).
//!
//! Step 2 holds a row of up to 32768 values in one block's registers and reads longer rows twice: once for their
//! (max, sum), once more for the gradient, three passes over the logits where a copy makes two. Most vocabularies are
//! longer (50257, 128256, 151936, 262144). Here such a row goes to a cluster of up to 16 blocks (8 where the GPU
//! takes no larger clusters), each of just enough whole warps for 32 values a thread:
//!
//! - Each block loads its slice of the row into registers (16 bytes at a time where the row allows it, as in step 2)
//!   and reduces it to one (max, sum) pair, as step 2's block does its row.
//! - The blocks of a cluster are resident together and may read each other's shared memory. After one barrier of
//!   the cluster, every block reads the pairs of all the cluster's blocks from their shared memory and merges them in
//!   the order of their ranks: the same total, bit for bit, in every block.
//! - Each block then writes its slice's gradient from its registers. It waits on the cluster's barrier once more only
//!   at its end, so that no block leaves while another may still read its shared memory.
//!
//! The logits are read once and the gradient written once, up to 16 x 512 x 32 = 262144 values a row. Longer rows,
//! GPUs before Hopper (or a build without sm_90) and devices that launch no cluster of the blocks needed keep step 2's
//! two reads.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

namespace stepwise::cross_entropy::cluster_split {

constexpr int vector_bytes = 16;        //!< one load or store of the 16-byte paths
constexpr int warp_threads = 32;
constexpr int max_block_threads = 1024;  //!< the largest block of a row
constexpr int values_per_thread = 32;    //!< the registers of a row's thread
constexpr int register_row_values = max_block_threads * values_per_thread;  //!< longest row held in registers
constexpr int long_rows_block = 1024;    //!< threads of the longer rows' block (rows longer than a cluster holds)
constexpr int cluster_block_threads = 512;  //!< the most threads of a block of a cluster: two blocks an SM
constexpr int cluster_block_values = cluster_block_threads * values_per_thread;  //!< the longest slice of a block
constexpr int portable_cluster_blocks = 8;  //!< the cluster size every GPU with clusters takes
constexpr int max_cluster_blocks = 16;      //!< the largest, where the GPU allows it (H100, H200)
constexpr int labels_block = 1024;       //!< threads of the one block that counts the labels, and that sums the losses
constexpr std::size_t workspace_alignment = 256;

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

//! @brief Online softmax's merge of two parts. A part of sum 0 adds nothing, even where both maxima are -inf; a NaN
//!        sum stays NaN.
__device__ __forceinline__ Partial merge(Partial a, Partial b)
{
    const float max = fmaxf(a.max, b.max);
    const float sa = a.sum == 0.0f ? 0.0f : a.sum * expf(a.max - max);
    const float sb = b.sum == 0.0f ? 0.0f : b.sum * expf(b.max - max);
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
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < values_per_thread; ++i) {
        sum += v[i] == -INFINITY ? 0.0f : expf(v[i] - max);  // NaN stays
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
                chunk.v[k] = from_float<T>(expf(v[c * Width + k] - total.max) * factor - onehot);
            }
            *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = chunk;
        }
    }
}

//! @brief Row `blockIdx.x`, longer than a cluster holds (or on a GPU without clusters): read once for its online
//!        (max, sum), once more for the gradient. `grad` may be `logits`: each element is read, then written, by the same thread.
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
                p = {x, p.sum * expf(p.max - x) + 1.0f};
            } else if (x != -INFINITY) {  // -inf adds 0, even under a -inf maximum; NaN reaches the sum
                p.sum += expf(x - p.max);
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
            chunk.v[k] = from_float<T>(expf(to_float(chunk.v[k]) - total.max) * factor - onehot);
        }
        *reinterpret_cast<Chunk<T, Width>*>(grad + first + col) = chunk;
    }
}

//! @brief Row `blockIdx.x / blocks` split over a cluster of `blocks` blocks: each block holds a slice of
//!        `blockDim.x * values_per_thread` values in registers, the blocks merge their (max, sum) pairs through
//!        distributed shared memory, and each writes its slice's gradient from its registers. `grad` may be `logits`:
//!        every block reads its slice and the label's logit before the cluster's first barrier, and writes after it.
template <typename T, int Width>
__global__ void __launch_bounds__(cluster_block_threads, 2)
    cluster_rows_kernel(const T* logits, const int* labels, const int* count, int num_cols, int ignore_index,
                        float dloss, T* grad, float* row_loss)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int chunks = values_per_thread / Width;
    __shared__ Partial shared[cluster_block_threads / warp_threads];  // shared[0]: the block's pair, for the cluster
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int blocks = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const int row = static_cast<int>(blockIdx.x) / blocks;
    const std::size_t first = static_cast<std::size_t>(row) * num_cols;
    const int stride = static_cast<int>(blockDim.x) * Width;  // columns from one of a thread's chunks to the next
    const int here = rank * static_cast<int>(blockDim.x) * values_per_thread + static_cast<int>(threadIdx.x) * Width;
    const int in_row = here < num_cols ? (num_cols - here + stride - 1) / stride : 0;  // the thread's chunks in the row
    const int label = labels[row];
    if (ignored(label, num_cols, ignore_index)) {  // every block of the cluster sees it: none waits for another
        Chunk<T, Width> zero;
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            zero.v[k] = from_float<T>(0.0f);
        }
#pragma unroll
        for (int c = 0; c < chunks; ++c) {
            if (c < in_row) {
                *reinterpret_cast<Chunk<T, Width>*>(grad + first + here + c * stride) = zero;
            }
        }
        if (rank == 0 && threadIdx.x == 0) {
            row_loss[row] = 0.0f;
        }
        return;
    }
    const float label_logit = to_float(logits[first + label]);  // perhaps another block's slice: read before writes
    const T* in = logits + first + here;
    float v[values_per_thread];
    float max = -INFINITY;
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
        Chunk<T, Width> chunk{};
        if (c < in_row) {  // a whole chunk is in the row or out of it (Width divides num_cols)
            chunk = *reinterpret_cast<const Chunk<T, Width>*>(in + c * stride);
        }
#pragma unroll
        for (int k = 0; k < Width; ++k) {
            v[c * Width + k] = c < in_row ? to_float(chunk.v[k]) : -INFINITY;
            max = fmaxf(max, v[c * Width + k]);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < values_per_thread; ++i) {
        sum += v[i] == -INFINITY ? 0.0f : expf(v[i] - max);  // NaN stays
    }
    block_merge({max, sum}, shared);  // leaves the block's pair in shared[0]
    cluster.sync();                   // every block's pair is in its shared memory, every read of the logits done
    Partial total{-INFINITY, 0.0f};
    for (int r = 0; r < blocks; ++r) {  // in the order of the ranks in every block: the same total everywhere
        total = merge(total, *cluster.map_shared_rank(&shared[0], r));
    }
    auto done_reading = cluster.barrier_arrive();  // the others may leave once every block has read their pairs
    const float total_sum = total.max == INFINITY ? NAN : total.sum;
    if (rank == 0 && threadIdx.x == 0) {
        row_loss[row] = (total.max - label_logit) + logf(total_sum);
    }
    const float scale = dloss / static_cast<float>(*count);
    const float factor = scale / total_sum;
    const int label_here = label - here;  // the label's column, counted from the thread's first
    T* out = grad + first + here;
#pragma unroll
    for (int c = 0; c < chunks; ++c) {
        if (c < in_row) {
            Chunk<T, Width> chunk;
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                const float onehot = c * stride + k == label_here ? scale : 0.0f;
                chunk.v[k] = from_float<T>(expf(v[c * Width + k] - total.max) * factor - onehot);
            }
            *reinterpret_cast<Chunk<T, Width>*>(out + c * stride) = chunk;
        }
    }
    cluster.barrier_wait(std::move(done_reading));  // no block leaves while another may read its shared memory
#endif
}

//! @brief The most blocks of a cluster of `cluster_rows_kernel<T, Width>` on the current device: 16 where the GPU
//!        launches clusters beyond the portable 8 of the largest blocks, 8 where only those, 0 where no cluster
//!        launches (a GPU before sm_90, or the kernel not built for it). The runtime is asked once per device.
template <typename T, int Width>
inline int cluster_limit()
{
    static std::mutex mutex;
    static std::map<int, int> known;  // device -> its limit
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        return 0;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    const auto [entry, unknown] = known.try_emplace(device, 0);
    if (!unknown) {
        return entry->second;
    }
    const auto kernel = cluster_rows_kernel<T, Width>;
    int cluster_launch = 0;
    cudaFuncAttributes attributes{};
    if (cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
        cluster_launch != 0 && cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
        attributes.binaryVersion >= 90 &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) {
        for (const int blocks : {max_cluster_blocks, portable_cluster_blocks}) {
            cudaLaunchConfig_t config{};
            cudaLaunchAttribute attribute{};
            config.gridDim = dim3(blocks);
            config.blockDim = dim3(cluster_block_threads);
            attribute.id = cudaLaunchAttributeClusterDimension;
            attribute.val.clusterDim = {static_cast<unsigned>(blocks), 1, 1};
            config.attrs = &attribute;
            config.numAttrs = 1;
            int clusters = 0;
            if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters >= 1) {
                entry->second = blocks;
                break;
            }
        }
    }
    (void)cudaGetLastError();  // a refused query is not a launch's error: the rows take step 2's kernel
    return entry->second;
}

//! @brief Rows of `num_cols` values over clusters of `blocks` blocks, each of just enough whole warps.
template <typename T, int Width>
cudaError_t launch_clusters(int blocks, const int* count, float* row_loss, const T* d_logits, const int* d_labels,
                            T* d_grad, int num_rows, int num_cols, int ignore_index, float dloss, cudaStream_t stream)
{
    const int block_values = blocks * warp_threads * values_per_thread;
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attribute{};
    config.gridDim = dim3(static_cast<unsigned>(num_rows) * blocks);
    config.blockDim = dim3((num_cols + block_values - 1) / block_values * warp_threads);
    config.stream = stream;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim = {static_cast<unsigned>(blocks), 1, 1};
    config.attrs = &attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, cluster_rows_kernel<T, Width>, d_logits, d_labels, count, num_cols,
                              ignore_index, dloss, d_grad, row_loss);
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
    } else if (const int blocks = (num_cols + cluster_block_values - 1) / cluster_block_values;
               blocks <= cluster_limit<T, Width>() &&
               std::int64_t{num_rows} * blocks <= std::int64_t{std::numeric_limits<int>::max()}) {
        const cudaError_t status = launch_clusters<T, Width>(blocks, count, row_loss, d_logits, d_labels, d_grad,
                                                             num_rows, num_cols, ignore_index, dloss, stream);
        if (status != cudaSuccess) {
            return status;
        }
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

}  // namespace stepwise::cross_entropy::cluster_split
