// CPU tests of the normalization chapter's reference and comparison.
#include "normalization/normalization_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace stepwise::normalization {
namespace {

TEST(NormalizationReference, LayerNormOfAKnownRow)
{
    // x = 1, 2, 3, 4: mean 2.5, variance 1.25.
    const std::vector<float> x = {1, 2, 3, 4}, gamma = {1, 2, 1, 1}, beta = {0, 0, 1, 0};
    std::vector<double> y(4);
    const RowStats s = layer_norm_row(x.data(), gamma.data(), beta.data(), 4, 0.0, y.data());
    EXPECT_DOUBLE_EQ(s.mean, 2.5);
    EXPECT_DOUBLE_EQ(s.rstd, 1.0 / std::sqrt(1.25));
    EXPECT_DOUBLE_EQ(y[0], -1.5 / std::sqrt(1.25));
    EXPECT_DOUBLE_EQ(y[1], 2 * -0.5 / std::sqrt(1.25));
    EXPECT_DOUBLE_EQ(y[2], 0.5 / std::sqrt(1.25) + 1);
    // Epsilon is added to the variance; equal values give beta.
    EXPECT_DOUBLE_EQ(layer_norm_row(x.data(), gamma.data(), beta.data(), 4, 0.75, y.data()).rstd, std::sqrt(0.5));
    const std::vector<float> equal(4, 7.0f);
    layer_norm_row(equal.data(), gamma.data(), beta.data(), 4, 1e-5, y.data());
    EXPECT_EQ(y, (std::vector<double>{0, 0, 1, 0}));
    // With epsilon 0 too: rstd is infinite, and each x - mean is exactly 0.
    const RowStats flat = layer_norm_row(equal.data(), gamma.data(), beta.data(), 4, 0.0, y.data());
    EXPECT_EQ(flat.mean, 7.0);
    EXPECT_TRUE(std::isinf(flat.rstd));
    EXPECT_EQ(y, (std::vector<double>{0, 0, 1, 0}));
}

TEST(NormalizationReference, RmsNormOfAKnownRowAndHugeValues)
{
    const std::vector<float> x = {3, -4}, gamma = {1, 0.5f};
    std::vector<double> y(2);
    const RowStats s = rms_norm_row(x.data(), gamma.data(), 2, 0.0, y.data());
    EXPECT_DOUBLE_EQ(s.rstd, 1.0 / std::sqrt(12.5));
    EXPECT_DOUBLE_EQ(y[1], -4 * 0.5 / std::sqrt(12.5));
    // A NaN makes the whole row NaN, a value of 0 included (0 times a NaN rstd), with epsilon 0 too.
    const std::vector<float> with_nan = {0.0f, std::numeric_limits<float>::quiet_NaN()};
    rms_norm_row(with_nan.data(), gamma.data(), 2, 0.0, y.data());
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
    const std::vector<float> huge = {3e30f, -4e30f};  // squares beyond fp32, not beyond double
    rms_norm_row(huge.data(), gamma.data(), 2, 1e-5, y.data());
    EXPECT_NEAR(y[0], 3 / std::sqrt(12.5), 1e-6);
}

TEST(NormalizationReference, ANaNMakesItsRowNaN)
{
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> x = {1, nan, 3}, ones(3, 1.0f), zeros(3, 0.0f);
    std::vector<double> y(3);
    const RowStats s = layer_norm_row(x.data(), ones.data(), zeros.data(), 3, 1e-5, y.data());
    EXPECT_TRUE(std::isnan(s.mean) && std::isnan(s.rstd));
    for (const double v : y) {
        EXPECT_TRUE(std::isnan(v));
    }
    rms_norm_row(x.data(), ones.data(), 3, 1e-5, y.data());
    for (const double v : y) {
        EXPECT_TRUE(std::isnan(v));
    }
}

TEST(NormalizationReference, ComparisonFindsWrongValuesStatisticsAndNaN)
{
    const std::vector<float> x = random_values(1000, 3, -3.0f, 5.0f), gamma(1000, 1.0f), beta(1000, 0.25f);
    std::vector<double> expected(1000);
    const RowStats e = layer_norm_row(x.data(), gamma.data(), beta.data(), 1000, 1e-5, expected.data());
    const double t = tolerance(1000, false);
    std::vector<float> got(expected.begin(), expected.end());
    const RowStats right{e.mean, e.rstd};
    Comparison ok;
    compare_row(x.data(), gamma.data(), beta.data(), got.data(), &right, expected.data(), e, 1000, 1e-5, 0, t, ok);
    EXPECT_TRUE(ok.passed()) << ok.describe(t);
    EXPECT_LT(ok.max_relative, 1e-7);  // fp32 rounding of the reference only

    std::vector<float> off = got;
    off[10] += 0.01f;
    Comparison wrong_value;
    compare_row(x.data(), gamma.data(), beta.data(), off.data(), &right, expected.data(), e, 1000, 1e-5, 7, t,
                wrong_value);
    EXPECT_FALSE(wrong_value.passed());
    EXPECT_EQ(wrong_value.out_of_tolerance, 1u);
    EXPECT_EQ(wrong_value.first_row, 7);
    EXPECT_EQ(wrong_value.first_col, 10);

    off = got;
    off[3] = std::numeric_limits<float>::quiet_NaN();
    Comparison nan;
    compare_row(x.data(), gamma.data(), beta.data(), off.data(), &right, expected.data(), e, 1000, 1e-5, 0, t, nan);
    EXPECT_EQ(nan.nan_mismatches, 1u);

    const RowStats wrong_rstd{e.mean, e.rstd * 1.01};
    Comparison stats;
    compare_row(x.data(), gamma.data(), beta.data(), got.data(), &wrong_rstd, expected.data(), e, 1000, 1e-5, 0, t,
                stats);
    EXPECT_EQ(stats.wrong_statistics, 1u);
    EXPECT_FALSE(stats.passed());
    EXPECT_NE(stats.describe(t).find("mean or rstd"), std::string::npos);
}

TEST(NormalizationReference, ToleranceGrowsWithTheRowAndForBf16)
{
    EXPECT_LT(tolerance(128, false), tolerance(131072, false));
    EXPECT_NEAR(tolerance(128, true) - tolerance(128, false), 1.0 / 256, 1e-12);
}

}  // namespace
}  // namespace stepwise::normalization
