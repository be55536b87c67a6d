// The decode attention chapter's sizes: a batch of sequences with Llama 3 8B's attention heads (32 query heads over 8
// K/V heads of 128) reading a cache in pages of 16 tokens, or other pages and heads, the registry's key of each and its
// text.
#pragma once

#include "core/chapter.hpp"
#include "decode_attention/decode_attention_reference.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::decode_attention {

//! Llama 3 8B's attention: 32 query heads, 8 K/V heads (four query heads a K/V head), head_dim 128; pages of 16 tokens
//! (vLLM's default block size).
inline constexpr int model_heads = 32;
inline constexpr int model_kv_heads = 8;
inline constexpr int model_head_dim = 128;
inline constexpr int model_page_size = 16;

//! The tokens a page holds, as a size picks them (`Size::page_size_index`): vLLM's default first, then larger pages.
inline constexpr int page_sizes[] = {model_page_size, 64, 256};

//! @brief Attention heads a size serves (`Size::heads_index`), and the words its problem text adds for them.
struct HeadShape {
    int heads, kv_heads, head_dim;
    const char* text;
};
//! Llama 3 8B's first; then Llama 3 70B's 64 query heads over 8 K/V heads, and Llama 3 8B's at head_dim 64.
inline constexpr HeadShape head_shapes[] = {{model_heads, model_kv_heads, model_head_dim, ""},
                                            {64, 8, 128, ", 64 query heads over 8"},
                                            {32, 8, 64, ", head_dim 64"}};

//! @brief A size of the chapter: `batch` sequences of `length` cached tokens each (the new ones included), each with
//!        `q_len` new query tokens; `ragged`: the sequences' lengths spread from about length / batch to `length`
//!        (ragged_lengths()); `page_size_index` and `heads_index` pick from page_sizes and head_shapes (0: pages of 16,
//!        Llama 3 8B's heads).
struct Size {
    int batch = 1, q_len = 1, length = 1;
    bool ragged = false;
    int page_size_index = 0, heads_index = 0;
};

//! @brief The lengths of a ragged batch of `batch` sequences, the longest `longest` tokens: sequence b holds
//!        1 + (longest - 1) * (b + 1) / batch tokens (64 sequences up to 8191: 128, 255, ..., 8191, multiples of
//!        nothing in particular).
inline std::vector<int> ragged_lengths(int batch, int longest)
{
    std::vector<int> lengths(static_cast<std::size_t>(batch));
    for (int b = 0; b < batch; ++b) {
        lengths[b] = 1 + static_cast<int>(static_cast<std::int64_t>(longest - 1) * (b + 1) / batch);
    }
    return lengths;
}

//! The registry's n of a size: heads_index * 10^17 + page_size_index * 10^16 + ragged * 10^15 + q_len * 10^12 +
//! batch * 10^6 + length (a key; the size's `shape` is batch, q_len, length, then for other pages or heads than the
//! first the page size, heads, K/V heads and head_dim; its problem text says the rest).
inline std::int64_t size_key(const Size& s)
{
    constexpr std::int64_t e6 = 1000000, e12 = e6 * e6, e15 = e12 * 1000, e16 = e15 * 10, e17 = e16 * 10;
    return s.heads_index * e17 + s.page_size_index * e16 + (s.ragged ? e15 : 0) + s.q_len * e12 + s.batch * e6 +
           s.length;
}

inline Size size_of(std::int64_t key)
{
    constexpr std::int64_t e6 = 1000000, e12 = e6 * e6, e15 = e12 * 1000, e16 = e15 * 10, e17 = e16 * 10;
    return {static_cast<int>(key / e6 % e6), static_cast<int>(key / e12 % 1000), static_cast<int>(key % e6),
            key / e15 % 10 == 1, static_cast<int>(key / e16 % 10), static_cast<int>(key / e17)};
}

//! "8 x 32768 tokens, 1 new token" (batch x cached tokens, new tokens a sequence); a ragged batch "64 x 128 to 8191
//! tokens (ragged), 1 new token"; other pages or heads than the first add ", pages of 64" or the heads' text. The page
//! cites a size as #BxQxL (batch, q_len, longest length), and one of other pages or heads as #BxQxLxPxHxKxD.
inline std::string size_text(const Size& s)
{
    const std::vector<int> lengths = s.ragged ? ragged_lengths(s.batch, s.length) : std::vector<int>{s.length};
    const std::string tokens = s.ragged ? std::to_string(lengths.front()) + " to " + std::to_string(s.length) +
                                              " tokens (ragged)"
                                        : std::to_string(s.length) + (s.length == 1 ? " token" : " tokens");
    return std::to_string(s.batch) + " x " + tokens + ", " + std::to_string(s.q_len) +
           (s.q_len == 1 ? " new token" : " new tokens") +
           (s.page_size_index == 0 ? "" : ", pages of " + std::to_string(page_sizes[s.page_size_index])) +
           head_shapes[s.heads_index].text;
}

inline ProblemSize problem_size(const Size& s)
{
    if (s.page_size_index == 0 && s.heads_index == 0) {
        return {size_key(s), size_text(s), {s.batch, s.q_len, s.length}};
    }
    const HeadShape& h = head_shapes[s.heads_index];
    return {size_key(s), size_text(s),
            {s.batch, s.q_len, s.length, page_sizes[s.page_size_index], h.heads, h.kv_heads, h.head_dim}};
}

//! @brief The chapter's Problem of a size (its heads and pages), its pages taken from a pool shuffled by `seed`.
inline Problem problem_of(const Size& s, std::uint64_t seed)
{
    Problem p;
    p.batch = s.batch;
    p.q_len = s.q_len;
    const HeadShape& h = head_shapes[s.heads_index];
    p.heads = h.heads;
    p.kv_heads = h.kv_heads;
    p.head_dim = h.head_dim;
    p.page_size = page_sizes[s.page_size_index];
    p.lengths = s.ragged ? ragged_lengths(s.batch, s.length)
                         : std::vector<int>(static_cast<std::size_t>(s.batch), s.length);
    assign_pages(p, seed);
    return p;
}

}  // namespace stepwise::decode_attention
