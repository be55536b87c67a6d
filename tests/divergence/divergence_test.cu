// GPU tests of the warp-divergence chapter: every step against the double-precision CPU reference.
#include "core/device_buffer.hpp"
#include "divergence/divergence_reference.hpp"
#include "divergence/divergence_steps.hpp"
#include "support/gpu_test_support.hpp"

#include "../../snippets/divergence/03_warp_aligned_branch.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace stepwise::divergence {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

class DivergenceStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! The step's sums of `input`, written into a poisoned buffer with one guard element past the end.
    std::vector<float> run(const std::vector<float>& input)
    {
        DeviceBuffer<float> d_in(input.size());
        d_in.upload(input);
        DeviceBuffer<float> d_out(input.size() + 1);
        return stepwise::testing::run_poisoned(d_out, [&] {
            return GetParam().branch(d_in.data(), d_out.data(), static_cast<int>(input.size()), 0);
        });
    }
};

TEST_P(DivergenceStepTest, MatchesTheReferenceAtSizesThatAreNotMultiplesOfTheBlock)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const int n : {1, 31, 33, 255, 256, 257, 1000, 100003}) {
        const std::vector<float> input = random_angles(n, seed + n);
        const Comparison c = compare(run(input), reference_sums(input, GetParam().rule), sum_tolerance);
        EXPECT_TRUE(c.within_tolerance()) << n << " items: " << c.describe();
    }
}

TEST_P(DivergenceStepTest, NonFiniteAnglesGiveNaNAsTheReferenceDoes)
{
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> input = random_angles(64, fresh_seed());
    input[0] = std::numeric_limits<float>::quiet_NaN();
    input[1] = inf;
    input[33] = -inf;
    const Comparison c = compare(run(input), reference_sums(input, GetParam().rule), sum_tolerance);
    EXPECT_TRUE(c.within_tolerance()) << c.describe();
}

TEST_P(DivergenceStepTest, RejectsBadArguments)
{
    const Step& step = GetParam();
    DeviceBuffer<float> d_buffer(16);
    EXPECT_EQ(step.branch(nullptr, d_buffer.data(), 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.branch(d_buffer.data(), nullptr, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.branch(d_buffer.data(), d_buffer.data(), 0, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.branch(d_buffer.data(), d_buffer.data(), -3, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Divergence, DivergenceStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- the ceiling the timing program measures ----

TEST(DivergenceCeiling, UniformWorkSumsSinesForEveryItem)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float> input = random_angles(1000, fresh_seed());
    DeviceBuffer<float> d_in(input.size()), d_out(input.size());
    d_in.upload(input);
    d_out.fill_bytes(0xFF, 0);
    ASSERT_EQ(uniform_work(d_in.data(), d_out.data(), static_cast<int>(input.size()), 0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // by_warp for items 0..31 and by_index for even items are sine sums: build the all-sine reference from both.
    const std::vector<double> sines = reference_sums(input, BranchRule::by_index);
    const std::vector<float> out = d_out.download();
    for (std::size_t i = 0; i < input.size(); i += 2) {
        EXPECT_NEAR(out[i], sines[i], sum_tolerance) << "item " << i;
    }
}

// ---- what make profile runs under Nsight Compute ----

TEST(DivergenceProfile, EveryStepOnce)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float> input = random_angles(1 << 20, fresh_seed());
    DeviceBuffer<float> d_in(input.size()), d_out(input.size());
    d_in.upload(input);
    for (const Step& step : steps()) {
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(step.branch(d_in.data(), d_out.data(), static_cast<int>(input.size()), 0), cudaSuccess) << step.id;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << step.id;
        const Comparison c = compare(d_out.download(), reference_sums(input, step.rule), sum_tolerance);
        EXPECT_TRUE(c.within_tolerance()) << step.id << ": " << c.describe();
    }
}

// ---- how to call a step from your own code ----

TEST(DivergenceUsage, SumsWithWarpAlignedBranches)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float> h_angles = random_angles(5000, fresh_seed());
    // example-begin divergence-usage
    const int num_items = static_cast<int>(h_angles.size());
    float* d_in = nullptr;
    float* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_in, num_items * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, num_items * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_in, h_angles.data(), num_items * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);

    // Warps 0, 2, 4, ... sum sines, warps 1, 3, 5, ... cosines: no warp is split between the two.
    ASSERT_EQ(stepwise::divergence::warp_aligned_branch::branch(d_in, d_out, num_items), cudaSuccess);

    std::vector<float> h_sums(num_items);
    ASSERT_EQ(cudaMemcpy(h_sums.data(), d_out, num_items * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaFree(d_in), cudaSuccess);
    ASSERT_EQ(cudaFree(d_out), cudaSuccess);
    // example-end divergence-usage
    const Comparison c = compare(h_sums, reference_sums(h_angles, BranchRule::by_warp), sum_tolerance);
    EXPECT_TRUE(c.within_tolerance()) << c.describe();
}

}  // namespace
}  // namespace stepwise::divergence
