// The sampler on a GPU: one row, and several rows sampled in turn.
#include "support/gpu_test_support.hpp"
#include "core/nvml.hpp"
#include "core/sampler.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using stepwise::RowTiming;
using stepwise::Sampler;

//! Spins for about `cycles` SM clock cycles: a launch whose length the test chooses.
__global__ void spin_kernel(long long cycles)
{
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

//! A sampler over the current GPU with a short stopping rule (the GPU's clocks through NVML where it is there).
struct SamplerFixture : ::testing::Test {
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        int device = 0;
        ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
        char bus_id[32] = {};
        ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device), cudaSuccess);
        nvml = std::make_unique<stepwise::Nvml>(bus_id);
        rule.min_samples = 20;
        rule.max_samples = 20;  // every row stops at exactly 20 kept samples
        rule.max_seconds_per_row = 5.0;
        sampler = std::make_unique<Sampler>(cudaStream_t{}, std::size_t{1} << 20, *nvml, rule, 0.0, 2);
    }

    std::unique_ptr<stepwise::Nvml> nvml;
    stepwise::StoppingRule rule;
    std::unique_ptr<Sampler> sampler;
};

const stepwise::TimingMode mode{"single_cold", "test", true, 1, 0.0};

cudaError_t spin(long long cycles)
{
    spin_kernel<<<1, 1>>>(cycles);
    return cudaGetLastError();
}

TEST_F(SamplerFixture, RowsInTurnEachGetTheirOwnSamplesInTheirOrder)
{
    int resets = 0;
    const std::vector<RowTiming> rows = sampler->time_in_turn(
        {{"short", [] { return spin(20'000); }}, {"long", [] { return spin(2'000'000); }}}, mode,
        [&resets] { ++resets; });
    ASSERT_EQ(rows.size(), 2u);
    for (const RowTiming& row : rows) {
        EXPECT_EQ(row.summary.samples + row.throttled_samples, 20u);  // the rule's cap, in every row
        EXPECT_EQ(row.throttled_samples, 0u);                         // threshold 0 keeps every sample
    }
    // The long row spins 1.98 M cycles more, over 0.5 ms at any SM clock below 3.9 GHz: its median is the larger by
    // that, in its place. A difference, not a ratio: under compute-sanitizer every launch, the short one's too, costs
    // about a millisecond more (the plain run's short row takes about 10 us).
    EXPECT_GT(rows[1].summary.median_ms - rows[0].summary.median_ms, 0.5);
    EXPECT_GE(resets, 2 * (20 + 2));  // before every sample of both rows, warm-up included
}

TEST_F(SamplerFixture, OneRowIsTimedAsOneRowInTurn)
{
    const RowTiming row = sampler->time("alone", mode, [] {}, [] { return spin(20'000); });
    EXPECT_EQ(row.summary.samples, 20u);
    EXPECT_TRUE(sampler->time_in_turn({}, mode, [] {}).empty());
}

TEST_F(SamplerFixture, AFailedLaunchNamesItsRow)
{
    try {
        sampler->time_in_turn({{"fine", [] { return spin(1'000); }}, {"broken", [] { return cudaErrorInvalidValue; }}},
                              mode, [] {});
        FAIL() << "a launch that returns an error must throw";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
    }
}

}  // namespace
