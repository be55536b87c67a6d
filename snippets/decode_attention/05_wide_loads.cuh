//! @file 05_wide_loads.cuh
//! @brief Decode attention step 5 (beyond the sources): each lane reads 16 bytes of a key and of a value, eight
//!        columns, where steps 1 to 4 read two.
//!
//! Step 4 keeps the SMs busy, but its lanes read the cache two bytes at a time: a key of 128 columns is four loads
//! a lane, each a warp-wide access of 64 bytes, and every key costs a score reduction over the whole warp. Here
//! `head_dim / 8` lanes hold a key's row, eight columns each from one 16-byte load, so that a warp reads two keys at
//! a time (four at head_dim 64), each with a reduction over its own lanes; each group of lanes, a slot, keeps its own
//! running softmax of every row, and the slots of a warp merge at the end as step 2's warps do. A lane's states,
//! eight columns a row now, are as many as the block has rows: `few_rows` where a group has no more (Llama 3's four
//! query heads a K/V head at one new token), `group_rows` otherwise. The pools must be
//! 16-byte aligned (a cache's pages are; the launcher checks it). The splits and the merge are step 4's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <algorithm>

namespace stepwise::decode_attention::wide_loads {

using bf16 = __nv_bfloat16;

constexpr int row_warps = 4;                   //!< warps of a block, each every row_warps-th key of the row
constexpr int row_threads = row_warps * 32;
constexpr int max_head_dim = 128;              //!< head_dim 64 or 128
constexpr int chunk_values = 8;                //!< bf16 values of a 16-byte load: a lane's columns of a key
constexpr int group_rows = 8;                  //!< rows a block at most: a group's query heads, for each new token
constexpr int few_rows = 4;                    //!< a block's rows where a group has no more (Llama 3 at q_len 1)
constexpr int blocks_per_sm_target = 4;        //!< blocks an SM the splits aim for (a block is 128 threads)
constexpr int min_split_keys = 256;            //!< no split holds fewer keys than this, unless the cache is shorter
constexpr int merge_threads = 128;             //!< a block of the merge kernel: a row, its head_dim columns
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

//! @brief A lane's running softmax of one row over the keys its slot has seen: their maximum (scaled by log2 e), the
//!        sum of exp2(score - max), and the weighted sum of the values in the lane's columns.
struct Running {
    float max = -INFINITY, sum = 0.0f;
    float o[chunk_values] = {};
};

//! @brief `r` merged with the state of the lane `offset` away (another slot's keys, the same columns).
__device__ __forceinline__ void merge_with_lane(Running& r, int offset)
{
    const float other_max = __shfl_xor_sync(0xffffffffu, r.max, offset);
    const float other_sum = __shfl_xor_sync(0xffffffffu, r.sum, offset);
    const float max = fmaxf(r.max, other_max);
    const float mine = r.max == -INFINITY ? 0.0f : exp2f(r.max - max);  // a slot without keys adds 0
    const float theirs = other_max == -INFINITY ? 0.0f : exp2f(other_max - max);
    r.sum = r.sum * mine + other_sum * theirs;
#pragma unroll
    for (int x = 0; x < chunk_values; ++x) {
        r.o[x] = r.o[x] * mine + __shfl_xor_sync(0xffffffffu, r.o[x], offset) * theirs;
    }
    r.max = max;
}

//! @brief The 8 bf16 values of a 16-byte load, as floats (a bf16 is the upper half of its float).
__device__ __forceinline__ void widen(const uint4& bits, float (&out)[chunk_values])
{
    const unsigned words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        out[2 * w] = __uint_as_float(words[w] << 16);
        out[2 * w + 1] = __uint_as_float(words[w] & 0xffff0000u);
    }
}

//! @brief What a split leaves of a row for the merge: the maximum of its scores (base 2; -inf without keys, NaN
//!        where a score was not finite), the sum of exp2(score - max), and the unnormalized output, in the workspace.
struct Partials {
    float* d_max;  //!< [rows][splits]
    float* d_sum;  //!< [rows][splits]
    float* d_o;    //!< [rows][splits][head_dim]
    int splits, split_keys;
};

//! @brief Step 4's block over keys [split * split_keys, (split + 1) * split_keys), its keys read 16 bytes a lane:
//!        `LanesPerKey` = head_dim / 8 lanes hold a key's row (8 columns each), so that a warp takes 32 /
//!        LanesPerKey keys at a time (its slots), each slot keeping its own running softmax, merged across the warp's
//!        slots at the end. `Rows`: the block's rows at most, the running states a lane keeps (`few_rows` where a
//!        group has no more rows, so that its states take no registers it does not use). blockIdx.x: ((b * kv_heads +
//!        kv_head) * passes + pass) * splits + split.
template <int LanesPerKey, int Rows>
static __global__ void __launch_bounds__(row_threads)
    split_kernel(const bf16* __restrict__ d_q, Cache c, Shape s, float scale, Partials p, int passes)
{
    static_assert(Rows <= 32, "a row's bit in a 32-bit mask");
    constexpr int slots = 32 / LanesPerKey;  // keys a warp reads at a time
    __shared__ float q_rows[Rows][max_head_dim];
    __shared__ float warp_max[row_warps][Rows], warp_sum[row_warps][Rows];
    __shared__ float warp_o[row_warps][Rows][max_head_dim];
    __shared__ unsigned warp_bad[row_warps];  // bit r: the warp saw a score of row r that was not finite
    const int group = s.heads / s.kv_heads;
    const int split = static_cast<int>(blockIdx.x % p.splits);
    const int pass = static_cast<int>(blockIdx.x / p.splits % passes);
    const int kv_head = static_cast<int>(blockIdx.x / p.splits / passes % s.kv_heads);
    const int b = static_cast<int>(blockIdx.x / p.splits / passes / s.kv_heads);
    const int first = pass * Rows;
    const int rows = min(Rows, s.q_len * group - first);
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int slot = lane / LanesPerKey, column = lane % LanesPerKey * chunk_values;  // the lane's key and columns
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
    const int key_begin = split * p.split_keys;
    const int key_end = min(keys_of(rows - 1), key_begin + p.split_keys);  // the block's last row sees the most
    const float score_scale = scale * log2e;  // scores in base 2: exp2f, not expf
    Running run[Rows];
    unsigned bad = 0;
    for (int base = key_begin + warp * slots; base < key_end; base += row_warps * slots) {  // warp-uniform
        const int j = base + slot;
        float k[chunk_values] = {}, v[chunk_values] = {};
        if (j < key_end) {
            const std::size_t at_key = cache_offset(c, s, b, j, kv_head) + column;
            widen(*reinterpret_cast<const uint4*>(c.d_k + at_key), k);
            widen(*reinterpret_cast<const uint4*>(c.d_v + at_key), v);
        }
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
            if (r >= rows || base >= keys_of(r)) {  // warp-uniform: no slot of the warp sees a key of row r
                continue;
            }
            float dot = 0.0f;
#pragma unroll
            for (int x = 0; x < chunk_values; ++x) {
                dot += q_rows[r][column + x] * k[x];
            }
            for (int offset = LanesPerKey / 2; offset > 0; offset /= 2) {  // within the slot's lanes
                dot += __shfl_xor_sync(0xffffffffu, dot, offset);
            }
            if (j >= key_end || j >= keys_of(r)) {  // this slot's key is past the split or past what row r sees
                continue;
            }
            const float score = dot * score_scale;
            bad |= isfinite(score) ? 0u : 1u << r;
            const float max = fmaxf(run[r].max, score);
            const float rescale = exp2f(run[r].max - max), weight = exp2f(score - max);  // exp2f(-inf) = 0 at first
            run[r].sum = run[r].sum * rescale + weight;
#pragma unroll
            for (int x = 0; x < chunk_values; ++x) {
                run[r].o[x] = run[r].o[x] * rescale + weight * v[x];
            }
            run[r].max = max;
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    bad = __reduce_or_sync(0xffffffffu, bad);
#else  // no __reduce_or_sync before sm_80: the same OR over the warp's lanes by shuffles
    for (int offset = 16; offset > 0; offset /= 2) {
        bad |= __shfl_xor_sync(0xffffffffu, bad, offset);
    }
#endif
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
        for (int offset = LanesPerKey; offset < 32; offset *= 2) {  // the slots' states, merged into every slot
            merge_with_lane(run[r], offset);
        }
        if (lane == 0) {
            warp_max[warp][r] = run[r].max;
            warp_sum[warp][r] = run[r].sum;
        }
        if (slot == 0) {
#pragma unroll
            for (int x = 0; x < chunk_values; ++x) {
                warp_o[warp][r][column + x] = run[r].o[x];
            }
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
        const std::int64_t at = row_of(r) * p.splits + split;
        p.d_o[at * s.head_dim + col] = o;
        if (col == 0) {
            p.d_max[at] = ((bad_rows >> r) & 1u) != 0 ? NAN : max;
            p.d_sum[at] = sum;
        }
    }
}

//! @brief Merges the splits of each row (blockIdx.x): o = sum_s o_s 2^(max_s - max) / sum_s sum_s 2^(max_s - max),
//!        the LSE from the same; NaN for a row of an invalid sequence or one a split saw a non-finite score of, o = 0
//!        and LSE -inf for a row that sees no key.
static __global__ void __launch_bounds__(merge_threads)
    merge_kernel(Cache c, Shape s, Partials p, bf16* __restrict__ d_o, float* __restrict__ d_lse)
{
    const std::int64_t row = blockIdx.x;
    const int b = static_cast<int>(row / (static_cast<std::int64_t>(s.q_len) * s.heads));
    const bool invalid = checked_length(c, b) < 0;
    const float* max_of = p.d_max + row * p.splits;
    const float* sum_of = p.d_sum + row * p.splits;
    float max = -INFINITY;
    bool bad = invalid;
    for (int split = 0; split < p.splits; ++split) {
        bad = bad || isnan(max_of[split]);
        max = fmaxf(max, max_of[split]);
    }
    float sum = 0.0f;
    for (int split = 0; split < p.splits; ++split) {
        sum += max_of[split] == -INFINITY ? 0.0f : sum_of[split] * exp2f(max_of[split] - max);
    }
    for (int col = static_cast<int>(threadIdx.x); col < s.head_dim; col += merge_threads) {
        float o = 0.0f;
        for (int split = 0; split < p.splits; ++split) {
            if (max_of[split] != -INFINITY) {  // a split without keys of the row adds 0
                o += p.d_o[(row * p.splits + split) * s.head_dim + col] * exp2f(max_of[split] - max);
            }
        }
        d_o[row * s.head_dim + col] = __float2bfloat16_rn(bad ? NAN : max == -INFINITY ? 0.0f : o / sum);
    }
    if (threadIdx.x == 0) {
        d_lse[row] = bad ? NAN : max == -INFINITY ? -INFINITY : max / log2e + logf(sum);
    }
}

//! @brief The splits of each sequence's keys: enough blocks for `blocks_per_sm_target` an SM where the batch's
//!        groups give fewer, no split shorter than `min_split_keys` (the pages' capacity, max_pages * page_size,
//!        stands for the longest sequence: the lengths are on the device).
inline int splits_for(std::int64_t group_blocks, std::int64_t max_keys, int sms)
{
    const std::int64_t wanted = (std::int64_t{blocks_per_sm_target} * sms + group_blocks - 1) / group_blocks;
    const std::int64_t most = std::max<std::int64_t>(1, (max_keys + min_split_keys - 1) / min_split_keys);
    return static_cast<int>(std::clamp<std::int64_t>(wanted, 1, most));
}

//! @brief Attention of each new query token over its sequence's paged cache: o = softmax(scale q K^T) V over the
//!        keys the query sees (positions 0 to length - q_len + i: the new tokens are the cache's last, causal among
//!        themselves), and each row's log-sum-exp. Two phases, as CUB: with `d_temp_storage == nullptr` it only sets
//!        `temp_storage_bytes`.
//! @param[in]     d_temp_storage     device memory for each split's partial result of each row (fp32), or
//!                                   nullptr to ask its size
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
//!      null (the pools may be null with no pages), q and o 2-byte aligned, the pools 16-byte aligned, the LSE, table and lengths
//!      4-byte aligned, and `d_temp_storage` 4-byte aligned. A sequence whose length is negative, longer than its pages hold, or reaches a page outside
//!      the pool gets NaN rows (nothing outside the pool is read). A NaN in K, or an infinite score, makes its row
//!      NaN; a NaN in V the columns it is in, in the rows that see it.
//! @return `cudaErrorInvalidValue` if a precondition fails or the workspace is too small (its size depends on the
//!         device's SMs: ask it on the device that runs the call), else the first error of the device query or of a
//!         launch
inline cudaError_t decode_attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                                    const Cache& c, bf16* d_o, float* d_lse, const Shape& s, float scale,
                                    cudaStream_t stream = 0)
{
    const auto aligned = [](const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
    if (s.batch < 1 || s.q_len < 1 || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 ||
        (s.head_dim != 64 && s.head_dim != 128) || c.page_size < 1 || c.max_pages < 1 || c.num_pages < 0 ||
        d_q == nullptr || d_o == nullptr || d_lse == nullptr || c.d_page_table == nullptr ||
        c.d_lengths == nullptr || (c.num_pages > 0 && (c.d_k == nullptr || c.d_v == nullptr)) ||
        !aligned(d_q, 2) || !aligned(d_o, 2) || !aligned(c.d_k, 16) || !aligned(c.d_v, 16) || !aligned(d_lse, 4) ||
        !aligned(c.d_page_table, 4) || !aligned(c.d_lengths, 4)) {
        return cudaErrorInvalidValue;
    }
    const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.q_len * s.heads;
    const std::int64_t max_keys = static_cast<std::int64_t>(c.max_pages) * c.page_size;
    if (rows > 0x7fffffff || max_keys > 0x7fffffff) {
        return cudaErrorInvalidValue;
    }
    int device = 0, sms = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
        return e;
    }
    if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
        return e;
    }
    const std::int64_t group_total = static_cast<std::int64_t>(s.q_len) * (s.heads / s.kv_heads);
    const int block_rows = group_total <= few_rows ? few_rows : group_rows;  // the running states a lane keeps
    const int passes = static_cast<int>((group_total + block_rows - 1) / block_rows);
    const std::int64_t group_blocks = static_cast<std::int64_t>(s.batch) * s.kv_heads * passes;
    // Splits beyond 2^31 blocks in all are not taken: a block has a row at least, and rows < 2^31.
    const int splits = static_cast<int>(std::min<std::int64_t>(splits_for(group_blocks, max_keys, sms),
                                                               0x7fffffff / group_blocks));
    const std::int64_t partials = rows * splits;
    const std::size_t needed = static_cast<std::size_t>(partials) * (2 + s.head_dim) * sizeof(float);
    if (d_temp_storage == nullptr) {
        temp_storage_bytes = needed;
        return cudaSuccess;
    }
    if (temp_storage_bytes < needed || !aligned(d_temp_storage, 4)) {
        return cudaErrorInvalidValue;
    }
    float* const d_partials = static_cast<float*>(d_temp_storage);
    const Partials p{d_partials, d_partials + partials, d_partials + 2 * partials, splits,
                     static_cast<int>((max_keys + splits - 1) / splits)};
    const unsigned grid = static_cast<unsigned>(group_blocks * splits);
    const auto kernel = s.head_dim == 64 ? (block_rows == few_rows ? split_kernel<64 / chunk_values, few_rows>
                                                                   : split_kernel<64 / chunk_values, group_rows>)
                                         : (block_rows == few_rows ? split_kernel<128 / chunk_values, few_rows>
                                                                   : split_kernel<128 / chunk_values, group_rows>);
    kernel<<<grid, row_threads, 0, stream>>>(d_q, c, s, scale, p, passes);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
        return e;
    }
    merge_kernel<<<static_cast<unsigned>(rows), merge_threads, 0, stream>>>(c, s, p, d_o, d_lse);
    return cudaGetLastError();
}

}  // namespace stepwise::decode_attention::wide_loads
