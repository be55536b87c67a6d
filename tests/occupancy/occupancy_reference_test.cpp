// The occupancy chapter's inputs and reference (no GPU needed).
#include "occupancy/occupancy_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace stepwise::occupancy {
namespace {

TEST(OccupancyReference, RandomMatrixIsReproducibleAndWithinMinusOneAndOne)
{
    const std::vector<float> a = random_matrix(100000, 7);
    EXPECT_EQ(a, random_matrix(100000, 7));
    EXPECT_NE(a, random_matrix(100000, 8));
    double sum = 0.0;
    for (const float x : a) {
        ASSERT_GE(x, -1.0f);
        ASSERT_LT(x, 1.0f);
        sum += x;
    }
    EXPECT_LT(std::fabs(sum / a.size()), 0.01) << "roughly centred on zero";
}

TEST(OccupancyReference, TheCorrectlyRoundedSumPasses)
{
    const std::vector<float> a = random_matrix(1000, 1), b = random_matrix(1000, 2);
    std::vector<float> c(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        c[i] = a[i] + b[i];
    }
    EXPECT_TRUE(compare_sum(a, b, c).exact());
}

TEST(OccupancyReference, OneFlippedBitFails)
{
    const std::vector<float> a = random_matrix(1000, 1), b = random_matrix(1000, 2);
    std::vector<float> c(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        c[i] = a[i] + b[i];
    }
    std::uint32_t bits;
    std::memcpy(&bits, &c[417], sizeof bits);
    bits ^= 1u;
    std::memcpy(&c[417], &bits, sizeof bits);
    const Comparison r = compare_sum(a, b, c);
    EXPECT_EQ(r.mismatches, 1u);
    EXPECT_EQ(r.first_mismatch, 417u);
    EXPECT_NE(r.describe().find("element 417"), std::string::npos) << r.describe();
}

TEST(OccupancyReference, NaNPassesOnlyWhereTheSumIsNaN)
{
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_TRUE(compare_sum({nan, inf}, {1.0f, -inf}, {nan, nan}).exact());
    EXPECT_FALSE(compare_sum({1.0f}, {1.0f}, {nan}).exact());
    EXPECT_FALSE(compare_sum({inf}, {1.0f}, {nan}).exact());
    EXPECT_THROW(compare_sum({1.0f}, {1.0f, 2.0f}, {1.0f}), std::invalid_argument);
}

}  // namespace
}  // namespace stepwise::occupancy
