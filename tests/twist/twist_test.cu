// GPU tests of the y-twist chapter: every step against the double-precision CPU reference, in ulps of the radius.
#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "twist/twist_reference.hpp"
#include "twist/twist_steps.hpp"

#include "../../snippets/twist/06_exact_sincosf.cuh"

#include <gtest/gtest.h>

#include <vector>

namespace stepwise::twist {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

//! Counts that are multiples of no block size, the block size itself, and the source's 990,000; a one-thread step
//! only the smaller ones (990,000 vertices take it 0.15 s, much longer under compute-sanitizer).
std::vector<int> sizes_for(const Step& step)
{
    std::vector<int> sizes = {1, 31, 511, 512, 513, 1000, 100003};
    if (!step.one_thread) {
        sizes.push_back(990000);
    }
    return sizes;
}

class TwistStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! The step's twist of `input` (in place on the device; the vertex after the last is a guard that must not
    //! change).
    std::vector<float4> run(const std::vector<float4>& input, float magnitude, float env)
    {
        std::vector<float4> with_guard = input;
        with_guard.push_back({1.f, 1.f, 1.f, 1.f});
        DeviceBuffer<float4> d_points(with_guard.size());
        d_points.upload(with_guard);
        EXPECT_EQ(GetParam().twist(d_points.data(), static_cast<int>(input.size()), magnitude, env, 0), cudaSuccess);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float4> out = d_points.download();
        const float4 guard = out.back();
        EXPECT_TRUE(guard.x == 1.f && guard.y == 1.f && guard.z == 1.f && guard.w == 1.f) << "wrote past the end";
        out.pop_back();
        return out;
    }

    void expect_within_tolerance(const std::vector<float4>& input, float magnitude, float env, double tolerance)
    {
        const std::vector<float4> out = run(input, magnitude, env);
        const Comparison c = compare(input, out, reference_twist(input, magnitude, env), tolerance);
        EXPECT_TRUE(c.within_tolerance()) << input.size() << " vertices: " << c.describe();
    }
};

TEST_P(TwistStepTest, WithinToleranceAtEverySizeForAnglesWithinPi)
{
    // The chapter's twist: vertices in [-2, 2]^3, 1.5 radians per unit of y, so every angle is within [-3, 3].
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const int n : sizes_for(GetParam())) {
        expect_within_tolerance(random_points(n, measured_extent, seed + n), measured_magnitude, measured_env,
                                GetParam().tolerance_ulp);
    }
}

TEST_P(TwistStepTest, SpecialValuesAsTheReference)
{
    // Angle exactly zero (the vertex untouched, even with infinite x and z), NaN and infinite coordinates, values
    // whose rotation overflows, subnormals.
    expect_within_tolerance(special_points(), measured_magnitude, measured_env, GetParam().tolerance_ulp);
}

TEST_P(TwistStepTest, OnlyTheExactStepsHoldForLargeAngles)
{
    // Angles up to 750 radians. The same operation within tolerance for the exact steps; for the approximate ones,
    // far outside it: that is why they are marked as a different function.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<float4> input = random_points(4096, measured_extent, seed);
    const std::vector<float4> out = run(input, 500.f, measured_env);
    const Comparison c = compare(input, out, reference_twist(input, 500.f, measured_env), exact_tolerance_ulp);
    if (GetParam().same_operation) {
        EXPECT_TRUE(c.within_tolerance()) << c.describe();
    } else {
        EXPECT_GT(c.max_ulp, 100 * exact_tolerance_ulp) << c.describe();
    }
}

TEST_P(TwistStepTest, RejectsBadArguments)
{
    const Step& step = GetParam();
    DeviceBuffer<float4> d_points(16);
    EXPECT_EQ(step.twist(nullptr, 16, 1.f, 1.f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.twist(d_points.data(), 0, 1.f, 1.f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.twist(d_points.data(), -5, 1.f, 1.f, 0), cudaErrorInvalidValue);
    float4* misaligned = reinterpret_cast<float4*>(reinterpret_cast<float*>(d_points.data()) + 1);
    EXPECT_EQ(step.twist(misaligned, 8, 1.f, 1.f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Twist, TwistStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- how to call a step from your own code ----

TEST(TwistUsage, TwistAMeshWithTheExactStep)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float4> h_mesh = random_points(100000, 2.f, fresh_seed());
    // example-begin twist-usage
    std::vector<float4> h_points = h_mesh;  // x, y, z, w; w is carried along unchanged
    const int num_points = static_cast<int>(h_points.size());
    const float magnitude = 2.0f;  // radians of twist per unit of height...
    const float env = 0.75f;       // ...scaled by an envelope, e.g. to animate it

    float4* d_points = nullptr;  // cudaMalloc's memory is aligned for float4
    ASSERT_EQ(cudaMalloc(&d_points, num_points * sizeof(float4)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_points, h_points.data(), num_points * sizeof(float4), cudaMemcpyHostToDevice), cudaSuccess);

    ASSERT_EQ(stepwise::twist::exact_sincosf::twist(d_points, num_points, magnitude, env), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_points.data(), d_points, num_points * sizeof(float4), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaFree(d_points), cudaSuccess);
    // example-end twist-usage
    const Comparison c = compare(h_mesh, h_points, reference_twist(h_mesh, magnitude, env), exact_tolerance_ulp);
    EXPECT_TRUE(c.within_tolerance()) << c.describe();
}

}  // namespace
}  // namespace stepwise::twist
