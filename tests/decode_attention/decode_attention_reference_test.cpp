// CPU tests of the decode attention chapter's reference over a paged cache: against the attention chapter's
// reference on the same cache gathered into contiguous K and V, and its edges.
#include "attention/attention_reference.hpp"
#include "decode_attention/decode_attention_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace stepwise::decode_attention {
namespace {

struct Inputs {
    std::vector<float> q, k_pool, v_pool;
};

Inputs random_problem_inputs(const Problem& p, std::uint64_t seed)
{
    return {attention::random_inputs(q_elements(p), seed), attention::random_inputs(pool_elements(p), seed + 1),
            attention::random_inputs(pool_elements(p), seed + 2)};
}

Problem grouped_problem(std::vector<int> lengths, int q_len)
{
    Problem p;
    p.batch = static_cast<int>(lengths.size());
    p.q_len = q_len;
    p.heads = 8;
    p.kv_heads = 2;
    p.head_dim = 16;
    p.page_size = 16;
    p.lengths = std::move(lengths);
    assign_pages(p, 7);
    return p;
}

//! The row of sequence `b` by the attention chapter's causal reference: its cache gathered into contiguous K and V of
//! `lengths[b]` keys, the query tokens placed at the last q_len positions.
void contiguous_row(const Problem& p, const Inputs& in, float scale, int b, int i, int h, std::vector<double>& o,
                    double& lse)
{
    attention::Problem a;
    a.heads = p.heads;
    a.kv_heads = p.kv_heads;
    a.seq = p.lengths[b];
    a.head_dim = p.head_dim;
    a.causal = true;
    std::vector<float> q(attention::q_elements(a)), k(attention::kv_elements(a)), v(attention::kv_elements(a));
    for (int g = 0; g < p.kv_heads; ++g) {
        for (int j = 0; j < a.seq; ++j) {
            for (int d = 0; d < p.head_dim; ++d) {
                const std::size_t to = (static_cast<std::size_t>(g) * a.seq + j) * p.head_dim + d;
                k[to] = in.k_pool[cache_offset(p, b, j, g) + d];
                v[to] = in.v_pool[cache_offset(p, b, j, g) + d];
            }
        }
    }
    const int row = a.seq - p.q_len + i;
    for (int d = 0; d < p.head_dim; ++d) {
        q[(static_cast<std::size_t>(h) * a.seq + row) * p.head_dim + d] =
            in.q[((static_cast<std::size_t>(b) * p.q_len + i) * p.heads + h) * p.head_dim + d];
    }
    o.assign(p.head_dim, 0.0);
    attention::reference_row(a, scale, q.data(), k.data(), v.data(), 0, h, row, o.data(), &lse);
}

TEST(DecodeAttentionReference, MatchesTheContiguousCausalReferenceOverShuffledPages)
{
    const Problem p = grouped_problem({37, 64, 5, 17}, 4);
    ASSERT_TRUE(valid(p));
    const Inputs in = random_problem_inputs(p, 11);
    const float scale = attention::default_scale(p.head_dim);
    std::vector<double> o(p.head_dim), expected;
    for (int b = 0; b < p.batch; ++b) {
        for (int i = 0; i < p.q_len; ++i) {
            for (int h = 0; h < p.heads; ++h) {
                double lse = 0, expected_lse = 0;
                reference_row(p, scale, in.q.data(), in.k_pool.data(), in.v_pool.data(), b, i, h, o.data(), &lse);
                contiguous_row(p, in, scale, b, i, h, expected, expected_lse);
                EXPECT_NEAR(lse, expected_lse, 1e-12) << b << " " << i << " " << h;
                for (int d = 0; d < p.head_dim; ++d) {
                    EXPECT_NEAR(o[d], expected[d], 1e-12) << b << " " << i << " " << h << " " << d;
                }
            }
        }
    }
}

TEST(DecodeAttentionReference, ThePageTableNotThePoolOrderDecides)
{
    Problem p = grouped_problem({45, 30}, 1);
    const Inputs in = random_problem_inputs(p, 3);
    // The same cache contents under another pool order: copy each sequence's pages to where the new table puts them.
    Problem other = p;
    assign_pages(other, 99);
    ASSERT_NE(other.page_table, p.page_table);
    Inputs moved = in;
    for (int b = 0; b < p.batch; ++b) {
        for (int j = 0; j < p.lengths[b]; ++j) {
            for (int g = 0; g < p.kv_heads; ++g) {
                for (int d = 0; d < p.head_dim; ++d) {
                    moved.k_pool[cache_offset(other, b, j, g) + d] = in.k_pool[cache_offset(p, b, j, g) + d];
                    moved.v_pool[cache_offset(other, b, j, g) + d] = in.v_pool[cache_offset(p, b, j, g) + d];
                }
            }
        }
    }
    std::vector<double> o(p.head_dim), o_other(p.head_dim);
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            double lse = 0, lse_other = 0;
            reference_row(p, 1.0f, in.q.data(), in.k_pool.data(), in.v_pool.data(), b, 0, h, o.data(), &lse);
            reference_row(other, 1.0f, moved.q.data(), moved.k_pool.data(), moved.v_pool.data(), b, 0, h,
                          o_other.data(), &lse_other);
            EXPECT_EQ(lse, lse_other);
            EXPECT_EQ(o, o_other);
        }
    }
}

TEST(DecodeAttentionReference, ASharedPrefixIsReadFromTheSamePages)
{
    Problem p;
    p.batch = 2;
    p.heads = p.kv_heads = 1;
    p.head_dim = 8;
    p.page_size = 4;
    p.lengths = {10, 13};
    assign_pages(p, 5, 2);
    ASSERT_TRUE(valid(p));
    EXPECT_EQ(p.num_pages, 3 + 4 - 2);
    for (int page = 0; page < 2; ++page) {
        EXPECT_EQ(p.page_table[page], p.page_table[p.max_pages + page]);
    }
    EXPECT_NE(p.page_table[2], p.page_table[p.max_pages + 2]);
    for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(cache_offset(p, 0, j, 0), cache_offset(p, 1, j, 0));
    }
}

TEST(DecodeAttentionReference, AnEmptyCacheGivesZeroAndMinusInfinity)
{
    Problem p = grouped_problem({0, 2}, 4);
    ASSERT_TRUE(valid(p));
    const Inputs in = random_problem_inputs(p, 1);
    std::vector<double> o(p.head_dim, 1.0);
    double lse = 0;
    for (int i = 0; i < p.q_len; ++i) {
        reference_row(p, 1.0f, in.q.data(), in.k_pool.data(), in.v_pool.data(), 0, i, 0, o.data(), &lse);
        EXPECT_EQ(lse, -std::numeric_limits<double>::infinity());
        EXPECT_EQ(o, std::vector<double>(p.head_dim, 0.0));
    }
    // Two cached tokens for four queries: the first two see nothing, the last two one key and two.
    EXPECT_EQ(visible_keys(p, 1, 0), 0);
    EXPECT_EQ(visible_keys(p, 1, 1), 0);
    EXPECT_EQ(visible_keys(p, 1, 2), 1);
    EXPECT_EQ(visible_keys(p, 1, 3), 2);
    reference_row(p, 1.0f, in.q.data(), in.k_pool.data(), in.v_pool.data(), 1, 2, 0, o.data(), &lse);
    for (int d = 0; d < p.head_dim; ++d) {  // one key: o is its value
        EXPECT_EQ(o[d], in.v_pool[cache_offset(p, 1, 0, 0) + d]);
    }
}

TEST(DecodeAttentionReference, ANaNStaysInItsSequenceAndItsGroup)
{
    Problem p = grouped_problem({20, 20}, 1);
    Inputs in = random_problem_inputs(p, 2);
    in.k_pool[cache_offset(p, 0, 9, 1) + 3] = std::numeric_limits<float>::quiet_NaN();
    std::vector<double> o(p.head_dim);
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            double lse = 0;
            reference_row(p, 1.0f, in.q.data(), in.k_pool.data(), in.v_pool.data(), b, 0, h, o.data(), &lse);
            const bool reached = b == 0 && h / (p.heads / p.kv_heads) == 1;  // sequence 0, K/V head 1's group
            EXPECT_EQ(std::isnan(lse), reached) << b << " " << h;
            EXPECT_EQ(std::isnan(o[0]), reached) << b << " " << h;
        }
    }
}

TEST(DecodeAttentionReference, ValidRejectsWhatTheChapterDoesNotTake)
{
    Problem p = grouped_problem({33, 8}, 2);
    EXPECT_TRUE(valid(p));
    Problem q = p;
    q.kv_heads = 3;
    EXPECT_FALSE(valid(q));
    q = p;
    q.lengths[0] = q.max_pages * q.page_size + 1;
    EXPECT_FALSE(valid(q));
    q = p;
    q.page_table[0] = q.num_pages;
    EXPECT_FALSE(valid(q));
    q = p;
    q.page_table[0] = -1;
    EXPECT_FALSE(valid(q));
    q = p;
    q.lengths.pop_back();
    EXPECT_FALSE(valid(q));
}

TEST(DecodeAttentionReference, BytesMovedCountTheCacheOnceAndTheQueries)
{
    Problem p = grouped_problem({100, 28}, 2);
    const double kv = 2.0 * 128 * p.kv_heads * p.head_dim * 2;
    const double q_and_o = 2.0 * p.batch * p.q_len * p.heads * p.head_dim * 2;
    const double lse = 4.0 * p.batch * p.q_len * p.heads;
    EXPECT_EQ(bytes_moved(p), kv + q_and_o + lse);
}

}  // namespace
}  // namespace stepwise::decode_attention
