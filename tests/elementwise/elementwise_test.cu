// GPU tests of the element-wise chapter: every step against the double-precision CPU reference.
#include "core/device_buffer.hpp"
#include "elementwise/elementwise_reference.hpp"
#include "elementwise/elementwise_steps.hpp"
#include "core/floor_kernels.hpp"
#include "support/gpu_test_support.hpp"

#include "../../snippets/elementwise/06_float4.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace stepwise::elementwise {
namespace {

using stepwise::testing::fresh_seed;

struct Size {
    int dimx;
    int dimy;
};

//! Sizes that are multiples of no block size, plus the assignment's; a step gets those its launcher accepts.
std::vector<Size> sizes_for(const Step& step)
{
    const std::vector<Size> all = {{1, 1},     {3, 5},   {7, 1031}, {1000, 37}, {516, 513},
                                   {2052, 3},  {4, 1025}, {2050, 7}, {2048, 2048}};
    return stepwise::testing::kept(all, [&](const Size& s) { return s.dimx % step.dimx_multiple == 0; });
}

constexpr std::size_t guard_floats = 1024;  // poisoned floats after the array: an overrun changes them

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

}  // namespace

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

//! Runs a step on a copy of `input` in a poisoned, guarded buffer.
class ElementwiseStepFixture : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! `updates` launches of the step; the array after each one goes to `after[k]`.
    void run(const std::vector<float>& input, Size size, int updates, std::vector<std::vector<float>>& after)
    {
        const Step& step = GetParam();
        DeviceBuffer<unsigned char> d_workspace(step.workspace_bytes);
        if (step.prepare != nullptr) {
            ASSERT_EQ(step.prepare(d_workspace.data(), 0), cudaSuccess);
        }
        DeviceBuffer<float> d_data(input.size() + guard_floats);
        d_data.fill_bytes(0xFF, 0);  // every float a NaN
        ASSERT_EQ(cudaMemcpy(d_data.data(), input.data(), input.size() * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        after.clear();
        for (int k = 0; k < updates; ++k) {
            ASSERT_EQ(step.update(d_data.data(), size.dimx, size.dimy, d_workspace.data(), 0), cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            std::vector<float> all = d_data.download();
            for (std::size_t i = input.size(); i < all.size(); ++i) {
                std::uint32_t bits = 0;
                std::memcpy(&bits, &all[i], sizeof bits);
                ASSERT_EQ(bits, 0xFFFFFFFFu) << "wrote past the array at float " << i - input.size() << " after it";
            }
            all.resize(input.size());
            after.push_back(std::move(all));
        }
    }

    void expect_matches_reference(const std::vector<float>& input, const std::vector<float>& output, Size size)
    {
        const std::vector<double> reference = reference_update(input, size.dimx, size.dimy);
        const Comparison c = compare(input, output, reference, size.dimx, GetParam().tolerance_ulp,
                                     GetParam().inner_error_exponent);
        EXPECT_TRUE(c.within_tolerance()) << size.dimx << " x " << size.dimy << ": " << c.describe(size.dimx);
    }
};

// ---- every step ----

class StepTest : public ElementwiseStepFixture {};

TEST_P(StepTest, AssignmentDataMatchesReference)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Size size{assignment_dimx, assignment_dimy};
    const std::vector<float> input = assignment_input(size.dimx, size.dimy, seed);
    std::vector<std::vector<float>> after;
    ASSERT_NO_FATAL_FAILURE(run(input, size, 1, after));
    expect_matches_reference(input, after[0], size);
}

TEST_P(StepTest, SizesThatAreNotMultiplesOfTheBlockMatchReference)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Size size : sizes_for(GetParam())) {
        // Off the lookup table's domain the step is a different function: it gets the assignment's integers.
        const std::vector<float> input = GetParam().lookup_domain_only
                                             ? assignment_input(size.dimx, size.dimy, seed)
                                             : uniform_input(size.dimx, size.dimy, 0.5f, 4096.f, seed);
        std::vector<std::vector<float>> after;
        ASSERT_NO_FATAL_FAILURE(run(input, size, 1, after));
        expect_matches_reference(input, after[0], size);
    }
}

TEST_P(StepTest, RejectsInvalidArgumentsAndLeavesTheDataAlone)
{
    const Step& step = GetParam();
    DeviceBuffer<unsigned char> d_workspace(step.workspace_bytes);
    if (step.prepare != nullptr) {
        ASSERT_EQ(step.prepare(d_workspace.data(), 0), cudaSuccess);
    }
    const Size size{4 * step.dimx_multiple + (step.dimx_multiple > 1 ? 1 : 0), 3};
    const std::vector<float> input = assignment_input(size.dimx, size.dimy, fresh_seed());
    DeviceBuffer<float> d_data(input.size());
    d_data.upload(input);

    EXPECT_EQ(step.update(nullptr, 8, 8, d_workspace.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.update(d_data.data(), 0, 3, d_workspace.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.update(d_data.data(), 4, -1, d_workspace.data(), 0), cudaErrorInvalidValue);
    if (step.dimx_multiple > 1) {
        EXPECT_EQ(step.update(d_data.data(), size.dimx, size.dimy, d_workspace.data(), 0), cudaErrorInvalidValue)
            << "dimx " << size.dimx << " is not a multiple of " << step.dimx_multiple;
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d_data.download(), input) << "a rejected call changed the data";
}

INSTANTIATE_TEST_SUITE_P(Elementwise, StepTest, ::testing::ValuesIn(steps()), step_name);

// ---- steps that hold on any input (all but the lookup table) ----

std::vector<Step> any_input_steps()
{
    std::vector<Step> any_input;
    std::copy_if(steps().begin(), steps().end(), std::back_inserter(any_input),
                 [](const Step& s) { return !s.lookup_domain_only; });
    return any_input;
}

class AnyInputStepTest : public ElementwiseStepFixture {};

TEST_P(AnyInputStepTest, RepeatedUpdatesEachMatchReference)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Size size{1000, 37};
    if (size.dimx % GetParam().dimx_multiple != 0) {
        FAIL() << "choose a size this step accepts";
    }
    const std::vector<float> input = assignment_input(size.dimx, size.dimy, seed);
    std::vector<std::vector<float>> after;
    ASSERT_NO_FATAL_FAILURE(run(input, size, 3, after));
    expect_matches_reference(input, after[0], size);
    expect_matches_reference(after[0], after[1], size);
    expect_matches_reference(after[1], after[2], size);
}

INSTANTIATE_TEST_SUITE_P(ElementwiseAnyInput, AnyInputStepTest, ::testing::ValuesIn(any_input_steps()), step_name);

// ---- the lookup table: exact on its domain, a different function off it ----

std::vector<Step> lookup_table_steps()
{
    std::vector<Step> lookup;
    std::copy_if(steps().begin(), steps().end(), std::back_inserter(lookup),
                 [](const Step& s) { return s.lookup_domain_only; });
    return lookup;
}

class LookupTableTest : public ElementwiseStepFixture {};

TEST_P(LookupTableTest, CoversEveryIntegerFrom10To265InBothParities)
{
    const Size size{2, 256};
    std::vector<float> input;
    for (int value = 10; value <= 265; ++value) {
        input.push_back(static_cast<float>(value));  // even column
        input.push_back(static_cast<float>(value));  // odd column
    }
    std::vector<std::vector<float>> after;
    ASSERT_NO_FATAL_FAILURE(run(input, size, 1, after));
    expect_matches_reference(input, after[0], size);
    EXPECT_NE(after[0].back(), 265.f) << "265 left unchanged: the article's off-by-one table";
}

TEST_P(LookupTableTest, MatchesStep2BitForBitOnTheAssignmentData)
{
    const Size size{assignment_dimx, 64};
    const std::vector<float> input = assignment_input(size.dimx, size.dimy, fresh_seed());
    std::vector<std::vector<float>> after;
    ASSERT_NO_FATAL_FAILURE(run(input, size, 1, after));
    const Step& step2 = steps().at(1);
    ASSERT_STREQ(step2.id, "02_block_512x1");
    DeviceBuffer<float> d_data(input.size());
    d_data.upload(input);
    ASSERT_EQ(step2.update(d_data.data(), size.dimx, size.dimy, nullptr, 0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(after[0], d_data.download());
}

TEST_P(LookupTableTest, ASecondUpdateLeavesTheDomainAndDiffersFromTheFunction)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Size size{assignment_dimx, 64};
    const std::vector<float> input = assignment_input(size.dimx, size.dimy, seed);
    std::vector<std::vector<float>> after;
    ASSERT_NO_FATAL_FAILURE(run(input, size, 2, after));
    const std::vector<double> reference = reference_update(after[0], size.dimx, size.dimy);
    const Comparison second = compare(after[0], after[1], reference, size.dimx, GetParam().tolerance_ulp,
                                      GetParam().inner_error_exponent);
    EXPECT_FALSE(second.within_tolerance()) << "expected the table to be wrong off its domain";
    EXPECT_GT(second.max_rel, 1e-4) << second.describe(size.dimx);
}

TEST_P(LookupTableTest, LeavesValuesPast265Unchanged)
{
    const Size size{4, 1};
    const std::vector<float> input = {266.f, 300.f, 1000.5f, 4096.f};
    std::vector<std::vector<float>> after;
    ASSERT_NO_FATAL_FAILURE(run(input, size, 1, after));
    EXPECT_EQ(after[0], input);
}

INSTANTIATE_TEST_SUITE_P(ElementwiseLookup, LookupTableTest, ::testing::ValuesIn(lookup_table_steps()), step_name);

// ---- the ceilings the timing program measures ----

TEST(ElementwiseCeilings, InPlaceReadWriteTouchesEveryElementAndNothingElse)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float> input = uniform_input(1000, 37, 1.f, 100.f, fresh_seed());
    DeviceBuffer<float> d_data(input.size() + guard_floats);
    d_data.fill_bytes(0xFF, 0);
    ASSERT_EQ(cudaMemcpy(d_data.data(), input.data(), input.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(inplace_read_write(d_data.data(), input.size(), 2.f, 0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> all = d_data.download();
    for (std::size_t i = 0; i < input.size(); ++i) {
        ASSERT_EQ(all[i], 2.f * input[i]) << "element " << i;
    }
    for (std::size_t i = input.size(); i < all.size(); ++i) {
        ASSERT_TRUE(std::isnan(all[i])) << "wrote past the array";
    }
    EXPECT_EQ(inplace_read_write(d_data.data(), 6, 1.f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(empty_launch(0), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- how to call a step from your own code ----

TEST(ElementwiseUsage, UpdateAnArrayInPlaceWithTheFloat4Step)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float> h_input = assignment_input(2048, 2048, fresh_seed());
    // example-begin elementwise-usage
    const int dimx = 2048;  // columns: a multiple of 4 for the float4 steps
    const int dimy = 2048;  // rows
    std::vector<float> h_data = h_input;

    float* d_data = nullptr;
    ASSERT_EQ(cudaMalloc(&d_data, h_data.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_data, h_data.data(), h_data.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);

    ASSERT_EQ(stepwise::elementwise::float4_vectors::update(d_data, dimx, dimy), cudaSuccess);  // launch errors
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);                                             // execution errors

    ASSERT_EQ(cudaMemcpy(h_data.data(), d_data, h_data.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaFree(d_data), cudaSuccess);
    // example-end elementwise-usage
    const Comparison c = compare(h_input, h_data, reference_update(h_input, dimx, dimy), dimx, 1.0,
                                 accurate_inner_error_exponent);
    EXPECT_TRUE(c.within_tolerance()) << c.describe(dimx);
}

}  // namespace
}  // namespace stepwise::elementwise
