// GPU tests of the reduction chapter: every step against exact (int) and double (float) CPU sums.
#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "reduction/reduction_reference.hpp"
#include "reduction/reduction_steps.hpp"

#include "../../snippets/reduction/17_single_pass.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace stepwise::reduction {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;

//! Sizes that are powers of two, multiples of no block size, and one of 2^22 + 7. Step 17's boundaries: it sums
//! up to 4099 items with one block of 256 threads (one round of 4 int4 loads each) and from 4100 with one of 1024,
//! up to 16387; from 16388 with several. 3001 and 12007 end in a partial round of up to three loads a thread.
const std::vector<int> sizes = {1,    2,     3,     31,    32,    33,    255,   256,   257,    1000,
                                3001, 4097,  4099,  4100,  12007, 16384, 16387, 16388, 65536, 100003,
                                (1 << 22) + 7};

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

SumFunction<int> sum_of(const Step& step, int) { return step.sum_int; }
SumFunction<float> sum_of(const Step& step, float) { return step.sum_float; }

class ReductionStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! The step's sum of `input`, with the output poisoned first; checks a reading step left its input alone.
    template <typename T>
    void run(const std::vector<T>& input, T& result)
    {
        const Step& step = GetParam();
        const SumFunction<T> sum = sum_of(step, T());
        DeviceBuffer<T> d_in(input.size());
        d_in.upload(input);
        DeviceBuffer<T> d_out(1);
        d_out.fill_bytes(0xFF, 0);
        std::size_t temp_bytes = 0;
        ASSERT_EQ(sum(nullptr, temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0), cudaSuccess);
        DeviceBuffer<unsigned char> d_temp(temp_bytes);
        d_temp.fill_bytes(0xFF, 0);  // a step must not rely on a zeroed workspace
        ASSERT_EQ(sum(d_temp.data(), temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        result = d_out.download().front();
        if (!step.destroys_input) {
            EXPECT_EQ(d_in.download(), input) << "the step changed its input";
        }
    }

    void expect_exact(const std::vector<int>& input)
    {
        int got = 0;
        ASSERT_NO_FATAL_FAILURE(run(input, got));
        EXPECT_EQ(got, exact_sum(input)) << input.size() << " values";
    }
};

TEST_P(ReductionStepTest, IntegerSumsAreExactAtEverySize)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const int n : sizes) {
        expect_exact(random_ints(static_cast<std::size_t>(n), -100, 100, seed + n));
    }
}

TEST_P(ReductionStepTest, AllNegativeIntegers)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_exact(random_ints(100003, -1000, -1, seed));
}

TEST_P(ReductionStepTest, LargeIntegersWhoseSumStillFits)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_exact(random_ints(1021, -(1 << 20), 1 << 20, seed));  // |sum| < 2^30
}

TEST_P(ReductionStepTest, FloatSumsWithinTheBoundForAnyOrder)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const int n : sizes) {
        const std::vector<float> input = random_floats(static_cast<std::size_t>(n), -1.f, 1.f, seed + n);
        float got = 0;
        ASSERT_NO_FATAL_FAILURE(run(input, got));
        const double reference = reference_sum(input);
        ASSERT_TRUE(std::isfinite(got)) << n << " values: got " << got;
        EXPECT_LE(std::fabs(got - reference), float_sum_tolerance(input))
            << n << " values: got " << got << ", reference " << reference;
    }
}

TEST_P(ReductionStepTest, IntegerValuedFloatsSumExactly)
{
    // Every partial sum of 65536 integers in [-100, 100] is an integer below 2^24: exact in any order.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<int> ints = random_ints(65536, -100, 100, seed);
    const std::vector<float> input(ints.begin(), ints.end());
    float got = 0;
    ASSERT_NO_FATAL_FAILURE(run(input, got));
    EXPECT_EQ(static_cast<double>(got), static_cast<double>(exact_sum(ints)));
}

TEST_P(ReductionStepTest, RejectsBadArgumentsAndTooSmallAWorkspace)
{
    const Step& step = GetParam();
    DeviceBuffer<int> d_in(1000);
    DeviceBuffer<int> d_out(1);
    std::size_t temp_bytes = 0;
    EXPECT_EQ(step.sum_int(nullptr, temp_bytes, d_in.data(), d_out.data(), 0, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.sum_int(nullptr, temp_bytes, nullptr, d_out.data(), 10, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.sum_int(nullptr, temp_bytes, d_in.data(), nullptr, 10, 0), cudaErrorInvalidValue);
    ASSERT_EQ(step.sum_int(nullptr, temp_bytes, d_in.data(), d_out.data(), 1000, 0), cudaSuccess);
    ASSERT_GT(temp_bytes, 0u);
    DeviceBuffer<unsigned char> d_temp(temp_bytes);
    std::size_t too_small = temp_bytes - 1;
    EXPECT_EQ(step.sum_int(d_temp.data(), too_small, d_in.data(), d_out.data(), 1000, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_P(ReductionStepTest, RepeatedCallsOnOneWorkspaceAgree)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Step& step = GetParam();
    const std::vector<int> input = random_ints(300007, -50, 50, seed);
    DeviceBuffer<int> d_in(input.size());
    DeviceBuffer<int> d_out(1);
    std::size_t temp_bytes = 0;
    ASSERT_EQ(step.sum_int(nullptr, temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0),
              cudaSuccess);
    DeviceBuffer<unsigned char> d_temp(temp_bytes);
    for (int call = 0; call < 3; ++call) {
        d_in.upload(input);
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(step.sum_int(d_temp.data(), temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(d_out.download().front(), exact_sum(input)) << "call " << call;
    }
}

INSTANTIATE_TEST_SUITE_P(Reduction, ReductionStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- the kernels Nsight Compute profiles for the chapter's counts (ncu -k regex:reduce_kernel) ----

TEST(ReductionProfile, EveryStepOnceAtHarrisSizeIsExact)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<int> input = random_ints(1 << 22, -4, 4, fresh_seed());
    DeviceBuffer<int> d_input(input.size());
    d_input.upload(input);
    DeviceBuffer<int> d_in(input.size());
    DeviceBuffer<int> d_out(1);
    for (const Step& step : steps()) {
        ASSERT_EQ(cudaMemcpy(d_in.data(), d_input.data(), d_input.bytes(), cudaMemcpyDeviceToDevice), cudaSuccess);
        std::size_t temp_bytes = 0;
        ASSERT_EQ(step.sum_int(nullptr, temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0),
                  cudaSuccess);
        DeviceBuffer<unsigned char> d_temp(temp_bytes);
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(step.sum_int(d_temp.data(), temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(d_out.download().front(), exact_sum(input)) << step.id;
    }
}

// ---- the library baseline the timing program measures ----

TEST(ReductionBaseline, CubSumIsExactOnIntegers)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<int> input = random_ints(100003, -100, 100, fresh_seed());
    DeviceBuffer<int> d_in(input.size());
    d_in.upload(input);
    DeviceBuffer<int> d_out(1);
    std::size_t temp_bytes = 0;
    ASSERT_EQ(cub_sum(nullptr, temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0), cudaSuccess);
    DeviceBuffer<unsigned char> d_temp(temp_bytes);
    ASSERT_EQ(cub_sum(d_temp.data(), temp_bytes, d_in.data(), d_out.data(), static_cast<int>(input.size()), 0),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(d_out.download().front(), exact_sum(input));
}

// ---- why the warp-synchronous idiom needs __syncwarp: run this under compute-sanitizer --tool racecheck ----

// example-begin volatile-last-warp
//! The last-warp code of Harris's kernel 5 (with += where the deck writes =): correct only if the 32 lanes
//! run in lockstep, which Volta and later GPUs do not promise. Nothing orders lane t's read of
//! partial[t + 16] after lane t + 16's write of it.
template <int BlockThreads>
__global__ void volatile_last_warp_sum(const int* d_in, int* d_block_sums)
{
    __shared__ int partial[BlockThreads];
    const int tid = threadIdx.x;
    partial[tid] = d_in[blockIdx.x * BlockThreads + tid];
    __syncthreads();
    for (int stride = BlockThreads / 2; stride > 32; stride /= 2) {
        if (tid < stride) {
            partial[tid] += partial[tid + stride];
        }
        __syncthreads();
    }
    if (tid < 32) {
        volatile int* v = partial;
        v[tid] += v[tid + 32];
        v[tid] += v[tid + 16];
        v[tid] += v[tid + 8];
        v[tid] += v[tid + 4];
        v[tid] += v[tid + 2];
        v[tid] += v[tid + 1];
    }
    if (tid == 0) {
        d_block_sums[blockIdx.x] = partial[0];
    }
}
// example-end volatile-last-warp

TEST(ReductionRaceDemonstration, VolatileLastWarpIdiom)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    constexpr int block_threads = 256;
    constexpr int blocks = 64;
    const std::vector<int> input = random_ints(block_threads * blocks, -100, 100, fresh_seed());
    DeviceBuffer<int> d_in(input.size());
    d_in.upload(input);
    DeviceBuffer<int> d_block_sums(blocks);
    volatile_last_warp_sum<block_threads><<<blocks, block_threads>>>(d_in.data(), d_block_sums.data());
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // Often right in practice: the race shows in racecheck's report (see the chapter), not in this sum.
    std::int64_t total = 0;
    for (const int s : d_block_sums.download()) {
        total += s;
    }
    RecordProperty("sum_matches", total == exact_sum(input) ? "yes" : "no");
    SUCCEED() << "the volatile idiom summed to " << total << ", exact " << exact_sum(input);
}

// ---- how to call a step from your own code ----

TEST(ReductionUsage, SumAnArrayWithTheSinglePassStep)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<int> h_values = random_ints(1 << 20, -100, 100, fresh_seed());
    // example-begin reduction-usage
    const int num_items = static_cast<int>(h_values.size());
    int* d_in = nullptr;
    int* d_out = nullptr;
    ASSERT_EQ(cudaMalloc(&d_in, num_items * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_in, h_values.data(), num_items * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);

    namespace step = stepwise::reduction::single_pass;
    std::size_t temp_storage_bytes = 0;  // first call: how much workspace?
    ASSERT_EQ(step::sum(nullptr, temp_storage_bytes, d_in, d_out, num_items), cudaSuccess);
    void* d_temp_storage = nullptr;
    ASSERT_EQ(cudaMalloc(&d_temp_storage, temp_storage_bytes), cudaSuccess);
    ASSERT_EQ(step::sum(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items), cudaSuccess);  // second: sum

    int h_sum = 0;
    ASSERT_EQ(cudaMemcpy(&h_sum, d_out, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);  // waits for the sum
    ASSERT_EQ(cudaFree(d_temp_storage), cudaSuccess);
    ASSERT_EQ(cudaFree(d_out), cudaSuccess);
    ASSERT_EQ(cudaFree(d_in), cudaSuccess);
    // example-end reduction-usage
    EXPECT_EQ(h_sum, exact_sum(h_values));
}

}  // namespace
}  // namespace stepwise::reduction
