// CPU tests of the attention backward chapter's reference and comparison.
#include "attention_backward/attention_backward_reference.hpp"
#include "core/bf16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace stepwise::attention_backward {
namespace {

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

struct Inputs {
    std::vector<float> q, k, v, d_o;
};

Inputs random_problem_inputs(const Problem& p, std::uint64_t seed)
{
    return {attention::random_inputs(attention::q_elements(p), seed),
            attention::random_inputs(attention::kv_elements(p), seed + 1),
            attention::random_inputs(attention::kv_elements(p), seed + 2),
            attention::random_inputs(attention::q_elements(p), seed + 3)};
}

//! Every gradient of the reference, as [batch, heads or kv_heads, seq, head_dim].
struct Gradients {
    std::vector<double> dq, dk, dv;
};

Gradients reference_gradients(const Problem& p, float scale, const Inputs& in)
{
    Gradients g{std::vector<double>(attention::q_elements(p)), std::vector<double>(attention::kv_elements(p)),
                std::vector<double>(attention::kv_elements(p))};
    const int group = p.heads / p.kv_heads;
    for (int b = 0; b < p.batch; ++b) {
        std::vector<RowStatistics> stats;
        for (int h = 0; h < p.heads; ++h) {
            stats.push_back(row_statistics(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), b, h));
            for (int i = 0; i < p.seq; ++i) {
                const Gradient dq =
                    reference_dq(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), stats[h], b, h, i);
                std::copy(dq.value.begin(), dq.value.end(),
                          g.dq.begin() + static_cast<std::ptrdiff_t>(((std::size_t(b) * p.heads + h) * p.seq + i) * p.head_dim));
            }
        }
        for (int kv = 0; kv < p.kv_heads; ++kv) {
            const std::vector<RowStatistics> group_stats(stats.begin() + kv * group, stats.begin() + (kv + 1) * group);
            for (int j = 0; j < p.seq; ++j) {
                Gradient dk, dv;
                reference_dk_dv(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), group_stats, b, kv, j,
                                dk, dv);
                const auto at =
                    static_cast<std::ptrdiff_t>(((std::size_t(b) * p.kv_heads + kv) * p.seq + j) * p.head_dim);
                std::copy(dk.value.begin(), dk.value.end(), g.dk.begin() + at);
                std::copy(dv.value.begin(), dv.value.end(), g.dv.begin() + at);
            }
        }
    }
    return g;
}

//! The loss whose gradients the backward pass computes: sum over every output value of dO * O, O in double.
double loss(const Problem& p, float scale, const Inputs& in)
{
    double sum = 0, lse = 0;
    std::vector<double> o(p.head_dim);
    std::size_t row_id = 0;
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            for (int i = 0; i < p.seq; ++i, ++row_id) {
                attention::reference_row(p, scale, in.q.data(), in.k.data(), in.v.data(), b, h, i, o.data(), &lse);
                for (int d = 0; d < p.head_dim; ++d) {
                    sum += in.d_o[row_id * p.head_dim + d] * o[d];
                }
            }
        }
    }
    return sum;
}

//! Every gradient against central differences of the loss, one input value at a time (steps of 2^-10, exact on the
//! bf16 inputs).
void expect_central_differences(const Problem& p)
{
    const float scale = attention::default_scale(p.head_dim);
    Inputs in = random_problem_inputs(p, 20261129);
    const Gradients g = reference_gradients(p, scale, in);
    const float step = std::ldexp(1.0f, -10);
    const auto expect = [&](std::vector<float>& values, const std::vector<double>& gradient, const char* name) {
        for (std::size_t i = 0; i < values.size(); ++i) {
            const float kept = values[i];
            values[i] = kept + step;
            const double up = loss(p, scale, in);
            values[i] = kept - step;
            const double down = loss(p, scale, in);
            values[i] = kept;
            EXPECT_NEAR(gradient[i], (up - down) / (2.0 * step), 1e-5) << name << "[" << i << "]";
        }
    };
    expect(in.q, g.dq, "dQ");
    expect(in.k, g.dk, "dK");
    expect(in.v, g.dv, "dV");
}

TEST(AttnBackwardReference, GradientsMatchCentralDifferencesOfTheForward)
{
    expect_central_differences({1, 2, 2, 5, 4, false});
    expect_central_differences({1, 2, 2, 5, 4, true});
}

TEST(AttnBackwardReference, GroupedKeysAndValuesSumTheirQueryHeads)
{
    expect_central_differences({2, 4, 2, 4, 8, false});  // two query heads a K/V head
    expect_central_differences({1, 3, 1, 6, 4, true});   // three, causal
}

TEST(AttnBackwardReference, TheFirstCausalRowHasNoQueryGradient)
{
    // Row 0 sees key 0 alone: P = 1, O = v_0, dP = D, so dS = 0 and dQ = 0 exactly, whatever dO is.
    const Problem p{1, 1, 1, 4, 8, true};
    const float scale = attention::default_scale(p.head_dim);
    const Inputs in = random_problem_inputs(p, 7);
    const RowStatistics stats = row_statistics(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), 0, 0);
    const Gradient dq = reference_dq(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), stats, 0, 0, 0);
    for (int d = 0; d < p.head_dim; ++d) {
        EXPECT_NEAR(dq.value[d], 0.0, 1e-15);
        EXPECT_GT(dq.magnitude[d], 0.0);
    }
}

TEST(AttnBackwardReference, ANaNInOneRowOfDoReachesOnlyWhatThatRowReaches)
{
    // Causal, two query heads sharing a K/V head; a NaN in row 2, column 1 of head 0's dO: that row's dQ and the dK
    // of the keys it sees (0 to 2) of its K/V head are NaN (through dP = dO v and D), and those keys' dV in column 1
    // (dV = sum P dO, column by column); every other value is a number.
    const Problem p{1, 2, 1, 5, 4, true};
    const float scale = attention::default_scale(p.head_dim);
    Inputs in = random_problem_inputs(p, 11);
    const int nan_row = 2, nan_col = 1;
    in.d_o[static_cast<std::size_t>(nan_row) * p.head_dim + nan_col] = nan_value;
    const Gradients g = reference_gradients(p, scale, in);
    for (int h = 0; h < p.heads; ++h) {
        for (int i = 0; i < p.seq; ++i) {
            for (int d = 0; d < p.head_dim; ++d) {
                const double dq = g.dq[(static_cast<std::size_t>(h) * p.seq + i) * p.head_dim + d];
                EXPECT_EQ(std::isnan(dq), h == 0 && i == nan_row) << "dQ head " << h << " row " << i;
            }
        }
    }
    for (int j = 0; j < p.seq; ++j) {
        for (int d = 0; d < p.head_dim; ++d) {
            EXPECT_EQ(std::isnan(g.dk[static_cast<std::size_t>(j) * p.head_dim + d]), j <= nan_row) << "dK key " << j;
            EXPECT_EQ(std::isnan(g.dv[static_cast<std::size_t>(j) * p.head_dim + d]), j <= nan_row && d == nan_col)
                << "dV key " << j << " col " << d;
        }
    }
}

TEST(AttnBackwardReference, StatisticsFromTheForwardsOutputsAreTheRecomputedOnesRounded)
{
    // O rounded to bf16 and the log-sum-exp to fp32, as a forward step writes them: D within bf16's rounding of
    // sum |dO O|, the log-sum-exp within fp32's.
    const Problem p{2, 2, 1, 9, 8, true};
    const float scale = attention::default_scale(p.head_dim);
    const Inputs in = random_problem_inputs(p, 5);
    std::vector<float> o(attention::q_elements(p)), lse(attention::q_elements(p) / p.head_dim);
    std::vector<double> row(p.head_dim);
    for (std::size_t id = 0; id < lse.size(); ++id) {
        const int b = static_cast<int>(id / p.seq / p.heads), h = static_cast<int>(id / p.seq % p.heads);
        double row_lse = 0;
        attention::reference_row(p, scale, in.q.data(), in.k.data(), in.v.data(), b, h, static_cast<int>(id % p.seq),
                                 row.data(), &row_lse);
        std::copy(row.begin(), row.end(), o.begin() + static_cast<std::ptrdiff_t>(id * p.head_dim));
        lse[id] = static_cast<float>(row_lse);
    }
    o = round_to_bf16(o);
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            const RowStatistics exact =
                row_statistics(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), b, h);
            const RowStatistics given = row_statistics_from_forward(p, o.data(), lse.data(), in.d_o.data(), b, h);
            for (int i = 0; i < p.seq; ++i) {
                EXPECT_NEAR(given.d[i], exact.d[i], std::ldexp(1.0, -8) * exact.d_magnitude[i]) << b << " " << h << " " << i;
                EXPECT_NEAR(given.lse[i], exact.lse[i], std::ldexp(1.0, -23) * (1 + std::abs(exact.lse[i])));
            }
        }
    }
}

TEST(AttnBackwardReference, ComparisonCountsWhatIsOutOfToleranceOrNaN)
{
    const Tolerance t{0.01, 0.0};
    const Gradient expected{{1.0, 2.0, std::nan(""), 4.0}, {1.0, 1.0, 1.0, 1.0}};
    Comparison c;
    const float good[] = {1.005f, 2.0f, nan_value, 4.0f};
    compare_row(good, expected, 0, t, c);
    EXPECT_TRUE(c.passed()) << c.describe("dQ");
    const float bad[] = {1.02f, 2.0f, 3.0f, nan_value};
    compare_row(bad, expected, 1, t, c);
    EXPECT_FALSE(c.passed());
    EXPECT_EQ(c.out_of_tolerance, 1u);
    EXPECT_EQ(c.nan_mismatches, 2u);
    EXPECT_EQ(c.first_row, 1);
    EXPECT_EQ(c.first_col, 0);
    EXPECT_EQ(c.rows, 2u);
    EXPECT_EQ(c.values, 8u);
}

}  // namespace
}  // namespace stepwise::attention_backward
