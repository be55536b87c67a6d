//! @file 03_cluster_split.cuh
//! @brief Cross-entropy step 3 (beyond the source articles): a row longer than a block holds is split over a
//!        thread-block cluster that stays resident and takes rows in turn; its blocks exchange their slices'
//!        (max, sum) through distributed shared memory, so the row is read once (sm_90 and newer).
//!
//! Step 2 holds a row of up to 32768 values in one block's registers and reads longer rows twice: once for their
//! (max, sum), once more for the gradient, three passes over the logits where a copy makes two. Most vocabularies are
//! longer (128256, 151936, 262144). Here such a row goes to a cluster of up to 16 blocks (8 where the GPU takes no
//! larger clusters), each of just enough whole warps for 32 values a thread, as the softmax chapter's step 7 splits
//! its rows:
//!
//! - The launcher starts as many clusters as the GPU holds at once, and each takes rows in turn. A cluster for each
//!   row, tried first, was slower than step 2's two reads: thousands of short-lived clusters whose blocks wait for
//!   each other with nothing in flight.
//! - Thread 0 of each block asks the bulk copy engine for the block's slice of its next row, into shared memory, as
//!   soon as this row's slice is in registers: the load runs while the block waits for the others and writes.
//! - Each block pushes its slice's report (max, sum, and the label's logit where the label lies in its slice) into
//!   every block of the cluster with `st.async`, counted on the receiver's transaction barrier; a block merges the
//!   reports in the order of the ranks, so every block has the same total bit for bit, and writes its slice's gradient
//!   from registers. No barrier of the whole cluster between rows.
//!
//! The logits are read once and the gradient written once, up to 16 x 512 x 32 = 262144 values a row. Rows not read
//! 16 bytes at a time (the bulk copies move whole 16-byte units), longer rows, GPUs before Hopper (or a build without
//! sm_90) and devices that launch no cluster of the blocks needed keep step 2's kernels.
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
#endif

//! @brief What a block of a cluster tells every block of it about its slice of a row: the slice's (max, sum), and
//!        the label's logit where the label lies in the slice (0 elsewhere, so that the blocks' sum is that logit).
struct alignas(16) SliceReport {
    float max;
    float sum;
    float label_logit;
    float unused;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
//! @brief Stores `r` into `slot` of the cluster's block `rank`, counting its 16 bytes towards that block's `barrier`.
__device__ __forceinline__ void push(SliceReport* slot, std::uint64_t* barrier, int rank, SliceReport r)
{
    std::uint32_t remote_slot, remote_barrier;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_slot) : "r"(smem_address(slot)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_barrier) : "r"(smem_address(barrier)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                 ::"r"(remote_slot), "f"(r.max), "f"(r.sum), "f"(r.label_logit), "f"(r.unused), "r"(remote_barrier)
                 : "memory");
}
#endif

//! @brief Rows split over the blocks of a cluster, each block a slice of `blockDim.x * values_per_thread` values of
//!        every row; the grid's clusters take rows in turn (persistent). A block's slice of its next row arrives in
//!        shared memory by bulk copy while it works on this one; it pushes its slice's report into every block of the
//!        cluster (st.async), whose barrier completes when all have landed, and writes its slice's gradient from
//!        registers. No block waits for a barrier of the whole cluster between rows. Rows are 16-byte aligned
//!        (`Width` values an access). `grad` may be `logits`: a block writes a row's slice after that slice has
//!        landed, and every block's report, the label's logit in it, after the label's slice has landed.
template <typename T, int Width>
__global__ void __launch_bounds__(cluster_block_threads, 2)
    cluster_rows_kernel(const T* logits, const int* labels, const int* count, int num_rows, int num_cols,
                        int ignore_index, float dloss, T* grad, float* row_loss)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    static_assert(Width * sizeof(T) == vector_bytes, "bulk copies move whole 16-byte accesses");
    constexpr int chunks = values_per_thread / Width;
    extern __shared__ __align__(16) unsigned char slice_storage[];  // the block's slice of its current row
    __shared__ std::uint64_t slice_landed;
    __shared__ std::uint64_t reports_landed[2];  // even and odd exchanges
    __shared__ Partial warp_partials[2][cluster_block_threads / warp_threads];
    __shared__ SliceReport reports[2][max_cluster_blocks];
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int blocks = static_cast<int>(cluster.num_blocks());
    const int rank = static_cast<int>(cluster.block_rank());
    const T* slice = reinterpret_cast<const T*>(slice_storage);
    const int first_col = rank * static_cast<int>(blockDim.x) * values_per_thread;  // the slice's first column
    const int slice_values = max(0, min(static_cast<int>(blockDim.x) * values_per_thread, num_cols - first_col));
    const auto offset = [&](int c) { return (c * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * Width; };
    const auto load_row = [&](std::int64_t row) {  // by thread 0; an ignored row's slice is not read
        const bool skipped = ignored(labels[row], num_cols, ignore_index) || slice_values == 0;
        const unsigned bytes = skipped ? 0u : static_cast<unsigned>(slice_values * sizeof(T));
        mbarrier_arrive_expect_bytes(&slice_landed, bytes);
        if (bytes > 0) {
            bulk_load(slice_storage, logits + row * num_cols + first_col, bytes, &slice_landed);
        }
    };
    if (threadIdx.x == 0) {
        mbarrier_init(&slice_landed);
        mbarrier_init(&reports_landed[0]);
        mbarrier_init(&reports_landed[1]);
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
        T* out = grad + row * num_cols + first_col;
        mbarrier_wait_cluster(&slice_landed, turn % 2);
        if (ignored(label, num_cols, ignore_index)) {  // every block of the cluster skips the exchange alike
            Chunk<T, Width> zero;
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                zero.v[k] = from_float<T>(0.0f);
            }
#pragma unroll
            for (int c = 0; c < chunks; ++c) {
                if (offset(c) < slice_values) {
                    *reinterpret_cast<Chunk<T, Width>*>(out + offset(c)) = zero;
                }
            }
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
        float v[values_per_thread];
        float max = -INFINITY;
#pragma unroll
        for (int c = 0; c < chunks; ++c) {
            Chunk<T, Width> chunk{};
            if (offset(c) < slice_values) {
                chunk = *reinterpret_cast<const Chunk<T, Width>*>(slice + offset(c));
            }
#pragma unroll
            for (int k = 0; k < Width; ++k) {
                v[c * Width + k] = offset(c) < slice_values ? to_float(chunk.v[k]) : -INFINITY;
                max = fmaxf(max, v[c * Width + k]);
            }
        }
        const int label_here = label - first_col;  // the label's place in the slice
        const float label_logit =
            threadIdx.x < blocks && label_here >= 0 && label_here < slice_values ? to_float(slice[label_here]) : 0.0f;
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < values_per_thread; ++i) {
            sum += v[i] == -INFINITY ? 0.0f : expf(v[i] - max);  // NaN stays
        }
        // Past block_merge's barrier, no thread reads the slice: its next row may land there.
        const Partial block = block_merge({max, sum}, warp_partials[half]);
        if (threadIdx.x == 0) {
            if (row + clusters < num_rows) {
                load_row(row + clusters);
            }
            mbarrier_arrive_expect_bytes(&reports_landed[half], blocks * sizeof(SliceReport));
        }
        if (threadIdx.x < blocks) {
            push(&reports[half][rank], &reports_landed[half], threadIdx.x, {block.max, block.sum, label_logit, 0.0f});
        }
        mbarrier_wait_cluster(&reports_landed[half], (exchange / 2) % 2);
        Partial total{-INFINITY, 0.0f};
        float row_label_logit = 0.0f;
        for (int r = 0; r < blocks; ++r) {  // in the order of the ranks in every block: the same total everywhere
            const SliceReport report = reports[half][r];
            total = merge(total, {report.max, report.sum});
            row_label_logit += report.label_logit;
        }
        const float total_sum = total.max == INFINITY ? NAN : total.sum;
        if (rank == 0 && threadIdx.x == 0) {
            row_loss[row] = (total.max - row_label_logit) + logf(total_sum);
        }
        const float factor = scale / total_sum;
#pragma unroll
        for (int c = 0; c < chunks; ++c) {
            if (offset(c) < slice_values) {
                Chunk<T, Width> chunk;
#pragma unroll
                for (int k = 0; k < Width; ++k) {
                    const float onehot = offset(c) + k == label_here ? scale : 0.0f;
                    chunk.v[k] = from_float<T>(expf(v[c * Width + k] - total.max) * factor - onehot);
                }
                *reinterpret_cast<Chunk<T, Width>*>(out + offset(c)) = chunk;
            }
        }
        ++exchange;
    }
    cluster.sync();  // no block leaves while a push to it may be in flight
#endif
}

//! @brief The launch of clusters of `blocks` blocks of `block_threads` threads, each with the shared memory of its
//!        slice; its grid is one cluster.
template <typename T>
inline void cluster_config(cudaLaunchConfig_t& config, cudaLaunchAttribute& attribute, int blocks,
                           int block_threads, cudaStream_t stream)
{
    config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3(block_threads);
    config.dynamicSmemBytes = std::size_t{static_cast<unsigned>(block_threads)} * values_per_thread * sizeof(T);
    config.stream = stream;
    attribute = {};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim = {static_cast<unsigned>(blocks), 1, 1};
    config.attrs = &attribute;
    config.numAttrs = 1;
}

//! @brief How many clusters of `blocks` blocks of `block_threads` threads the current device holds at once: 0 where
//!        it launches no clusters or the kernel was not built for sm_90 or newer. The runtime is asked once per
//!        device and shape (a launch would otherwise pay for its queries); the kernel's shared-memory limit is raised
//!        to its largest blocks' and its clusters past the portable 8 allowed, on each device.
template <typename T>
inline int active_clusters(int blocks, int block_threads)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    static std::mutex mutex;
    static std::map<std::tuple<int, int, int>, int> known;  // (device, blocks, block_threads) -> clusters
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        return 0;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    const auto [entry, unknown] = known.try_emplace({device, blocks, block_threads}, 0);
    if (!unknown) {
        return entry->second;
    }
    const auto kernel = cluster_rows_kernel<T, width>;
    const int largest_slice = cluster_block_values * static_cast<int>(sizeof(T));
    int cluster_launch = 0;
    cudaFuncAttributes attributes{};
    cudaLaunchConfig_t config;
    cudaLaunchAttribute attribute;
    cluster_config<T>(config, attribute, blocks, block_threads, 0);
    if (cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
        cluster_launch != 0 && cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess &&
        attributes.binaryVersion >= 90 &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, largest_slice) == cudaSuccess &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
        cudaOccupancyMaxActiveClusters(&entry->second, kernel, &config) != cudaSuccess) {
        entry->second = 0;
    }
    (void)cudaGetLastError();  // a refused query is not a launch's error: the rows take step 2's kernel
    return entry->second;
}

//! @brief The most blocks of a cluster on this device: 16 where the GPU takes clusters beyond the portable 8 of the
//!        largest blocks, 8 where only those, 0 where it launches no clusters.
template <typename T>
inline int cluster_limit()
{
    for (const int blocks : {max_cluster_blocks, portable_cluster_blocks}) {
        if (active_clusters<T>(blocks, cluster_block_threads) >= 1) {
            return blocks;
        }
    }
    return 0;
}

//! @brief Rows of `num_cols` values over clusters of `blocks` blocks of just enough whole warps: as many clusters as
//!        the GPU holds at once, but no more than rows.
template <typename T>
cudaError_t launch_clusters(int blocks, const int* count, float* row_loss, const T* d_logits, const int* d_labels,
                            T* d_grad, int num_rows, int num_cols, int ignore_index, float dloss, cudaStream_t stream)
{
    constexpr int width = vector_bytes / static_cast<int>(sizeof(T));
    const int block_values = blocks * warp_threads * values_per_thread;
    const int block_threads = (num_cols + block_values - 1) / block_values * warp_threads;
    cudaLaunchConfig_t config;
    cudaLaunchAttribute attribute;
    cluster_config<T>(config, attribute, blocks, block_threads, stream);
    const int clusters = std::min(active_clusters<T>(blocks, block_threads), num_rows);
    config.gridDim = dim3(static_cast<unsigned>(std::max(clusters, 1) * blocks));
    return cudaLaunchKernelEx(&config, cluster_rows_kernel<T, width>, d_logits, d_labels, count, num_rows, num_cols,
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
               Width * sizeof(T) == vector_bytes && blocks <= cluster_limit<T>()) {
        // Rows 16-byte aligned, longer than a block holds and no longer than a cluster: a cluster's blocks share it.
        const cudaError_t status = launch_clusters<T>(blocks, count, row_loss, d_logits, d_labels, d_grad, num_rows,
                                                      num_cols, ignore_index, dloss, stream);
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
