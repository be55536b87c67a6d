// GPU tests of the transpose chapter: every step against the CPU transpose, bit for bit.
#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "support/large_problem.hpp"
#include "transpose/transpose_reference.hpp"
#include "transpose/transpose_steps.hpp"

#include "../../snippets/transpose/10_output_order.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace stepwise::transpose {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;

struct Shape {
    int rows;
    int cols;
};

//! Square and not, single rows and columns, sizes that are multiples of no tile, the source's 1024 x 1024 and a
//! large one; a step gets the shapes its launcher accepts, and a one-thread step only the small ones (the 8192 x
//! 4096 transpose would take it seconds, and much longer under compute-sanitizer).
std::vector<Shape> shapes_for(const Step& step)
{
    const std::vector<Shape> all = {{1, 1},    {1, 1000},   {1000, 1},    {33, 65},     {65, 33},
                                    {4, 8},    {4, 1000},   {1000, 4},    {36, 68},     {128, 64},
                                    {1000, 1500}, {1024, 1024}, {8192, 4096}};
    return stepwise::testing::kept(all, [&](const Shape& s) {
        const bool multiple = s.rows % step.dim_multiple == 0 && s.cols % step.dim_multiple == 0;
        return multiple && (!step.one_thread || static_cast<long>(s.rows) * s.cols <= 1500 * 1000);
    });
}

constexpr std::size_t guard_floats = 1024;  // poisoned floats after the output: an overrun changes them

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

class TransposeStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! The step's transpose of `input` into a poisoned, guarded buffer; checks the input was left alone and
    //! nothing was written past the output.
    void run(const std::vector<float>& input, Shape shape, std::vector<float>& output)
    {
        DeviceBuffer<float> d_in(input.size());
        d_in.upload(input);
        DeviceBuffer<float> d_out(input.size() + guard_floats);
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(GetParam().transpose(d_in.data(), d_out.data(), shape.rows, shape.cols, 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> all = d_out.download();
        const std::vector<float> guard(all.begin() + static_cast<std::ptrdiff_t>(input.size()), all.end());
        const std::vector<unsigned char> poison(guard.size() * sizeof(float), 0xFF);
        ASSERT_EQ(std::memcmp(guard.data(), poison.data(), poison.size()), 0) << "wrote past the output";
        all.resize(input.size());
        output = all;
        EXPECT_TRUE(compare_bits(d_in.download(), input).identical()) << "the step changed its input";
    }
};

//! A shape's random input and its CPU transpose, made once per run of the tests (from one fresh seed) and shared by
//! every step: at 8192 x 4096 they take the CPU a second, the steps' transposes milliseconds.
struct Case {
    std::vector<float> input, expected;
};

const Case& case_of(Shape shape, std::uint64_t seed)
{
    static std::map<std::pair<int, int>, Case> cases;
    auto [at, added] = cases.try_emplace({shape.rows, shape.cols});
    if (added) {
        at->second.input = random_matrix(shape.rows, shape.cols, seed + shape.rows * 7 + shape.cols);
        at->second.expected = reference_transpose(at->second.input, shape.rows, shape.cols);
    }
    return at->second;
}

TEST_P(TransposeStepTest, MatchesTheCpuTransposeAtEveryShape)
{
    static const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape shape : shapes_for(GetParam())) {
        SCOPED_TRACE(std::to_string(shape.rows) + " x " + std::to_string(shape.cols));
        const Case& c = case_of(shape, seed);
        std::vector<float> output;
        ASSERT_NO_FATAL_FAILURE(run(c.input, shape, output));
        const BitComparison bits = compare_bits(output, c.expected);
        EXPECT_TRUE(bits.identical()) << bits.describe(shape.rows);
    }
}

TEST_P(TransposeStepTest, MovesEveryBitPatternUnchanged)
{
    // NaNs with payloads, infinities, subnormals, -0: a transpose that went through arithmetic would change some.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Shape shape = GetParam().dim_multiple == 1 ? Shape{97, 131} : Shape{100, 132};
    const std::vector<float> input = random_bit_patterns(static_cast<std::size_t>(shape.rows) * shape.cols, seed);
    std::vector<float> output;
    ASSERT_NO_FATAL_FAILURE(run(input, shape, output));
    const BitComparison c = compare_bits(output, reference_transpose(input, shape.rows, shape.cols));
    EXPECT_TRUE(c.identical()) << c.describe(shape.rows);
}

TEST_P(TransposeStepTest, TransposingTwiceGivesTheInputBack)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Shape shape = GetParam().dim_multiple == 1 ? Shape{300, 77} : Shape{300, 76};
    const std::vector<float> input = random_matrix(shape.rows, shape.cols, seed);
    std::vector<float> once;
    ASSERT_NO_FATAL_FAILURE(run(input, shape, once));
    std::vector<float> twice;
    ASSERT_NO_FATAL_FAILURE(run(once, {shape.cols, shape.rows}, twice));
    EXPECT_TRUE(compare_bits(twice, input).identical());
}

TEST_P(TransposeStepTest, RejectsBadArgumentsAndInPlace)
{
    const Step& step = GetParam();
    DeviceBuffer<float> d_a(64 * 64);
    DeviceBuffer<float> d_b(64 * 64);
    EXPECT_EQ(step.transpose(nullptr, d_b.data(), 64, 64, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.transpose(d_a.data(), nullptr, 64, 64, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.transpose(d_a.data(), d_b.data(), 0, 64, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.transpose(d_a.data(), d_b.data(), 64, -1, 0), cudaErrorInvalidValue);
    // Not in place: the same buffer, or overlapping ones, are refused rather than silently wrong.
    EXPECT_EQ(step.transpose(d_a.data(), d_a.data(), 64, 64, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.transpose(d_a.data(), d_a.data() + 100, 32, 32, 0), cudaErrorInvalidValue);
    if (step.dim_multiple > 1) {
        EXPECT_EQ(step.transpose(d_a.data(), d_b.data(), 64, step.dim_multiple + 1, 0), cudaErrorInvalidValue);
        EXPECT_EQ(step.transpose(d_a.data(), d_b.data(), step.dim_multiple + 1, 64, 0), cudaErrorInvalidValue);
        EXPECT_EQ(step.transpose(d_a.data() + 1, d_b.data() + 2 * 64, 8, 8, 0), cudaErrorInvalidValue);  // 4-byte aligned
        EXPECT_EQ(step.transpose(d_a.data(), d_b.data() + 1, 8, 8, 0), cudaErrorInvalidValue);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Transpose, TransposeStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- the kernels Nsight Compute profiles for the chapter's counts (make profile) ----

TEST(TransposeProfile, EveryStepOnceAtTheSourcesSize)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    constexpr int dim = 1024;
    const std::vector<float> input = random_matrix(dim, dim, fresh_seed());
    const std::vector<float> expected = reference_transpose(input, dim, dim);
    DeviceBuffer<float> d_in(input.size());
    d_in.upload(input);
    DeviceBuffer<float> d_out(input.size());
    for (const Step& step : steps()) {
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(step.transpose(d_in.data(), d_out.data(), dim, dim, 0), cudaSuccess) << step.id;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << step.id;
        EXPECT_TRUE(compare_bits(d_out.download(), expected).identical()) << step.id;
    }
}

// ---- the final step takes any shape and any 4-byte-aligned pointers ----

TEST(TransposeFinalStep, AnyShapeFromAndToAnyFourByteAlignedPointers)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    constexpr std::size_t guard = 8;  // poisoned floats before and after the output
    // Multiples of 4 at 16-byte-aligned pointers take the float4 kernel, everything else the single-float one.
    for (const Shape shape : {Shape{1, 7}, Shape{33, 65}, Shape{1000, 1500}, Shape{2047, 2049}}) {
        for (const auto& [in_offset, out_offset] : {std::pair{0, 0}, {1, 0}, {0, 3}, {2, 1}}) {
            SCOPED_TRACE(std::to_string(shape.rows) + " x " + std::to_string(shape.cols) + ", offsets " +
                         std::to_string(in_offset) + " and " + std::to_string(out_offset) + " floats");
            const std::size_t elements = static_cast<std::size_t>(shape.rows) * shape.cols;
            const std::vector<float> input = random_matrix(shape.rows, shape.cols, seed + shape.rows + in_offset);
            std::vector<float> padded_input(in_offset, 0.f);
            padded_input.insert(padded_input.end(), input.begin(), input.end());
            DeviceBuffer<float> d_in(padded_input.size());
            d_in.upload(padded_input);
            DeviceBuffer<float> d_out(out_offset + elements + 2 * guard);
            d_out.fill_bytes(0xFF, 0);
            ASSERT_EQ(output_order::transpose(d_in.data() + in_offset, d_out.data() + out_offset + guard, shape.rows,
                                              shape.cols, 0),
                      cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            const std::vector<float> all = d_out.download();
            const auto first = all.begin() + static_cast<std::ptrdiff_t>(out_offset + guard);
            const std::vector<float> output(first, first + static_cast<std::ptrdiff_t>(elements));
            const BitComparison c = compare_bits(output, reference_transpose(input, shape.rows, shape.cols));
            EXPECT_TRUE(c.identical()) << c.describe(shape.rows);
            std::vector<float> outside(all.begin(), first);
            outside.insert(outside.end(), first + static_cast<std::ptrdiff_t>(elements), all.end());
            const std::vector<unsigned char> poison(outside.size() * sizeof(float), 0xFF);
            EXPECT_EQ(std::memcmp(outside.data(), poison.data(), poison.size()), 0) << "wrote outside the output";
        }
    }
}

TEST(TransposeFinalStep, RejectsPointersThatAreNotFloatAligned)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    DeviceBuffer<float> d_a(64 * 64 + 1);
    DeviceBuffer<float> d_b(64 * 64 + 1);
    const auto two_bytes_in = [](float* p) {
        return reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(p) + 2);
    };
    EXPECT_EQ(output_order::transpose(two_bytes_in(d_a.data()), d_b.data(), 64, 64, 0), cudaErrorInvalidValue);
    EXPECT_EQ(output_order::transpose(d_a.data(), two_bytes_in(d_b.data()), 64, 64, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- the final step at the limits its contract states ----

TEST(TransposeFinalStep, RowsUpToIntMax)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    // INT_MAX x 1: the grid counts 2^24 tiles of 128 rows, whose count overflows an int if computed as
    // rows + tile - 1. A column's transpose is a row: the output holds the input's values in the same order.
    constexpr int rows = std::numeric_limits<int>::max();
    constexpr std::size_t count = rows;
    if (const std::string why = stepwise::testing::large_problem_skip_reason(2 * (count + guard_floats) * 4);
        !why.empty()) {
        GTEST_SKIP() << why;
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    DeviceBuffer<float> d_in(count);
    stepwise::testing::fill_hashed(d_in.data(), count, stepwise::testing::Hashed::uniform, seed);
    DeviceBuffer<float> d_out(count + guard_floats);
    d_out.fill_bytes(0xFF, 0);
    ASSERT_EQ(output_order::transpose(d_in.data(), d_out.data(), rows, 1, 0), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> out = d_out.download();
    const std::size_t wrong = stepwise::testing::count_where(count, [&](std::size_t i) {
        return !(out[i] == stepwise::testing::hashed_value(stepwise::testing::Hashed::uniform, seed, i));  // NaN too
    });
    EXPECT_EQ(wrong, 0u) << "elements of the output that are not the input's";
    for (std::size_t i = count; i < out.size(); ++i) {
        ASSERT_TRUE(std::isnan(out[i])) << "wrote past the output, at element " << i;
    }
}

TEST(TransposeFinalStep, ColumnsUpToTheGridsLimitAndNotOneMore)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    constexpr int cols = 65535 * output_order::scalar_tile_cols;
    for (const int rows : {3, 4}) {  // the single-float kernel, and the float4 one (both dimensions multiples of 4)
        SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols));
        const std::vector<float> input = random_matrix(rows, cols, seed + rows);
        DeviceBuffer<float> d_in(input.size());
        d_in.upload(input);
        DeviceBuffer<float> d_out(input.size());
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(output_order::transpose(d_in.data(), d_out.data(), rows, cols, 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const BitComparison c = compare_bits(d_out.download(), reference_transpose(input, rows, cols));
        EXPECT_TRUE(c.identical()) << c.describe(rows);
    }
    DeviceBuffer<float> d_in(3 * (cols + 1));
    DeviceBuffer<float> d_out(3 * (cols + 1));
    EXPECT_EQ(output_order::transpose(d_in.data(), d_out.data(), 3, cols + 1, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- the library baseline the timing program measures ----

TEST(TransposeBaseline, CublasSgeamTransposesRowMajorMatrices)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const CublasTranspose cublas;
    for (const Shape shape : {Shape{33, 65}, Shape{1024, 512}}) {
        const std::vector<float> input = random_matrix(shape.rows, shape.cols, fresh_seed());
        DeviceBuffer<float> d_in(input.size());
        d_in.upload(input);
        DeviceBuffer<float> d_out(input.size());
        d_out.fill_bytes(0xFF, 0);
        ASSERT_EQ(cublas(d_in.data(), d_out.data(), shape.rows, shape.cols, 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_TRUE(compare_bits(d_out.download(), reference_transpose(input, shape.rows, shape.cols)).identical());
    }
}

// ---- how to call a step from your own code ----

TEST(TransposeUsage, TransposeAMatrixWithTheFinalStep)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::vector<float> h_in = random_matrix(1000, 1500, fresh_seed());
    // example-begin transpose-usage
    const int num_rows = 1000;  // any size, and pointers aligned to a float at least
    const int num_cols = 1500;
    const std::size_t bytes = static_cast<std::size_t>(num_rows) * num_cols * sizeof(float);
    std::vector<float> h_out(h_in.size());

    float* d_in = nullptr;
    float* d_out = nullptr;  // a separate buffer: the steps do not transpose in place
    ASSERT_EQ(cudaMalloc(&d_in, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_out, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_in, h_in.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);

    ASSERT_EQ(stepwise::transpose::output_order::transpose(d_in, d_out, num_rows, num_cols), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);  // waits for it

    ASSERT_EQ(cudaFree(d_out), cudaSuccess);
    ASSERT_EQ(cudaFree(d_in), cudaSuccess);
    // example-end transpose-usage
    EXPECT_TRUE(compare_bits(h_out, reference_transpose(h_in, num_rows, num_cols)).identical());
}

}  // namespace
}  // namespace stepwise::transpose
