// The element-wise chapter's CPU reference and comparison (no GPU needed).
#include "elementwise/elementwise_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepwise::elementwise {
namespace {

TEST(ElementwiseReference, OddColumnsTakeTheLogAndEvenColumnsTheCosine)
{
    const std::vector<double> r = reference_update({10.f, 10.f, 200.f, 200.f}, 4, 1);
    EXPECT_DOUBLE_EQ(r[0], 10.0 + std::sqrt(std::cos(10.0) + 1.0));
    EXPECT_DOUBLE_EQ(r[1], 10.0 + std::sqrt(std::log(10.0) + 1.0));
    EXPECT_DOUBLE_EQ(r[2], 200.0 + std::sqrt(std::cos(200.0) + 1.0));
    EXPECT_DOUBLE_EQ(r[3], 200.0 + std::sqrt(std::log(200.0) + 1.0));
}

TEST(ElementwiseReference, ColumnParityRestartsOnEveryRow)
{
    const std::vector<double> r = reference_update({10.f, 10.f, 10.f, 10.f, 10.f, 10.f}, 3, 2);
    EXPECT_DOUBLE_EQ(r[3], r[0]);  // row 1, column 0: even
    EXPECT_DOUBLE_EQ(r[4], r[1]);  // row 1, column 1: odd
}

TEST(ElementwiseReference, TwoApplicationsComposeOne)
{
    const std::vector<float> input = {12.f, 34.f};
    const std::vector<double> once = reference_update(input, 2, 1);
    const std::vector<double> twice = reference_update(input, 2, 1, 2);
    EXPECT_DOUBLE_EQ(twice[0], once[0] + std::sqrt(std::cos(once[0]) + 1.0));
    EXPECT_DOUBLE_EQ(twice[1], once[1] + std::sqrt(std::log(once[1]) + 1.0));
}

TEST(ElementwiseReference, AssignmentInputIsIntegersFrom10To265AndFollowsTheSeed)
{
    const std::vector<float> a = assignment_input(512, 512, 7);
    float low = 1e9f, high = -1e9f;
    for (const float v : a) {
        ASSERT_EQ(v, std::floor(v));
        low = std::min(low, v);
        high = std::max(high, v);
    }
    EXPECT_EQ(low, 10.f);
    EXPECT_EQ(high, 265.f);
    EXPECT_EQ(a, assignment_input(512, 512, 7));
    EXPECT_NE(a, assignment_input(512, 512, 8));
}

TEST(ElementwiseReference, RejectsMismatchedSizes)
{
    EXPECT_THROW(reference_update({1.f, 2.f}, 3, 1), std::invalid_argument);
    EXPECT_THROW(assignment_input(0, 4, 1), std::invalid_argument);
}

TEST(ElementwiseCompare, CorrectlyRoundedResultsPass)
{
    const std::vector<float> input = {10.f, 10.f, 123.f, 123.f};
    const std::vector<double> reference = reference_update(input, 4, 1);
    std::vector<float> output(reference.begin(), reference.end());
    const Comparison c = compare(input, output, reference, 4, 1.0, accurate_inner_error_exponent);
    EXPECT_TRUE(c.within_tolerance()) << c.describe(4);
    EXPECT_LE(c.max_ulp, 0.5);
}

TEST(ElementwiseCompare, ThreeUlpOffFailsWhereTheFunctionIsWellConditioned)
{
    const std::vector<float> input = {100.f, 100.f};  // cos(100) + 1 = 1.86: far from the square root's pole
    const std::vector<double> reference = reference_update(input, 2, 1);
    std::vector<float> output(reference.begin(), reference.end());
    output[1] = std::nextafter(std::nextafter(std::nextafter(output[1], 1e9f), 1e9f), 1e9f);
    const Comparison c = compare(input, output, reference, 2, 1.0, accurate_inner_error_exponent);
    EXPECT_FALSE(c.within_tolerance());
    EXPECT_EQ(c.worst_index, 1u);
    EXPECT_GT(c.max_ulp, 2.4);
}

TEST(ElementwiseCompare, NaNNeverPasses)
{
    const std::vector<float> input = {10.f, 10.f};
    const std::vector<double> reference = reference_update(input, 2, 1);
    std::vector<float> output(reference.begin(), reference.end());
    output[0] = std::numeric_limits<float>::quiet_NaN();
    const Comparison c = compare(input, output, reference, 2, 1e9, accurate_inner_error_exponent);
    EXPECT_FALSE(c.within_tolerance());
    EXPECT_EQ(c.not_finite, 1u);
    EXPECT_TRUE(std::isinf(max_relative_error(output, reference)));
}

TEST(ElementwiseCompare, ToleranceWidensOnlyNearTheSquareRootsPole)
{
    // 22 is 0.0089 from 7 pi: cos(22) + 1 = 4.4e-5, where a float error in the cosine is magnified.
    EXPECT_GT(propagated_error_bound(22.f, false, accurate_inner_error_exponent), 100 * propagated_error_bound(100.f, false, accurate_inner_error_exponent));
    EXPECT_LT(propagated_error_bound(100.f, false, accurate_inner_error_exponent), 1e-7);
    EXPECT_LT(propagated_error_bound(100.f, true, accurate_inner_error_exponent), 1e-6);  // log(100) = 4.6: a larger x
    EXPECT_GT(propagated_error_bound(100.f, false, approximate_inner_error_exponent),
              3 * propagated_error_bound(100.f, false, accurate_inner_error_exponent));
    EXPECT_LE(propagated_error_bound(3.14159265f * 7, false, accurate_inner_error_exponent),
              std::sqrt(std::ldexp(1.0, -22)));
}

}  // namespace
}  // namespace stepwise::elementwise
