//! @file 02_online_softmax.cuh
//! @brief Decode attention step 2 (beyond the sources): the online softmax, so that each row reads its keys and
//!        values once, in one kernel, and the scores never leave the registers.
//!
//! Step 1 wrote every score to global memory, read it back twice (its maximum and sum, then the probabilities) and
//! read the probabilities once more beside the values: a row's scores crossed global memory four times, and three
//! kernels waited on each other. Here a block takes a row: each warp walks every fourth key the row sees, computes
//! the score with its lanes over head_dim, and keeps a running maximum m, sum l and output o, rescaling l and o by
//! exp(m_old - m_new) when a larger score arrives (Milakov and Gimelshein's online softmax, the softmax chapter's
//! step 5). The warps' states merge at the end. The cache is still read once a query head (`heads / kv_heads`
//! times what it holds), and a row of a long cache is one block's work.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::decode_attention::online_softmax {

using bf16 = __nv_bfloat16;

constexpr int row_warps = 4;                   //!< warps of a block, each every row_warps-th key of the row
constexpr int row_threads = row_warps * 32;
constexpr int max_head_dim = 128;              //!< head_dim 64 or 128: 2 or 4 values a lane
constexpr float log2e = 1.44269504088896340736f;

//! @brief The sizes of a decoding step: per sequence, q_len new tokens of `heads` query heads, grouped over
//!        `kv_heads` K/V heads of `head_dim` values.
struct Shape {
    int batch, q_len, heads, kv_heads, head_dim;
};

//! @brief A paged K/V cache: K and V pools [num_pages, page_size, kv_heads, head_dim] bf16, a page table [batch,
//!        max_pages] of pool pages, and each sequence's length (tokens cached, the new ones included) [batch].
struct Cache {
    const bf16* d_k;
    const bf16* d_v;
    const int* d_page_table;
    const int* d_lengths;
    int num_pages, max_pages, page_size;
};

//! @brief Sequence `b`'s length, or -1 where it is negative, longer than its pages hold, or reaches a page that is
//!        not in the pool (the kernels then make its rows NaN instead of reading outside the pool).
__device__ __forceinline__ int checked_length(const Cache& c, int b)
{
    const int length = c.d_lengths[b];
    if (length < 0 || static_cast<std::int64_t>(length) > static_cast<std::int64_t>(c.max_pages) * c.page_size) {
        return -1;
    }
    const int pages = (length + c.page_size - 1) / c.page_size;
    for (int page = 0; page < pages; ++page) {
        const int pool_page = c.d_page_table[static_cast<std::size_t>(b) * c.max_pages + page];
        if (pool_page < 0 || pool_page >= c.num_pages) {
            return -1;
        }
    }
    return length;
}

//! @brief The keys query `i` of a sequence of `length` tokens sees: positions 0 to length - q_len + i (none below 0).
__device__ __forceinline__ int visible_keys(int length, int q_len, int i)
{
    return min(max(length - q_len + i + 1, 0), length);
}

//! @brief Where key (or value) `j` of sequence `b`, K/V head `kv_head`, starts in a pool.
__device__ __forceinline__ std::size_t cache_offset(const Cache& c, const Shape& s, int b, int j, int kv_head)
{
    const int pool_page = c.d_page_table[static_cast<std::size_t>(b) * c.max_pages + j / c.page_size];
    return ((static_cast<std::size_t>(pool_page) * c.page_size + j % c.page_size) * s.kv_heads + kv_head) *
           s.head_dim;
}

//! @brief Row `row` = ((b * q_len) + i) * heads + h: its sequence, query and head.
struct RowPlace {
    int b, i, h;
};
__device__ __forceinline__ RowPlace place_of(std::int64_t row, const Shape& s)
{
    return {static_cast<int>(row / (static_cast<std::int64_t>(s.q_len) * s.heads)),
            static_cast<int>(row / s.heads % s.q_len), static_cast<int>(row % s.heads)};
}

//! @brief A warp's running softmax of the scores it has seen: their maximum (scaled by log2 e), the sum of
//!        exp2(score - max), the weighted sum of the values in the lane's columns, and whether a score was not finite.
template <int Columns>
struct Running {
    float max = -INFINITY, sum = 0.0f;
    float o[Columns] = {};
    bool not_finite = false;
};

//! @brief The softmax of one row over its keys and o = sum_j p_j v_j, a block a row (blockIdx.x: ((b * q_len) + i) *
//!        heads + h); `Columns` = head_dim / 32 values of q and o a lane.
template <int Columns>
static __global__ void __launch_bounds__(row_threads)
    row_kernel(const bf16* __restrict__ d_q, Cache c, Shape s, float scale, bf16* __restrict__ d_o,
               float* __restrict__ d_lse)
{
    __shared__ float warp_max[row_warps], warp_sum[row_warps], warp_bad[row_warps];
    __shared__ float warp_o[row_warps][max_head_dim];
    const std::int64_t row = blockIdx.x;
    const RowPlace at = place_of(row, s);
    const int length = checked_length(c, at.b);
    const int keys = length < 0 ? 0 : visible_keys(length, s.q_len, at.i);
    const int kv_head = at.h / (s.heads / s.kv_heads);
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const float score_scale = scale * log2e;  // scores in base 2: exp2f, not expf
    float q[Columns];
#pragma unroll
    for (int k = 0; k < Columns; ++k) {
        q[k] = __bfloat162float(d_q[row * s.head_dim + k * 32 + lane]);
    }
    Running<Columns> r;
    for (int j = warp; j < keys; j += row_warps) {
        const std::size_t at_key = cache_offset(c, s, at.b, j, kv_head);
        float dot = 0.0f;
#pragma unroll
        for (int k = 0; k < Columns; ++k) {
            dot += q[k] * __bfloat162float(c.d_k[at_key + k * 32 + lane]);
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        const float score = dot * score_scale;
        r.not_finite = r.not_finite || !isfinite(score);
        const float max = fmaxf(r.max, score);
        const float rescale = exp2f(r.max - max), weight = exp2f(score - max);  // exp2f(-inf) = 0 at the first key
        r.sum = r.sum * rescale + weight;
#pragma unroll
        for (int k = 0; k < Columns; ++k) {
            r.o[k] = r.o[k] * rescale + weight * __bfloat162float(c.d_v[at_key + k * 32 + lane]);
        }
        r.max = max;
    }
    if (lane == 0) {
        warp_max[warp] = r.max;
        warp_sum[warp] = r.sum;
        warp_bad[warp] = r.not_finite ? 1.0f : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < Columns; ++k) {
        warp_o[warp][k * 32 + lane] = r.o[k];
    }
    __syncthreads();
    float max = -INFINITY;
    bool bad = length < 0;
    for (int w = 0; w < row_warps; ++w) {
        max = fmaxf(max, warp_max[w]);
        bad = bad || warp_bad[w] != 0.0f;
    }
    float sum = 0.0f;
    for (int w = 0; w < row_warps; ++w) {
        sum += warp_max[w] == -INFINITY ? 0.0f : warp_sum[w] * exp2f(warp_max[w] - max);  // a warp without keys adds 0
    }
    for (int col = static_cast<int>(threadIdx.x); col < s.head_dim; col += row_threads) {
        float o = 0.0f;
        for (int w = 0; w < row_warps; ++w) {
            o += warp_max[w] == -INFINITY ? 0.0f : warp_o[w][col] * exp2f(warp_max[w] - max);
        }
        d_o[row * s.head_dim + col] = __float2bfloat16_rn(bad ? NAN : keys == 0 ? 0.0f : o / sum);
    }
    if (threadIdx.x == 0) {
        d_lse[row] = bad ? NAN : keys == 0 ? -INFINITY : max / log2e + logf(sum);
    }
}

//! @brief Attention of each new query token over its sequence's paged cache: o = softmax(scale q K^T) V over the
//!        keys the query sees (positions 0 to length - q_len + i: the new tokens are the cache's last, causal among
//!        themselves), and each row's log-sum-exp. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets
//!        `temp_storage_bytes`.
//! @param[in]     d_temp_storage     unused (no workspace: `temp_storage_bytes` is set to 1), kept for the steps'
//!                                   common signature
//! @param[in,out] temp_storage_bytes its size
//! @param[in]     d_q                q [batch, q_len, heads, head_dim], bf16
//! @param[in]     c                  the paged cache: K and V pools, page table, lengths (all on the device)
//! @param[out]    d_o                o, as q
//! @param[out]    d_lse              log(sum_j exp(scale q k_j)) of each row, fp32 [batch, q_len, heads]; -inf for a
//!                                   row that sees no key (its o is 0)
//! @param[in]     s                  batch, q_len, heads, kv_heads, head_dim
//! @param[in]     scale              multiplies the scores (1 / sqrt(head_dim) in the usual attention)
//! @param[in]     stream             stream to launch on
//! @pre head_dim 64 or 128; kv_heads divides heads; batch, q_len, heads, kv_heads, page_size, max_pages >= 1,
//!      num_pages >= 0; batch * q_len * heads < 2^31; max_pages * page_size < 2^31; q, o, the pools and the table not
//!      null (the pools may be null with no pages), q, o and the pools 2-byte aligned, the LSE, table and lengths
//!      4-byte aligned. A sequence whose length is negative, longer than its pages hold, or reaches a page outside
//!      the pool gets NaN rows (nothing outside the pool is read). A NaN in K, or an infinite score, makes its row
//!      NaN; a NaN in V the columns it is in, in the rows that see it.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small, else the first launch
//!         error
inline cudaError_t decode_attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                                    const Cache& c, bf16* d_o, float* d_lse, const Shape& s, float scale,
                                    cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (s.batch < 1 || s.q_len < 1 || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || c.page_size < 1 || c.max_pages < 1 || c.num_pages < 0 ||
        d_q == nullptr || d_o == nullptr || d_lse == nullptr || c.d_page_table == nullptr ||
        c.d_lengths == nullptr || (c.num_pages > 0 && (c.d_k == nullptr || c.d_v == nullptr)) ||
        !aligned(d_q, 2) || !aligned(d_o, 2) || !aligned(c.d_k, 2) || !aligned(c.d_v, 2) || !aligned(d_lse, 4) ||
        !aligned(c.d_page_table, 4) || !aligned(c.d_lengths, 4)) {
        return cudaErrorInvalidValue;
    }
    const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.q_len * s.heads;
    const std::int64_t max_keys = static_cast<std::int64_t>(c.max_pages) * c.page_size;
    if (rows > 0x7fffffff || max_keys > 0x7fffffff) {
        return cudaErrorInvalidValue;
    }
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = 1;
        return cudaSuccess;
    }
    if (temp_storage_bytes < 1) {
        return cudaErrorInvalidValue;
    }
    const unsigned grid = static_cast<unsigned>(rows);
    if (s.head_dim == 64) {
        row_kernel<2><<<grid, row_threads, 0, stream>>>(d_q, c, s, scale, d_o, d_lse);
    } else {
        row_kernel<4><<<grid, row_threads, 0, stream>>>(d_q, c, s, scale, d_o, d_lse);
    }
    return cudaGetLastError();
}

}  // namespace stepwise::decode_attention::online_softmax
