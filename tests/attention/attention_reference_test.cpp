// CPU tests of the attention chapter's reference and comparison.
#include "attention/attention_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace stepwise::attention {
namespace {

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

//! Every row of the reference: o as [batch, heads, seq, head_dim] and lse as [batch, heads, seq].
struct Result {
    std::vector<double> o, lse;
};

Result reference(const Problem& p, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                 float scale)
{
    Result r{std::vector<double>(q_elements(p)), std::vector<double>(q_elements(p) / p.head_dim)};
    std::size_t row_id = 0;
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            for (int i = 0; i < p.seq; ++i, ++row_id) {
                reference_row(p, scale, q.data(), k.data(), v.data(), b, h, i, &r.o[row_id * p.head_dim], &r.lse[row_id]);
            }
        }
    }
    return r;
}

bool row_is_nan(const Result& r, const Problem& p, std::size_t row_id)
{
    for (int d = 0; d < p.head_dim; ++d) {
        if (!std::isnan(r.o[row_id * p.head_dim + d])) {
            return false;
        }
    }
    return std::isnan(r.lse[row_id]);
}

TEST(AttentionReference, OneKeyGivesItsValue)
{
    const Problem p{1, 1, 1, 1, 64, false};
    const std::vector<float> q = random_inputs(64, 1), k = random_inputs(64, 2), v = random_inputs(64, 3);
    const Result r = reference(p, q, k, v, default_scale(64));
    double dot = 0;
    for (int d = 0; d < 64; ++d) {
        EXPECT_EQ(r.o[d], v[d]);
        dot += static_cast<double>(q[d]) * k[d];
    }
    EXPECT_NEAR(r.lse[0], dot / 8, 1e-12);
}

TEST(AttentionReference, EqualScoresAverageTheValues)
{
    // Q = 0: every score is 0, so o is the mean of the values the row sees and lse = log(keys).
    const Problem p{1, 2, 1, 5, 64, true};
    const std::vector<float> q(q_elements(p), 0.0f), k = random_inputs(kv_elements(p), 4),
        v = random_inputs(kv_elements(p), 5);
    const Result r = reference(p, q, k, v, 1.0f);
    for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 5; ++i) {
            const std::size_t row_id = h * 5 + i;
            EXPECT_NEAR(r.lse[row_id], std::log(i + 1.0), 1e-12);
            for (int d = 0; d < 64; ++d) {
                double mean = 0;
                for (int j = 0; j <= i; ++j) {
                    mean += v[j * 64 + d];
                }
                EXPECT_NEAR(r.o[row_id * 64 + d], mean / (i + 1), 1e-12);
            }
        }
    }
}

TEST(AttentionReference, GroupedHeadsShareTheirKeysAndValues)
{
    // Heads 0 and 1 read kv head 0, heads 2 and 3 kv head 1: with the same Q in every head, heads of a group agree
    // and the groups differ.
    const Problem p{1, 4, 2, 7, 64, false};
    std::vector<float> q(q_elements(p));
    const std::vector<float> one_head = random_inputs(7 * 64, 6);
    for (int h = 0; h < 4; ++h) {
        std::copy(one_head.begin(), one_head.end(), q.begin() + h * 7 * 64);
    }
    const Result r = reference(p, q, random_inputs(kv_elements(p), 7), random_inputs(kv_elements(p), 8), 0.125f);
    const std::size_t head = 7 * 64;
    for (std::size_t i = 0; i < head; ++i) {
        EXPECT_EQ(r.o[i], r.o[head + i]);
        EXPECT_EQ(r.o[2 * head + i], r.o[3 * head + i]);
    }
    EXPECT_NE(r.o[0], r.o[2 * head]);
}

TEST(AttentionReference, LargeScoresStayFinite)
{
    // Scores of about 1e4 after scaling: exp(score) alone would overflow.
    const Problem p{1, 1, 1, 3, 64, false};
    std::vector<float> q(q_elements(p), 0.0f), k(kv_elements(p), 0.0f);
    const std::vector<float> v = random_inputs(kv_elements(p), 9);
    for (int i = 0; i < 3; ++i) {
        q[i * 64] = 100.0f;
    }
    k[0] = 100.0f;   // key 0: score 1e4
    k[64] = 99.0f;   // key 1: score 9900
    k[128] = 0.0f;   // key 2: score 0
    const Result r = reference(p, q, k, v, 1.0f);
    for (int i = 0; i < 3; ++i) {
        EXPECT_NEAR(r.lse[i], 1e4 + std::log1p(std::exp(-100.0)), 1e-9);
        for (int d = 0; d < 64; ++d) {
            EXPECT_NEAR(r.o[i * 64 + d], v[d], 1e-12);
        }
    }
}

TEST(AttentionReference, NaNReachesExactlyTheRowsThatSeeIt)
{
    const Problem causal{1, 1, 1, 6, 64, true};
    const std::vector<float> q = random_inputs(q_elements(causal), 10), k = random_inputs(kv_elements(causal), 11),
                             v = random_inputs(kv_elements(causal), 12);
    {  // a NaN in Q: its row only
        std::vector<float> bad = q;
        bad[2 * 64 + 5] = nan_value;
        const Result r = reference(causal, bad, k, v, 0.125f);
        for (int i = 0; i < 6; ++i) {
            EXPECT_EQ(row_is_nan(r, causal, i), i == 2) << "row " << i;
        }
    }
    {  // a NaN in K: the rows that see key 3, all of each
        std::vector<float> bad = k;
        bad[3 * 64 + 1] = nan_value;
        const Result r = reference(causal, q, bad, v, 0.125f);
        for (int i = 0; i < 6; ++i) {
            EXPECT_EQ(row_is_nan(r, causal, i), i >= 3) << "row " << i;
        }
    }
    {  // a NaN in V: column 7 of the rows that see key 4, nothing else
        std::vector<float> bad = v;
        bad[4 * 64 + 7] = nan_value;
        const Result r = reference(causal, q, k, bad, 0.125f);
        for (int i = 0; i < 6; ++i) {
            for (int d = 0; d < 64; ++d) {
                EXPECT_EQ(std::isnan(r.o[i * 64 + d]), i >= 4 && d == 7) << "row " << i << " col " << d;
            }
            EXPECT_FALSE(std::isnan(r.lse[i]));
        }
    }
}

TEST(AttentionReference, CountsAndScale)
{
    const Problem p{4, 16, 16, 4096, 128, false};
    EXPECT_DOUBLE_EQ(counted_flops(p), 4.0 * 4 * 16 * 4096.0 * 4096 * 128);
    EXPECT_DOUBLE_EQ(counted_flops(Problem{4, 16, 16, 4096, 128, true}), counted_flops(p) / 2);
    EXPECT_EQ(q_elements(Problem{2, 8, 2, 10, 64, false}), 2u * 8 * 10 * 64);
    EXPECT_EQ(kv_elements(Problem{2, 8, 2, 10, 64, false}), 2u * 2 * 10 * 64);
    EXPECT_FLOAT_EQ(default_scale(64), 0.125f);
    EXPECT_TRUE(valid(Problem{1, 8, 2, 1, 64, false}));
    EXPECT_FALSE(valid(Problem{1, 8, 3, 1, 64, false}));
    EXPECT_FALSE(valid(Problem{1, 8, 8, 0, 64, false}));
}

TEST(AttentionReference, ComparisonCatchesWrongValuesAndNaN)
{
    const Problem p{1, 1, 1, 100, 64, false};
    const Tolerance t = tolerance(p);
    std::vector<double> expected(64, 0.5);
    std::vector<float> got(64, 0.5f);
    Comparison ok;
    compare_row(got.data(), 1.0f, expected.data(), 1.0, 64, 100, 1.0, 2.0, 0, t, ok);
    EXPECT_TRUE(ok.passed()) << ok.describe();

    got[3] = 0.5f + static_cast<float>(2 * t.output);
    Comparison off;
    compare_row(got.data(), 1.0f, expected.data(), 1.0, 64, 100, 1.0, 2.0, 7, t, off);
    EXPECT_FALSE(off.passed());
    EXPECT_EQ(off.first_row, 7);
    EXPECT_EQ(off.first_col, 3);

    got[3] = nan_value;
    Comparison nan;
    compare_row(got.data(), 1.0f, expected.data(), 1.0, 64, 100, 1.0, 2.0, 0, t, nan);
    EXPECT_EQ(nan.nan_mismatches, 1u);
    EXPECT_FALSE(nan.passed());

    got[3] = 0.5f;
    Comparison lse;
    compare_row(got.data(), 1.5f, expected.data(), 1.0, 64, 100, 1.0, 2.0, 0, t, lse);
    EXPECT_FALSE(lse.passed());
    EXPECT_EQ(lse.first_col, -1);
}

}  // namespace
}  // namespace stepwise::attention
