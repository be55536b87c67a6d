// The decode attention chapter's CPU reference over a paged K/V cache (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stepwise::decode_attention {

//! @brief One decoding problem. Per sequence b of the batch: `q_len` new query tokens q [batch, q_len, heads,
//!        head_dim] against a cache of `lengths[b]` tokens, whose keys and values lie in pages of `page_size` tokens
//!        of a shared pool, K and V each [num_pages, page_size, kv_heads, head_dim]; `page_table` [batch, max_pages]
//!        names the pool page of each of a sequence's pages. The query heads are split into kv_heads groups of
//!        heads / kv_heads that share one K/V head (grouped-query attention). The cache holds the new tokens too:
//!        query i (0 <= i < q_len) is at position lengths[b] - q_len + i and sees the keys at positions 0 to it
//!        (causal among the new tokens; q_len 1 sees the whole cache). O is laid out as q, the log-sum-exp of each
//!        row [batch, q_len, heads].
struct Problem {
    int batch = 1, q_len = 1, heads = 32, kv_heads = 8, head_dim = 128, page_size = 16;
    int num_pages = 0, max_pages = 0;
    std::vector<int> lengths;     //!< batch values: the cache length of each sequence, 0 or more
    std::vector<int> page_table;  //!< batch * max_pages values: pool pages, -1 where a sequence has no page
};

//! @brief Whether the problem is one the chapter takes: sizes >= 1, kv_heads dividing heads, batch lengths of at
//!        most max_pages * page_size tokens, and every page a sequence's length reaches in [0, num_pages).
bool valid(const Problem& p);

//! @brief Elements of q (and o), of one K (or V) page, and of the K (or V) pool.
std::size_t q_elements(const Problem& p);
std::size_t page_elements(const Problem& p);
std::size_t pool_elements(const Problem& p);

//! @brief The keys query `i` of sequence `b` sees: positions 0 to lengths[b] - q_len + i, none where that is below 0.
int visible_keys(const Problem& p, int b, int i);

//! @brief Where the key (or value) of position `j` of sequence `b`, K/V head `kv_head`, lies in a pool.
std::size_t cache_offset(const Problem& p, int b, int j, int kv_head);

//! @brief The bytes a decoding step must read: every cached key and value it sees once (bf16), plus q; and write:
//!        o (bf16) and the log-sum-exps (fp32).
double bytes_moved(const Problem& p);

//! @brief A page table for `lengths`: each sequence's pages taken from a pool in an order shuffled by `seed` (the
//!        table, not the layout, decides), and, where `shared_prefix_pages` > 0, the first pages of sequence 1 the
//!        same pool pages as sequence 0's (a shared prompt). Sets num_pages, max_pages and page_table.
void assign_pages(Problem& p, std::uint64_t seed, int shared_prefix_pages = 0);

//! @brief One row of the reference in double: o[0..head_dim) = sum_j p_j v_j over the keys j that query `i` of
//!        sequence `b`, head `h`, sees, p = softmax(scale * q k_j), and `lse` = log(sum_j exp(scale * q k_j)) (natural
//!        log). A row that sees no key (an empty cache) has o = 0 and lse = -inf. A NaN or infinite score makes the
//!        row's o and lse NaN; a NaN in V makes NaN the columns it is in. `largest_score` (if not null) gets the
//!        largest |scale * q k_j| of the row.
void reference_row(const Problem& p, float scale, const float* q, const float* k_pool, const float* v_pool, int b,
                   int i, int h, double* o, double* lse, double* largest_score = nullptr);

}  // namespace stepwise::decode_attention
