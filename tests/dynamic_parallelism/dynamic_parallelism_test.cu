// GPU tests of the dynamic-parallelism chapter. Its steps are compiled with relocatable device code in a library
// of their own, so these tests call them through the registry (dynamic_parallelism_steps.hpp), not the snippets.
#include "core/device_buffer.hpp"
#include "dynamic_parallelism/dynamic_parallelism_reference.hpp"
#include "dynamic_parallelism/dynamic_parallelism_steps.hpp"
#include "support/gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace stepwise::dynamic_parallelism {
namespace {

using stepwise::testing::fresh_seed;

const Step& step_named(const std::string& id)
{
    for (const Step& step : steps()) {
        if (step.id == id) {
            return step;
        }
    }
    throw std::out_of_range("no dynamic-parallelism step " + id);
}

// ---- step 1: the nested hello world ----

//! The lines the nested hello world printed to `max_depth`, and how many device-side launches failed.
std::vector<std::string> hello_lines(int max_depth, unsigned int& failed)
{
    DeviceBuffer<unsigned int> d_failed(1);
    EXPECT_EQ(cudaMemset(d_failed.data(), 0, sizeof(unsigned int)), cudaSuccess);
    std::fflush(stdout);
    ::testing::internal::CaptureStdout();
    const cudaError_t launched = step_named("01_nested_hello_world").hello(max_depth, d_failed.data(), 0);
    const cudaError_t synced = cudaDeviceSynchronize();  // device printf's buffer is written out here
    std::fflush(stdout);
    const std::string text = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(launched, cudaSuccess);
    EXPECT_EQ(synced, cudaSuccess);
    failed = d_failed.download().at(0);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

TEST(DynamicParallelismHello, PrintsEveryLevelFromEveryBlockAsTheSourceDoes)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    unsigned int failed = 0;
    const std::vector<std::string> lines = hello_lines(3, failed);
    EXPECT_EQ(failed, 0u);
    // Depth d runs 2^d grids of 2 blocks; thread 0 of each block prints once: 2 + 4 + 8 lines.
    ASSERT_EQ(lines.size(), 14u);
    const std::regex format(R"(current_depth=(\d+) blockIdx\.x=(\d+) threadIdx\.x=0)");
    std::map<std::pair<int, int>, int> count;  // (depth, block) -> lines
    for (const std::string& line : lines) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, format)) << "unexpected line: " << line;
        ++count[{std::stoi(m[1]), std::stoi(m[2])}];
    }
    const std::map<std::pair<int, int>, int> expected = {{{0, 0}, 1}, {{0, 1}, 1}, {{1, 0}, 2},
                                                         {{1, 1}, 2}, {{2, 0}, 4}, {{2, 1}, 4}};
    EXPECT_EQ(count, expected);
}

TEST(DynamicParallelismHello, OneLevelIsTheHostGridAlone)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    unsigned int failed = 0;
    const std::vector<std::string> lines = hello_lines(1, failed);
    EXPECT_EQ(failed, 0u);
    EXPECT_EQ(lines.size(), 2u);
}

TEST(DynamicParallelismHello, RejectsDepthsOutsideTheNestingLimit)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    DeviceBuffer<unsigned int> d_failed(1);
    const HelloFunction hello = step_named("01_nested_hello_world").hello;
    EXPECT_EQ(hello(0, d_failed.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(hello(25, d_failed.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(hello(3, nullptr, 0), cudaErrorInvalidValue);
}

// ---- steps 2 and 3: many children ----

class DynamicParallelismChildrenTest : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }
};

TEST_P(DynamicParallelismChildrenTest, EveryChildRunsOnce)
{
    const ChildrenFunction children = step_named(GetParam()).children;
    for (const int n : {1, 7, 1024, max_children()}) {
        DeviceBuffer<int> d_out(n + 1);
        DeviceBuffer<unsigned int> d_failed(1);
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(cudaMemset(d_failed.data(), 0, sizeof(unsigned int)), cudaSuccess);
        ASSERT_EQ(children(d_out.data(), n, d_failed.data(), 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(d_failed.download().at(0), 0u) << n << " children";
        const std::vector<int> out = d_out.download();
        for (int c = 0; c < n; ++c) {
            ASSERT_EQ(out[c], c + 1) << "child " << c << " of " << n;
        }
        EXPECT_EQ(out[n], -1) << "a child wrote past the end";
    }
}

TEST_P(DynamicParallelismChildrenTest, RejectsCountsOutsideThePendingLaunchLimit)
{
    const ChildrenFunction children = step_named(GetParam()).children;
    DeviceBuffer<int> d_out(4);
    DeviceBuffer<unsigned int> d_failed(1);
    EXPECT_EQ(children(d_out.data(), 0, d_failed.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(children(d_out.data(), max_children() + 1, d_failed.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(children(nullptr, 4, d_failed.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(children(d_out.data(), 4, nullptr, 0), cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(DynamicParallelism, DynamicParallelismChildrenTest,
                         ::testing::Values("02_children_from_one_thread", "03_children_from_every_block"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(DynamicParallelismBaseline, HostLaunchesRunEveryChild)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    DeviceBuffer<int> d_out(1024);
    d_out.fill_bytes(0xFF, 0);
    ASSERT_EQ(host_launch_children(d_out.data(), 1024, 0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int> out = d_out.download();
    for (int c = 0; c < 1024; ++c) {
        ASSERT_EQ(out[c], c + 1) << "child " << c;
    }
}

// ---- steps 4 and 5: adaptive integration ----

class DynamicParallelismIntegrateTest : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    struct Outcome {
        double integral;
        unsigned int status;
    };

    Outcome integrate(double a, double b, int initial, double tolerance, int capacity)
    {
        DeviceBuffer<double> d_result(1);
        DeviceBuffer<unsigned int> d_status(1);
        DeviceBuffer<unsigned char> d_workspace(integrate_workspace_bytes(capacity));
        d_result.fill_bytes(0xFF, 0);
        d_status.fill_bytes(0xFF, 0);
        EXPECT_EQ(step_named(GetParam()).integrate(a, b, initial, tolerance, d_result.data(), d_status.data(),
                                                   d_workspace.data(), capacity, 0),
                  cudaSuccess);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        return {d_result.download().at(0), d_status.download().at(0)};
    }
};

TEST_P(DynamicParallelismIntegrateTest, MeasuredProblemMatchesTheExactIntegralAndTheCpu)
{
    const Outcome out = integrate(lower, upper, initial_intervals, tolerance, list_capacity);
    EXPECT_EQ(out.status, 0u) << describe_integrate_status(out.status);
    const double exact = exact_integral(lower, upper);
    EXPECT_LE(std::fabs(out.integral - exact), integral_rel_tolerance * exact) << out.integral << " vs " << exact;
    const AdaptiveResult cpu = adaptive_reference(lower, upper, initial_intervals, tolerance, 16);
    EXPECT_LE(std::fabs(out.integral - cpu.integral), integral_rel_tolerance * exact);
}

TEST_P(DynamicParallelismIntegrateTest, OtherIntervalsAndStartingCounts)
{
    // A sub-interval that cuts a peak, from starting counts below and above one block (129 is no multiple of it).
    for (const int initial : {7, 129}) {
        const Outcome out = integrate(0.25, 0.8, initial, 1e-5, list_capacity);
        EXPECT_EQ(out.status, 0u) << describe_integrate_status(out.status);
        const double exact = exact_integral(0.25, 0.8);
        EXPECT_LE(std::fabs(out.integral - exact), integral_rel_tolerance * exact)
            << initial << " intervals: " << out.integral << " vs " << exact;
    }
}

TEST_P(DynamicParallelismIntegrateTest, ReportsAListOverflowInsteadOfAWrongAnswerSilently)
{
    const Outcome out = integrate(lower, upper, 64, tolerance, 64);
    EXPECT_NE(out.status & 1u, 0u) << describe_integrate_status(out.status);
}

TEST_P(DynamicParallelismIntegrateTest, ReportsRefinementCutShortByTheLevelLimit)
{
    // A tolerance no double can meet near the narrowest peak: refinement stops at the level limit, and says so.
    const Outcome out = integrate(lower, upper, 1, 1e-13, list_capacity);
    EXPECT_NE(out.status & 2u, 0u) << describe_integrate_status(out.status);
}

TEST_P(DynamicParallelismIntegrateTest, RejectsBadArguments)
{
    const IntegrateFunction integrate = step_named(GetParam()).integrate;
    DeviceBuffer<double> d_result(1);
    DeviceBuffer<unsigned int> d_status(1);
    DeviceBuffer<unsigned char> d_workspace(integrate_workspace_bytes(16));
    double* r = d_result.data();
    unsigned int* s = d_status.data();
    void* w = d_workspace.data();
    EXPECT_EQ(integrate(1.0, 0.0, 1, 1e-5, r, s, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 0, 1e-5, r, s, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 17, 1e-5, r, s, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 1, 0.0, r, s, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 1, std::nan(""), r, s, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 1, 1e-5, nullptr, s, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 1, 1e-5, r, nullptr, w, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 1, 1e-5, r, s, nullptr, 16, 0), cudaErrorInvalidValue);
    EXPECT_EQ(integrate(0.0, 1.0, 1, 1e-5, r, s, static_cast<char*>(w) + 4, 16, 0), cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(DynamicParallelism, DynamicParallelismIntegrateTest,
                         ::testing::Values("04_adaptive_host_driven", "05_adaptive_device_driven"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(DynamicParallelismIntegrate, HostAndDeviceDrivenStepsAgree)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    std::vector<double> results;
    for (const char* id : {"04_adaptive_host_driven", "05_adaptive_device_driven"}) {
        DeviceBuffer<double> d_result(1);
        DeviceBuffer<unsigned int> d_status(1);
        DeviceBuffer<unsigned char> d_workspace(integrate_workspace_bytes(list_capacity));
        ASSERT_EQ(step_named(id).integrate(lower, upper, initial_intervals, tolerance, d_result.data(),
                                           d_status.data(), d_workspace.data(), list_capacity, 0),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        results.push_back(d_result.download().at(0));
    }
    // The same intervals are accepted; only the order of the atomic additions differs.
    EXPECT_NEAR(results[0], results[1], 1e-12 * std::fabs(results[0]));
}

}  // namespace
}  // namespace stepwise::dynamic_parallelism
