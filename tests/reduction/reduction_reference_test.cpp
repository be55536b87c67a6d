// The reduction chapter's CPU references and float tolerance (no GPU needed).
#include "reduction/reduction_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace stepwise::reduction {
namespace {

TEST(ReductionReference, ExactSumUses64Bits)
{
    EXPECT_EQ(exact_sum({}), 0);
    EXPECT_EQ(exact_sum({1, -2, 3}), 2);
    EXPECT_EQ(exact_sum({2147483647, 2147483647}), 4294967294LL);
}

TEST(ReductionReference, RandomIntsStayInRangeAndFollowTheSeed)
{
    const std::vector<int> v = random_ints(10000, -4, 4, 3);
    for (const int x : v) {
        ASSERT_GE(x, -4);
        ASSERT_LE(x, 4);
    }
    EXPECT_EQ(v, random_ints(10000, -4, 4, 3));
    EXPECT_NE(v, random_ints(10000, -4, 4, 4));
}

TEST(ReductionReference, FloatToleranceIsGammaNMinusOneTimesTheMagnitude)
{
    const std::vector<float> v = {1.f, -2.f, 3.f, -4.f};
    const double ku = 3 * std::ldexp(1.0, -24);
    EXPECT_DOUBLE_EQ(float_sum_tolerance(v), ku / (1 - ku) * 10.0);
    EXPECT_DOUBLE_EQ(float_sum_tolerance({5.f}), 0.0);
    EXPECT_THROW(float_sum_tolerance(std::vector<float>((1u << 24) + 2, 1.f)), std::domain_error);
}

TEST(ReductionReference, ToleranceCoversASequentialFloatSum)
{
    const std::vector<float> v = random_floats(1 << 16, -1.f, 1.f, 11);
    float sequential = 0;
    for (const float x : v) {
        sequential += x;
    }
    EXPECT_LE(std::fabs(sequential - reference_sum(v)), float_sum_tolerance(v));
}

}  // namespace
}  // namespace stepwise::reduction
