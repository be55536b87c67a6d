//! @file 01_three_passes.cuh
//! @brief Decode attention step 1 (beyond the sources): the operation as it reads, in three kernels over a paged K/V
//!        cache: the scores of each new query against every key it sees, the softmax of each row, the weighted sum
//!        of the values, with the scores and probabilities in global memory.
//!
//! A decoding step has few query rows (q_len of 1 to 8 new tokens a sequence) and a long cache, so the work is
//! reading the cache. Here each row's scores go to a workspace of `rows x (max_pages * page_size)` floats, a second
//! kernel turns them into probabilities in place and keeps the row's log-sum-exp, and a third sums the values. The
//! cache's keys are read once a query head and its values once a query head: `heads / kv_heads` times what a
//! kernel that reads each K/V head once must read, and the scores cross global memory twice more. Keys and values
//! are found through the page table, a token at a time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::decode_attention::three_passes {

using bf16 = __nv_bfloat16;

constexpr int scores_threads = 256;    //!< a block of the scores kernel: 8 warps, a key a warp at a time
constexpr int keys_per_block = 64;     //!< keys a block of the scores kernel takes (8 a warp)
constexpr int softmax_threads = 256;   //!< a block a row
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

//! @brief scale * q k_j for `keys_per_block` keys of one row: block (row, key block). A warp a key, its lanes over
//!        head_dim; keys past those the row sees are left unwritten (never read).
static __global__ void __launch_bounds__(scores_threads)
    scores_kernel(const bf16* __restrict__ d_q, Cache c, Shape s, float scale, float* __restrict__ d_s,
                  int max_keys)
{
    const std::int64_t row = blockIdx.x;
    const RowPlace at = place_of(row, s);
    const int length = checked_length(c, at.b);
    const int keys = length < 0 ? 0 : visible_keys(length, s.q_len, at.i);
    const int kv_head = at.h / (s.heads / s.kv_heads);
    const bf16* q = d_q + row * s.head_dim;
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int first = static_cast<int>(blockIdx.y) * keys_per_block;
    for (int j = first + warp; j < min(first + keys_per_block, keys); j += scores_threads / 32) {
        const bf16* k = c.d_k + cache_offset(c, s, at.b, j, kv_head);
        float dot = 0.0f;
        for (int d = lane; d < s.head_dim; d += 32) {
            dot += __bfloat162float(q[d]) * __bfloat162float(k[d]);
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        if (lane == 0) {
            d_s[row * max_keys + j] = dot * scale;
        }
    }
}

//! @brief The block's sum (or maximum) of `v`, in every thread.
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* partial)
{
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    __syncthreads();  // the previous reduction's partials are read
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    v = lane < softmax_threads / 32 ? partial[lane] : (is_max ? -INFINITY : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    return v;
}

//! @brief Each row's scores turned into probabilities in place, and its log-sum-exp: a block a row. A row that sees
//!        no key gets lse = -inf; a NaN or infinite score (or a sequence whose length or pages are not valid) makes
//!        the row's probabilities and lse NaN.
static __global__ void __launch_bounds__(softmax_threads)
    softmax_kernel(float* __restrict__ d_s, float* __restrict__ d_lse, Cache c, Shape s, int max_keys)
{
    __shared__ float partial[softmax_threads / 32];
    const std::int64_t row = blockIdx.x;
    const RowPlace at = place_of(row, s);
    const int length = checked_length(c, at.b);
    const int keys = length < 0 ? 0 : visible_keys(length, s.q_len, at.i);
    float* s_row = d_s + row * max_keys;
    float max = -INFINITY, not_finite = length < 0 ? 1.0f : 0.0f;
    for (int j = static_cast<int>(threadIdx.x); j < keys; j += softmax_threads) {
        max = fmaxf(max, s_row[j]);
        not_finite += isfinite(s_row[j]) ? 0.0f : 1.0f;
    }
    max = block_reduce(max, true, partial);
    const bool nan_row = block_reduce(not_finite, false, partial) > 0.0f;
    float sum = 0.0f;
    for (int j = static_cast<int>(threadIdx.x); j < keys; j += softmax_threads) {
        sum += exp2f((s_row[j] - max) * log2e);
    }
    sum = block_reduce(sum, false, partial);
    for (int j = static_cast<int>(threadIdx.x); j < keys; j += softmax_threads) {
        s_row[j] = nan_row ? NAN : exp2f((s_row[j] - max) * log2e) / sum;
    }
    if (threadIdx.x == 0) {
        d_lse[row] = nan_row ? NAN : keys == 0 ? -INFINITY : max + logf(sum);
    }
}

//! @brief o = sum_j p_j v_j of one row: a block a row, a thread a column of head_dim. A row that sees no key gets
//!        o = 0; a NaN row (softmax_kernel()) gets NaN.
static __global__ void output_kernel(const float* __restrict__ d_p, const float* __restrict__ d_lse, Cache c,
                                     Shape s, bf16* __restrict__ d_o, int max_keys)
{
    const std::int64_t row = blockIdx.x;
    const RowPlace at = place_of(row, s);
    const int d = static_cast<int>(threadIdx.x);
    const int length = checked_length(c, at.b);
    const int keys = length < 0 ? 0 : visible_keys(length, s.q_len, at.i);
    const int kv_head = at.h / (s.heads / s.kv_heads);
    const float* p = d_p + row * max_keys;
    float o = isnan(d_lse[row]) ? NAN : 0.0f;
    for (int j = 0; j < keys; ++j) {
        o += p[j] * __bfloat162float(c.d_v[cache_offset(c, s, at.b, j, kv_head) + d]);
    }
    d_o[row * s.head_dim + d] = __float2bfloat16_rn(o);
}

//! @brief Attention of each new query token over its sequence's paged cache: o = softmax(scale q K^T) V over the
//!        keys the query sees (positions 0 to length - q_len + i: the new tokens are the cache's last, causal among
//!        themselves), and each row's log-sum-exp. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets
//!        `temp_storage_bytes`.
//! @param[in]     d_temp_storage     device memory for the scores (fp32), or nullptr to ask its size
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
//!      num_pages >= 0; batch * q_len * heads < 2^31 and times max_pages * page_size fitting in size_t;
//!      max_pages * page_size < 2^31; q, o, the pools and the table not null (the pools may be null with no pages),
//!      q, o and the pools 2-byte aligned, the LSE, table and lengths 4-byte aligned; `d_temp_storage` 4-byte
//!      aligned. A sequence whose length is negative, longer than its pages hold, or reaches a page outside the pool
//!      gets NaN rows (nothing outside the pool is read). A NaN in K, or an infinite score, makes its row NaN; a NaN
//!      in V the columns it is in, in the rows that see it.
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
    const std::int64_t key_blocks = (max_keys + keys_per_block - 1) / keys_per_block;
    if (key_blocks > 65535) {
        return cudaErrorInvalidValue;
    }
    const std::size_t needed = static_cast<std::size_t>(rows) * static_cast<std::size_t>(max_keys) * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed || !aligned(d_temp_storage, 4)) {
        return cudaErrorInvalidValue;
    }
    float* d_s = static_cast<float*>(d_temp_storage);
    const unsigned grid_rows = static_cast<unsigned>(rows);
    scores_kernel<<<dim3(grid_rows, static_cast<unsigned>(key_blocks)), scores_threads, 0, stream>>>(
        d_q, c, s, scale, d_s, static_cast<int>(max_keys));
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    softmax_kernel<<<grid_rows, softmax_threads, 0, stream>>>(d_s, d_lse, c, s, static_cast<int>(max_keys));
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    output_kernel<<<grid_rows, s.head_dim, 0, stream>>>(d_s, d_lse, c, s, d_o, static_cast<int>(max_keys));
    return cudaGetLastError();
}

}  // namespace stepwise::decode_attention::three_passes
