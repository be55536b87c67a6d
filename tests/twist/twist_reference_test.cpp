// The y-twist chapter's CPU reference and comparison (no GPU needed).
#include "twist/twist_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepwise::twist {
namespace {

TEST(TwistReference, RotatesXAndZAboutTheYAxisByTheFloatAngle)
{
    const float y = 0.5f;
    const float angle = twist_angle(y, 2.f, 0.75f);
    EXPECT_EQ(angle, 0.75f);
    const std::vector<Twisted> r = reference_twist({{1.f, y, 0.f, 7.f}, {0.f, y, 1.f, 8.f}}, 2.f, 0.75f);
    EXPECT_DOUBLE_EQ(r[0].x, std::cos(0.75));
    EXPECT_DOUBLE_EQ(r[0].z, std::sin(0.75));
    EXPECT_DOUBLE_EQ(r[1].x, -std::sin(0.75));
    EXPECT_DOUBLE_EQ(r[1].z, std::cos(0.75));
    EXPECT_EQ(r[0].y, 0.5);
    EXPECT_EQ(r[0].w, 7.0);
}

TEST(TwistReference, AZeroAngleLeavesTheVertexAloneEvenWithInfinities)
{
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<Twisted> r = reference_twist({{inf, 0.f, inf, 1.f}, {inf, -0.f, -inf, 1.f}}, 2.f, 0.75f);
    EXPECT_EQ(r[0].x, inf);
    EXPECT_EQ(r[0].z, inf);  // a rotation by 0 would give inf * 1 - inf * 0 = NaN
    EXPECT_EQ(r[1].z, -inf);
}

TEST(TwistReference, UlpOfTheRadius)
{
    EXPECT_EQ(ulp_of(1.0), std::ldexp(1.0, -23));
    EXPECT_EQ(ulp_of(1.5), std::ldexp(1.0, -23));
    EXPECT_EQ(ulp_of(2.0), std::ldexp(1.0, -22));
    EXPECT_EQ(ulp_of(0.0), std::ldexp(1.0, -149));
}

TEST(TwistReference, ComparisonInUlpsOfTheRadiusAndSpecialValues)
{
    const std::vector<float4> input = {{3.f, 0.5f, 4.f, 1.f}};  // r = 5: one ulp of r is 2^-21
    const std::vector<Twisted> ref = reference_twist(input, 2.f, 0.75f);
    std::vector<float4> out = {{static_cast<float>(ref[0].x), 0.5f, static_cast<float>(ref[0].z), 1.f}};
    EXPECT_TRUE(compare(input, out, ref, 1.0).within_tolerance());
    out[0].x = static_cast<float>(ref[0].x + 3 * std::ldexp(1.0, -21));
    const Comparison off = compare(input, out, ref, 2.0);
    EXPECT_FALSE(off.within_tolerance());
    EXPECT_NEAR(off.max_ulp, 3.0, 0.6);
    EXPECT_TRUE(compare(input, out, ref, 4.0).within_tolerance());

    out[0] = {static_cast<float>(ref[0].x), 0.25f, static_cast<float>(ref[0].z), 1.f};  // y changed
    EXPECT_EQ(compare(input, out, ref, 1.0).special_mismatches, 1u);

    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float4> nan_in = {{nan, 0.5f, 1.f, 1.f}};
    const std::vector<Twisted> nan_ref = reference_twist(nan_in, 2.f, 0.75f);
    EXPECT_TRUE(compare(nan_in, {{nan, 0.5f, nan, 1.f}}, nan_ref, 1.0).within_tolerance());
    EXPECT_FALSE(compare(nan_in, {{1.f, 0.5f, nan, 1.f}}, nan_ref, 1.0).within_tolerance());
    EXPECT_NE(compare(nan_in, {{1.f, 0.5f, nan, 1.f}}, nan_ref, 1.0).describe().find("special"), std::string::npos);
}

TEST(TwistReference, AnOverflowingRotationMustBeInfinite)
{
    const float big = std::numeric_limits<float>::max();
    const std::vector<float4> input = {{big, 0.25f, big, 1.f}};  // z' = big (sin + cos) > FLT_MAX
    const std::vector<Twisted> ref = reference_twist(input, 2.f, 0.75f);
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_TRUE(compare(input, {{static_cast<float>(ref[0].x), 0.25f, inf, 1.f}}, ref, 1.0).within_tolerance());
    EXPECT_FALSE(compare(input, {{static_cast<float>(ref[0].x), 0.25f, big, 1.f}}, ref, 1.0).within_tolerance());
}

TEST(TwistReference, MeasuredAnglesStayWithinPi)
{
    for (const float4& p : random_points(10000, measured_extent, 3)) {
        ASSERT_LE(std::fabs(twist_angle(p.y, measured_magnitude, measured_env)), 3.0f);
        ASSERT_EQ(p.w, 1.f);
    }
}

}  // namespace
}  // namespace stepwise::twist
