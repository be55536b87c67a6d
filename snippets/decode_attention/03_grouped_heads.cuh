//! @file 03_grouped_heads.cuh
//! @brief Decode attention step 3 (beyond the sources): every row that reads a K/V head is computed by one block,
//!        which reads that head's keys and values once.
//!
//! Step 2 gave each row a block, and the `heads / kv_heads` query heads of a group, for each of the q_len new
//! tokens, all read the same K/V head of the cache: Llama 3's 32 query heads over 8 K/V heads read the cache four
//! times for one token, sixteen for four. Here a block takes every row of one K/V head of one sequence, up to
//! `group_rows` of them (more blocks where a group has more), keeps their q in shared memory, and each of its warps,
//! walking every fourth key as in step 2, reads a key's K and V rows once and updates the running softmax of every
//! row that sees that key. The cache is read once a K/V head (a group of more than `group_rows` rows reads it again
//! for each further `group_rows`).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace stepwise::decode_attention::grouped_heads {

using bf16 = __nv_bfloat16;

constexpr int row_warps = 4;                   //!< warps of a block, each every row_warps-th key of the row
constexpr int row_threads = row_warps * 32;
constexpr int max_head_dim = 128;              //!< head_dim 64 or 128: 2 or 4 values a lane
constexpr int group_rows = 8;                  //!< rows a block at most: a group's query heads, for each new token
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

//! @brief A warp's running softmax of one row over the keys it has seen: their maximum (scaled by log2 e), the sum
//!        of exp2(score - max), and the weighted sum of the values in the lane's columns.
template <int Columns>
struct Running {
    float max = -INFINITY, sum = 0.0f;
    float o[Columns] = {};
};

//! @brief Every row that reads K/V head `kv_head` of sequence `b`, up to `group_rows` of them a block: the `heads /
//!        kv_heads` query heads of the group for each of the q_len new tokens, row r of the group being token r /
//!        group, head kv_head * group + r % group. blockIdx.x: (b * kv_heads + kv_head) * passes + pass, the block
//!        taking the group's rows [pass * group_rows, pass * group_rows + group_rows). Each warp walks every
//!        row_warps-th key as in step 2, reads its K and V rows once, and updates the running softmax of every row
//!        of the block that sees the key; `Columns` = head_dim / 32 values a lane.
template <int Columns>
static __global__ void __launch_bounds__(row_threads)
    group_kernel(const bf16* __restrict__ d_q, Cache c, Shape s, float scale, bf16* __restrict__ d_o,
                 float* __restrict__ d_lse, int passes)
{
    static_assert(group_rows <= 32, "a row's bit in a 32-bit mask");
    __shared__ float q_rows[group_rows][max_head_dim];
    __shared__ float warp_max[row_warps][group_rows], warp_sum[row_warps][group_rows];
    __shared__ float warp_o[row_warps][group_rows][max_head_dim];
    __shared__ unsigned warp_bad[row_warps];  // bit r: the warp saw a score of row r that was not finite
    const int group = s.heads / s.kv_heads;
    const int pass = static_cast<int>(blockIdx.x % passes);
    const int kv_head = static_cast<int>(blockIdx.x / passes % s.kv_heads);
    const int b = static_cast<int>(blockIdx.x / passes / s.kv_heads);
    const int first = pass * group_rows;
    const int rows = min(group_rows, s.q_len * group - first);
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const auto row_of = [&](int r) {  // the index of the block's row r in q, o and the LSE
        const int i = (first + r) / group, h = kv_head * group + (first + r) % group;
        return (static_cast<std::int64_t>(b) * s.q_len + i) * s.heads + h;
    };
    for (int e = static_cast<int>(threadIdx.x); e < rows * s.head_dim; e += row_threads) {
        q_rows[e / s.head_dim][e % s.head_dim] = __bfloat162float(d_q[row_of(e / s.head_dim) * s.head_dim + e % s.head_dim]);
    }
    __syncthreads();
    const int length = checked_length(c, b);
    const auto keys_of = [&](int r) {  // the keys row r sees: those of its token
        return length < 0 ? 0 : visible_keys(length, s.q_len, (first + r) / group);
    };
    const int block_keys = keys_of(rows - 1);  // the block's last row has the latest token: the most keys
    const float score_scale = scale * log2e;   // scores in base 2: exp2f, not expf
    Running<Columns> run[group_rows];
    unsigned bad = 0;
    for (int j = warp; j < block_keys; j += row_warps) {
        const std::size_t at_key = cache_offset(c, s, b, j, kv_head);
        float k[Columns], v[Columns];
#pragma unroll
        for (int x = 0; x < Columns; ++x) {
            k[x] = __bfloat162float(c.d_k[at_key + x * 32 + lane]);
            v[x] = __bfloat162float(c.d_v[at_key + x * 32 + lane]);
        }
#pragma unroll
        for (int r = 0; r < group_rows; ++r) {
            if (r >= rows || j >= keys_of(r)) {  // warp-uniform
                continue;
            }
            float dot = 0.0f;
#pragma unroll
            for (int x = 0; x < Columns; ++x) {
                dot += q_rows[r][x * 32 + lane] * k[x];
            }
            for (int offset = 16; offset > 0; offset /= 2) {
                dot += __shfl_xor_sync(0xffffffffu, dot, offset);
            }
            const float score = dot * score_scale;
            bad |= isfinite(score) ? 0u : 1u << r;
            const float max = fmaxf(run[r].max, score);
            const float rescale = exp2f(run[r].max - max), weight = exp2f(score - max);  // exp2f(-inf) = 0 at first
            run[r].sum = run[r].sum * rescale + weight;
#pragma unroll
            for (int x = 0; x < Columns; ++x) {
                run[r].o[x] = run[r].o[x] * rescale + weight * v[x];
            }
            run[r].max = max;
        }
    }
#pragma unroll
    for (int r = 0; r < group_rows; ++r) {
        if (lane == 0) {
            warp_max[warp][r] = run[r].max;
            warp_sum[warp][r] = run[r].sum;
        }
#pragma unroll
        for (int x = 0; x < Columns; ++x) {
            warp_o[warp][r][x * 32 + lane] = run[r].o[x];
        }
    }
    if (lane == 0) {
        warp_bad[warp] = bad;
    }
    __syncthreads();
    unsigned bad_rows = 0;
    for (int w = 0; w < row_warps; ++w) {
        bad_rows |= warp_bad[w];
    }
    for (int e = static_cast<int>(threadIdx.x); e < rows * s.head_dim; e += row_threads) {
        const int r = e / s.head_dim, col = e % s.head_dim;
        float max = -INFINITY;
        for (int w = 0; w < row_warps; ++w) {
            max = fmaxf(max, warp_max[w][r]);
        }
        float sum = 0.0f, o = 0.0f;
        for (int w = 0; w < row_warps; ++w) {
            if (warp_max[w][r] != -INFINITY) {  // a warp without keys of the row adds 0
                const float factor = exp2f(warp_max[w][r] - max);
                sum += warp_sum[w][r] * factor;
                o += warp_o[w][r][col] * factor;
            }
        }
        const bool row_bad = length < 0 || ((bad_rows >> r) & 1u) != 0;
        const int keys = keys_of(r);
        d_o[row_of(r) * s.head_dim + col] = __float2bfloat16_rn(row_bad ? NAN : keys == 0 ? 0.0f : o / sum);
        if (col == 0) {
            d_lse[row_of(r)] = row_bad ? NAN : keys == 0 ? -INFINITY : max / log2e + logf(sum);
        }
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
    const std::int64_t group_rows_total = static_cast<std::int64_t>(s.q_len) * (s.heads / s.kv_heads);
    const int passes = static_cast<int>((group_rows_total + group_rows - 1) / group_rows);
    // At most batch * q_len * heads blocks (a block has a row at least): below 2^31, as checked above.
    const unsigned grid = static_cast<unsigned>(static_cast<std::int64_t>(s.batch) * s.kv_heads * passes);
    if (s.head_dim == 64) {
        group_kernel<2><<<grid, row_threads, 0, stream>>>(d_q, c, s, scale, d_o, d_lse, passes);
    } else {
        group_kernel<4><<<grid, row_threads, 0, stream>>>(d_q, c, s, scale, d_o, d_lse, passes);
    }
    return cudaGetLastError();
}

}  // namespace stepwise::decode_attention::grouped_heads
