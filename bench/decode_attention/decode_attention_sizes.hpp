// The decode attention chapter's sizes: a batch of sequences with Llama 3 8B's attention heads (32 query heads over 8
// K/V heads of 128) reading a cache in pages of 16 tokens, the registry's key of each and its text.
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

//! @brief A size of the chapter: `batch` sequences of `length` cached tokens each (the new ones included), each with
//!        `q_len` new query tokens; `ragged`: the sequences' lengths spread from about length / batch to `length`
//!        (ragged_lengths()).
struct Size {
    int batch = 1, q_len = 1, length = 1;
    bool ragged = false;
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

//! The registry's n of a size: ragged * 10^15 + q_len * 10^12 + batch * 10^6 + length (a key; the size's `shape` is
//! batch, q_len, length, its problem text says the rest).
inline std::int64_t size_key(const Size& s)
{
    constexpr std::int64_t e6 = 1000000, e12 = e6 * e6, e15 = e12 * 1000;
    return (s.ragged ? e15 : 0) + s.q_len * e12 + s.batch * e6 + s.length;
}

inline Size size_of(std::int64_t key)
{
    constexpr std::int64_t e6 = 1000000, e12 = e6 * e6, e15 = e12 * 1000;
    return {static_cast<int>(key / e6 % e6), static_cast<int>(key / e12 % 1000), static_cast<int>(key % e6),
            key >= e15};
}

//! "8 x 32768 tokens, 1 new token" (batch x cached tokens, new tokens a sequence); a ragged batch "64 x 128 to 8191
//! tokens (ragged), 1 new token". The page cites a size as #BxQxL (batch, q_len, longest length).
inline std::string size_text(const Size& s)
{
    const std::vector<int> lengths = s.ragged ? ragged_lengths(s.batch, s.length) : std::vector<int>{s.length};
    const std::string tokens = s.ragged ? std::to_string(lengths.front()) + " to " + std::to_string(s.length) +
                                              " tokens (ragged)"
                                        : std::to_string(s.length) + (s.length == 1 ? " token" : " tokens");
    return std::to_string(s.batch) + " x " + tokens + ", " + std::to_string(s.q_len) +
           (s.q_len == 1 ? " new token" : " new tokens");
}

inline ProblemSize problem_size(const Size& s) { return {size_key(s), size_text(s), {s.batch, s.q_len, s.length}}; }

//! @brief The chapter's Problem of a size (Llama 3 8B's heads, pages of 16), its pages taken from a pool shuffled by
//!        `seed`.
inline Problem problem_of(const Size& s, std::uint64_t seed)
{
    Problem p;
    p.batch = s.batch;
    p.q_len = s.q_len;
    p.heads = model_heads;
    p.kv_heads = model_kv_heads;
    p.head_dim = model_head_dim;
    p.page_size = model_page_size;
    p.lengths = s.ragged ? ragged_lengths(s.batch, s.length)
                         : std::vector<int>(static_cast<std::size_t>(s.batch), s.length);
    assign_pages(p, seed);
    return p;
}

}  // namespace stepwise::decode_attention
