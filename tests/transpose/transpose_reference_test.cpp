// The transpose chapter's CPU reference and bitwise comparison (no GPU needed).
#include "transpose/transpose_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace stepwise::transpose {
namespace {

TEST(TransposeReference, RowsBecomeColumns)
{
    const std::vector<float> in = {1, 2, 3, 4, 5, 6};  // 2 x 3
    EXPECT_EQ(reference_transpose(in, 2, 3), (std::vector<float>{1, 4, 2, 5, 3, 6}));  // 3 x 2
    EXPECT_EQ(reference_transpose(reference_transpose(in, 2, 3), 3, 2), in);
    EXPECT_EQ(reference_transpose({7, 8, 9}, 1, 3), (std::vector<float>{7, 8, 9}));
    EXPECT_THROW(reference_transpose(in, 4, 2), std::invalid_argument);
}

TEST(TransposeReference, BlocksOfSixtyFourAndTheirEdgesGoWhereTheyBelong)
{
    // Larger than its 64 x 64 blocks and a multiple of none: every element checked against its index.
    constexpr int rows = 130, cols = 67;
    std::vector<float> in(static_cast<std::size_t>(rows) * cols);
    for (std::size_t i = 0; i < in.size(); ++i) {
        in[i] = static_cast<float>(i);
    }
    const std::vector<float> out = reference_transpose(in, rows, cols);
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            ASSERT_EQ(out[static_cast<std::size_t>(c) * rows + r], static_cast<float>(r * cols + c)) << r << ", " << c;
        }
    }
}

TEST(TransposeReference, BitComparisonTellsNaNsAndZerosApart)
{
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(compare_bits({nan, 0.f, 1.f}, {nan, 0.f, 1.f}).identical());  // the same NaN bits match
    const BitComparison signed_zero = compare_bits({1.f, -0.f}, {1.f, 0.f});
    EXPECT_EQ(signed_zero.mismatches, 1u);
    EXPECT_EQ(signed_zero.first_index, 1u);
    EXPECT_EQ(signed_zero.first_got, 0x80000000u);
    float other_nan = nan;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &other_nan, sizeof bits);
    bits ^= 1u;  // another payload
    std::memcpy(&other_nan, &bits, sizeof bits);
    EXPECT_EQ(compare_bits({other_nan}, {nan}).mismatches, 1u);
    EXPECT_EQ(compare_bits({1, 2, 3, 4}, {1, 2, 3, 5}).describe(2),
              "1 elements differ; the first at output (1, 1): bits 40800000, expected 40a00000");
}

TEST(TransposeReference, InputsFollowTheSeedAndCoverSpecialValues)
{
    EXPECT_EQ(random_matrix(10, 20, 5), random_matrix(10, 20, 5));
    for (const float v : random_matrix(50, 50, 6)) {
        ASSERT_GE(v, -1.f);
        ASSERT_LT(v, 1.f);
    }
    const std::vector<float> bits = random_bit_patterns(100000, 7);
    const auto count = [&](auto predicate) { return std::count_if(bits.begin(), bits.end(), predicate); };
    EXPECT_GT(count([](float v) { return std::isnan(v); }), 0);
    EXPECT_GT(count([](float v) { return std::fpclassify(v) == FP_SUBNORMAL; }), 0);
}

}  // namespace
}  // namespace stepwise::transpose
