// The warp-divergence chapter's CPU reference and comparison (no GPU needed).
#include "divergence/divergence_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepwise::divergence {
namespace {

double sine_sum(float x)
{
    double sum = 0.0;
    for (int k = 0; k < work_iterations; ++k) {
        sum += std::sin(static_cast<double>(std::fma(static_cast<float>(k), angle_step, x)));
    }
    return sum;
}

double cosine_sum(float x)
{
    double sum = 0.0;
    for (int k = 0; k < work_iterations; ++k) {
        sum += std::cos(static_cast<double>(std::fma(static_cast<float>(k), angle_step, x)));
    }
    return sum;
}

TEST(DivergenceReference, ByIndexAlternatesSineAndCosineSums)
{
    const std::vector<float> input = {0.5f, 0.5f, -1.25f, 2.0f};
    const std::vector<double> r = reference_sums(input, BranchRule::by_index);
    EXPECT_DOUBLE_EQ(r[0], sine_sum(0.5f));
    EXPECT_DOUBLE_EQ(r[1], cosine_sum(0.5f));
    EXPECT_DOUBLE_EQ(r[2], sine_sum(-1.25f));
    EXPECT_DOUBLE_EQ(r[3], cosine_sum(2.0f));
    EXPECT_GT(std::fabs(r[0] - r[1]), 1.0) << "the two branches must give clearly different sums";
}

TEST(DivergenceReference, ByWarpSwitchesEvery32Items)
{
    const std::vector<float> input(96, 0.75f);
    const std::vector<double> r = reference_sums(input, BranchRule::by_warp);
    EXPECT_DOUBLE_EQ(r[0], sine_sum(0.75f));
    EXPECT_DOUBLE_EQ(r[31], sine_sum(0.75f));
    EXPECT_DOUBLE_EQ(r[32], cosine_sum(0.75f));
    EXPECT_DOUBLE_EQ(r[63], cosine_sum(0.75f));
    EXPECT_DOUBLE_EQ(r[64], sine_sum(0.75f));
}

TEST(DivergenceReference, NonFiniteAnglesGiveNaN)
{
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<double> r =
        reference_sums({std::numeric_limits<float>::quiet_NaN(), inf, -inf}, BranchRule::by_index);
    for (const double v : r) {
        EXPECT_TRUE(std::isnan(v));
    }
}

TEST(DivergenceReference, RandomAnglesAreWithinMinus3And3AndReproducible)
{
    const std::vector<float> a = random_angles(10000, 42);
    EXPECT_EQ(a, random_angles(10000, 42));
    EXPECT_NE(a, random_angles(10000, 43));
    for (const float x : a) {
        EXPECT_GE(x, -3.0f);
        EXPECT_LT(x, 3.0f);
    }
}

TEST(DivergenceCompare, WithinToleranceOrNot)
{
    const std::vector<double> reference = {1.0, -2.0, 3.0};
    EXPECT_TRUE(compare({1.0f, -2.0f, 3.0f}, reference, sum_tolerance).within_tolerance());
    EXPECT_TRUE(compare({1.003f, -2.0f, 3.0f}, reference, sum_tolerance).within_tolerance());
    const Comparison c = compare({1.0f, -2.01f, 3.0f}, reference, sum_tolerance);
    EXPECT_FALSE(c.within_tolerance());
    EXPECT_EQ(c.worst_index, 1u);
    EXPECT_EQ(c.over_tolerance, 1u);
    EXPECT_NE(c.describe().find("item 1"), std::string::npos) << c.describe();
}

TEST(DivergenceCompare, NaNNeverPassesUnlessTheReferenceIsNaN)
{
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(compare({nan}, {1.0}, sum_tolerance).within_tolerance());
    EXPECT_FALSE(compare({1.0f}, {std::nan("")}, sum_tolerance).within_tolerance());
    EXPECT_TRUE(compare({nan}, {std::nan("")}, sum_tolerance).within_tolerance());
    EXPECT_FALSE(compare({std::numeric_limits<float>::infinity()}, {1.0}, sum_tolerance).within_tolerance());
    EXPECT_THROW(compare({1.0f}, {1.0, 2.0}, sum_tolerance), std::invalid_argument);
}

}  // namespace
}  // namespace stepwise::divergence
