// CPU tests of the softmax chapter's reference, bf16 rounding and comparison.
#include "softmax/softmax_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace stepwise::softmax {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

std::vector<double> softmax_of(const std::vector<float>& row)
{
    std::vector<double> y(row.size());
    reference_row(row.data(), static_cast<int>(row.size()), y.data());
    return y;
}

TEST(SoftmaxReference, SmallRowsByHand)
{
    const std::vector<double> y = softmax_of({0.0f, std::log(3.0f)});
    EXPECT_NEAR(y[0], 0.25, 1e-7);
    EXPECT_NEAR(y[1], 0.75, 1e-7);
    EXPECT_EQ(softmax_of({42.0f}), std::vector<double>{1.0});
    const std::vector<double> equal = softmax_of({5.0f, 5.0f, 5.0f, 5.0f});
    for (const double v : equal) {
        EXPECT_DOUBLE_EQ(v, 0.25);
    }
}

TEST(SoftmaxReference, ShiftInvariantAndSumsToOne)
{
    const std::vector<float> row = random_logits(1000, 7);
    std::vector<float> shifted = row;
    for (float& x : shifted) {
        x += 1000.0f;  // exp(x) alone would overflow
    }
    const std::vector<double> y = softmax_of(row);
    const std::vector<double> z = softmax_of(shifted);
    EXPECT_NEAR(std::accumulate(y.begin(), y.end(), 0.0), 1.0, 1e-12);
    for (std::size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(z[i]));
        EXPECT_NEAR(z[i], y[i], 1e-4 * y[i]);  // the shift rounds each logit of about 1000 to 2^-14
    }
}

TEST(SoftmaxReference, InfinitiesAndNaN)
{
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(softmax_of({-inf, 0.0f, -inf}), (std::vector<double>{0.0, 1.0, 0.0}));
    for (const std::vector<float>& row : {std::vector<float>{-inf, -inf}, {1.0f, inf}, {nan, 1.0f}, {inf, inf}}) {
        for (const double v : softmax_of(row)) {
            EXPECT_TRUE(std::isnan(v));
        }
    }
    const std::vector<double> huge = softmax_of({1e30f, 0.0f, -1e30f});
    EXPECT_EQ(huge, (std::vector<double>{1.0, 0.0, 0.0}));
}

TEST(SoftmaxReference, ComparisonFindsWrongValuesNaNAndRowSums)
{
    const std::vector<float> row = random_logits(100, 11);
    const std::vector<double> expected = softmax_of(row);
    const Tolerance t = tolerance(100, false);
    std::vector<float> got(expected.begin(), expected.end());
    Comparison exact;
    compare_row(got.data(), expected.data(), 100, 0, t, exact);
    EXPECT_TRUE(exact.passed(t)) << exact.describe(t);

    got[17] *= 1.001f;
    Comparison off;
    compare_row(got.data(), expected.data(), 100, 5, t, off);
    EXPECT_FALSE(off.passed(t));
    EXPECT_EQ(off.first_row, 5);
    EXPECT_EQ(off.first_col, 17);

    got[17] = std::numeric_limits<float>::quiet_NaN();
    Comparison nan;
    compare_row(got.data(), expected.data(), 100, 0, t, nan);
    EXPECT_EQ(nan.nan_mismatches, 1u);
    EXPECT_FALSE(nan.passed(t));

    std::vector<double> nan_row(100, std::numeric_limits<double>::quiet_NaN());
    Comparison not_nan;
    compare_row(got.data(), nan_row.data(), 100, 0, t, not_nan);  // 99 finite values where NaN is expected
    EXPECT_EQ(not_nan.nan_mismatches, 99u);
}

TEST(SoftmaxReference, ToleranceGrowsWithTheRowAndForBf16)
{
    EXPECT_LT(tolerance(128, false).relative, tolerance(131072, false).relative);
    EXPECT_GT(tolerance(128, true).relative, std::ldexp(1.0, -8));
    EXPECT_LT(tolerance(131072, false).relative, 0.01);
}

}  // namespace
}  // namespace stepwise::softmax
