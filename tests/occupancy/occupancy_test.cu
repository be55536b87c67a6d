// GPU tests of the occupancy chapter: every block shape against the correctly rounded sum, bit for bit.
#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "occupancy/occupancy_reference.hpp"
#include "occupancy/occupancy_steps.hpp"

#include "../../snippets/occupancy/01_sum_matrix_2d.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

namespace stepwise::occupancy {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::under_sanitizer;

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

class OccupancyStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! The step's a + b into a poisoned buffer with one guard element past the end.
    std::vector<float> run(const std::vector<float>& a, const std::vector<float>& b, int num_cols, int num_rows)
    {
        DeviceBuffer<float> d_a(a.size()), d_b(b.size()), d_c(a.size() + 1);
        d_a.upload(a);
        d_b.upload(b);
        return stepwise::testing::run_poisoned(
            d_c, [&] { return GetParam().sum(d_a.data(), d_b.data(), d_c.data(), num_cols, num_rows, 0); });
    }
};

TEST_P(OccupancyStepTest, AddsExactlyAtShapesOfNoBlockMultiple)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Shape {
        int rows, cols;
    };
    for (const Shape s : {Shape{1, 1}, Shape{33, 65}, Shape{1, 5000}, Shape{5000, 1}, Shape{1000, 1500},
                          Shape{256, 256}}) {
        const std::size_t n = static_cast<std::size_t>(s.rows) * s.cols;
        const std::vector<float> a = random_matrix(n, seed + n), b = random_matrix(n, seed + n + 1);
        const Comparison c = compare_sum(a, b, run(a, b, s.cols, s.rows));
        EXPECT_TRUE(c.exact()) << s.rows << " x " << s.cols << ": " << c.describe();
    }
}

TEST_P(OccupancyStepTest, NaNAndInfinityPropagate)
{
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> a = random_matrix(40 * 40, fresh_seed()), b = random_matrix(40 * 40, fresh_seed());
    a[0] = std::numeric_limits<float>::quiet_NaN();
    a[41] = inf;
    b[41] = -inf;
    a[1599] = inf;
    const std::vector<float> c = run(a, b, 40, 40);
    EXPECT_TRUE(std::isnan(c[0]));
    EXPECT_TRUE(std::isnan(c[41]));
    EXPECT_EQ(c[1599], inf);
    EXPECT_TRUE(compare_sum(a, b, c).exact()) << compare_sum(a, b, c).describe();
}

TEST_P(OccupancyStepTest, RejectsBadArguments)
{
    const Step& step = GetParam();
    DeviceBuffer<float> d(16);
    EXPECT_EQ(step.sum(nullptr, d.data(), d.data(), 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.sum(d.data(), nullptr, d.data(), 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.sum(d.data(), d.data(), nullptr, 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.sum(d.data(), d.data(), d.data(), 0, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.sum(d.data(), d.data(), d.data(), 4, -1, 0), cudaErrorInvalidValue);
    // More rows than the grid's y dimension (65535 blocks) can cover at this block height.
    EXPECT_EQ(step.sum(d.data(), d.data(), d.data(), 1, 65535 * step.block_y + 1, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Occupancy, OccupancyStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- what make profile runs under Nsight Compute ----

TEST(OccupancyProfile, EveryShapeOnceAtTheSourcesSize)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (under_sanitizer()) {
        GTEST_SKIP() << "16384 x 16384 under compute-sanitizer would take minutes; the sanitizers check the smaller "
                        "shapes";
    }
    const int side = measured_side;
    const std::size_t n = static_cast<std::size_t>(side) * side;
    const std::vector<float> a = random_matrix(n, fresh_seed()), b = random_matrix(n, fresh_seed());
    DeviceBuffer<float> d_a(n), d_b(n), d_c(n);
    d_a.upload(a);
    d_b.upload(b);
    for (const Step& step : steps()) {
        d_c.fill_bytes(0xFF, 0);
        ASSERT_EQ(step.sum(d_a.data(), d_b.data(), d_c.data(), side, side, 0), cudaSuccess) << step.id;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << step.id;
        const Comparison c = compare_sum(a, b, d_c.download());
        EXPECT_TRUE(c.exact()) << step.id << ": " << c.describe();
    }
}

// ---- how to call a step from your own code ----

TEST(OccupancyUsage, AddTwoMatricesWith32By16Blocks)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const int num_rows = 300, num_cols = 500;
    const std::vector<float> h_a = random_matrix(num_rows * num_cols, fresh_seed());
    const std::vector<float> h_b = random_matrix(num_rows * num_cols, fresh_seed());
    // example-begin occupancy-usage
    const std::size_t bytes = static_cast<std::size_t>(num_rows) * num_cols * sizeof(float);
    float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
    ASSERT_EQ(cudaMalloc(&d_a, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_b, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_c, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_a, h_a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_b, h_b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);

    // The block shape is a template argument: 32 threads along a row, 16 rows.
    ASSERT_EQ((stepwise::occupancy::sum_matrix_2d::sum_matrix<32, 16>(d_a, d_b, d_c, num_cols, num_rows)), cudaSuccess);

    std::vector<float> h_c(static_cast<std::size_t>(num_rows) * num_cols);
    ASSERT_EQ(cudaMemcpy(h_c.data(), d_c, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    for (float* p : {d_a, d_b, d_c}) {
        ASSERT_EQ(cudaFree(p), cudaSuccess);
    }
    // example-end occupancy-usage
    EXPECT_TRUE(compare_sum(h_a, h_b, h_c).exact()) << compare_sum(h_a, h_b, h_c).describe();
}

}  // namespace
}  // namespace stepwise::occupancy
