// The attention chapters' sizes (forward and backward): the registry's key of a problem and its text, the sweep of
// sequence lengths and PyTorch's row at the final step's sizes.
#pragma once

#include "attention/attention_reference.hpp"
#include "core/chapter.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::attention {

//! The registry's n of a problem: causal * 10^18 + head_dim * 10^15 + batch * 10^12 + heads * 10^9 + kv_heads * 10^6
//! + seq (a key; the size's `shape` is batch, heads, seq, head_dim, its problem text says the rest).
inline std::int64_t size_key(const Problem& p)
{
    constexpr std::int64_t e3 = 1000, e6 = e3 * e3, e9 = e6 * e3, e12 = e9 * e3, e15 = e12 * e3, e18 = e15 * e3;
    return (p.causal ? e18 : 0) + p.head_dim * e15 + p.batch * e12 + p.heads * e9 + p.kv_heads * e6 + p.seq;
}

inline Problem problem_of(std::int64_t key)
{
    const auto digits = [&](int at_power) {
        std::int64_t scale = 1;
        for (int i = 0; i < at_power; ++i) {
            scale *= 10;
        }
        return static_cast<int>(key / scale % 1000);
    };
    return {digits(12), digits(9), digits(6), static_cast<int>(key % 1000000), digits(15), key >= 1000000000000000000};
}

//! "4 x 16 x 4096, head dim 128, causal": the page cites it as 4x16x4096x128/causal (or /non-causal).
inline std::string size_text(const Problem& p)
{
    const std::string kv = p.kv_heads == p.heads ? "" : " (" + std::to_string(p.kv_heads) + " K/V heads)";
    return std::to_string(p.batch) + " x " + std::to_string(p.heads) + kv + " x " + std::to_string(p.seq) +
           ", head dim " + std::to_string(p.head_dim) + (p.causal ? ", causal" : ", non-causal");
}

inline ProblemSize problem_size(const Problem& p)
{
    return {size_key(p), size_text(p), {p.batch, p.heads, p.seq, p.head_dim}};
}

//! @brief The most query elements and the most K/V elements of any of the problems of `keys`: what buffers shared by
//!        every size must hold.
inline std::pair<std::size_t, std::size_t> largest_elements(const std::vector<std::int64_t>& keys)
{
    std::size_t most_q = 0, most_kv = 0;
    for (const std::int64_t key : keys) {
        most_q = std::max(most_q, q_elements(problem_of(key)));
        most_kv = std::max(most_kv, kv_elements(problem_of(key)));
    }
    return {most_q, most_kv};
}

//! The sweep: 16k tokens (batch x seq) of 16 heads of 128, sequences of 512 to 16384 (FlashAttention-3's sizes;
//! 4 x 16 x 4096, 2 x 16 x 8192 and 1 x 16 x 16384 are the chapters' bar's).
inline constexpr int sweep_tokens = 16384;
inline constexpr int sweep_min_log2 = 9;
inline constexpr int sweep_max_log2 = 14;

//! @brief The sweep of `rows` (steps, the library, the ceiling) over those sequence lengths.
inline Sweep sequence_sweep(std::vector<std::string> rows)
{
    Sweep sweep{{}, std::move(rows), 0, 1, 2, "sequence length (16 heads of 128, 16k tokens: batch x seq)"};
    for (int k = sweep_min_log2; k <= sweep_max_log2; ++k) {
        sweep.sizes.push_back(problem_size({sweep_tokens >> k, 16, 16, 1 << k, 128, false}));
    }
    return sweep;
}

//! @brief PyTorch's row `id` at each of `sizes` (the final step's), with their K/V heads and mask.
inline PytorchRow pytorch_row(std::string id, const std::vector<ProblemSize>& sizes)
{
    PytorchRow row{std::move(id), {}};
    for (const ProblemSize& size : sizes) {
        const Problem p = problem_of(size.n);
        row.sizes.push_back(pytorch_size(size, "bf16", {{"kv_heads", p.kv_heads}, {"causal", p.causal}}));
    }
    return row;
}

}  // namespace stepwise::attention
