// GPU tests of the softmax chapter: every step against the double-precision CPU reference, in fp32 (and bf16 for
// the final step), at shapes that take every layout of the launchers, with special values, in place, and with
// invalid arguments.
#include "core/device_buffer.hpp"
#include "softmax/softmax_reference.hpp"
#include "softmax/softmax_steps.hpp"
#include "support/gpu_test_support.hpp"
#include "support/large_problem.hpp"
#include "support/peeled_row_layout.hpp"

#include "../../snippets/softmax/14_row_ends_staged.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

namespace stepwise::softmax {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::expect_refuses_a_workspace_one_byte_short;
using stepwise::testing::launch_with_poisoned_workspace;
using bf16 = __nv_bfloat16;

struct Shape {
    int rows, cols;
};

//! Every layout of the launchers: rows of a few lanes, a warp, a block (up to 16384 values; 8192 for fp32 in the final
//! step), a cluster (up to 131072 values: 16 blocks of 256 threads where the GPU takes them, else 8) and longer (the
//! split path); lengths that are
//! multiples of 4 and 8 (16-byte accesses) and not. 300 x 20000: more rows than clusters, so that each cluster takes
//! several in turn.
const std::vector<Shape> shapes = {{1, 1},     {1, 7},      {7, 3},       {100000, 3},  {257, 16},   {129, 100},
                                   {64, 128},  {33, 513},   {65, 1024},   {31, 1025},   {16, 4096},  {3, 8192},   {9, 8191},
                                   {1000, 1000}, {5, 16384}, {3, 16385},  {3, 100000},  {2, 32768},  {300, 20000},
                                   {2, 131072}, {2, 131073}, {1, 262144}, {2, 300001}};
//! Shapes left out under compute-sanitizer (slow there), beyond the above; 700 x 40000: many turns of each cluster.
const std::vector<Shape> large_shapes = {{4097, 4095}, {1024, 8192}, {700, 40000}, {64, 1 << 20}};

constexpr std::size_t guard_bytes = 256;  //!< poisoned bytes after the output

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

//! What a run found: the output as floats, and whether the guard and the input were kept.
struct StepRun {
    cudaError_t launch = cudaErrorUnknown;
    std::vector<float> out;
};

//! Runs `step` (its fp32 or bf16 launcher) on `input` (as the type holds it) into a poisoned output followed by a
//! poisoned guard, with a poisoned workspace; `in_place` gives the input's buffer as the output. `offset` elements
//! shift both pointers from cudaMalloc's alignment, `out_shift` more the output's (not in place). Checks the guard,
//! the poisoned bytes before the output and (not in place) the input were kept.
StepRun run_step(const Step& step, bool is_bf16, const std::vector<float>& input, Shape shape, bool in_place = false,
             std::size_t offset = 0, std::size_t out_shift = 0)
{
    StepRun r;
    const std::size_t element = is_bf16 ? 2 : 4;
    const std::vector<unsigned char> in_bytes = narrow(input, is_bf16);
    const std::size_t bytes = in_bytes.size();
    const std::size_t out_offset = in_place ? offset : offset + out_shift;
    DeviceBuffer<unsigned char> d_in(bytes + offset * element + guard_bytes);
    DeviceBuffer<unsigned char> d_out(bytes + out_offset * element + guard_bytes);
    d_in.fill_bytes(0xFF, 0);
    d_out.fill_bytes(0xFF, 0);
    STEPWISE_CUDA_CHECK(cudaMemcpy(d_in.data() + offset * element, in_bytes.data(), bytes, cudaMemcpyHostToDevice));
    unsigned char* in = d_in.data() + offset * element;
    unsigned char* out = in_place ? in : d_out.data() + out_offset * element;
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        return is_bf16 ? step.bf16(d_temp, temp_bytes, reinterpret_cast<const bf16*>(in), reinterpret_cast<bf16*>(out),
                                   shape.rows, shape.cols, 0)
                       : step.fp32(d_temp, temp_bytes, reinterpret_cast<const float*>(in),
                                   reinterpret_cast<float*>(out), shape.rows, shape.cols, 0);
    };
    r.launch = launch_with_poisoned_workspace(call);  // outputs and guards are read and checked even where it failed
    std::vector<unsigned char> before(out_offset * element);
    STEPWISE_CUDA_CHECK(cudaMemcpy(before.data(), out - before.size(), before.size(), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < before.size(); ++i) {
        if (before[i] != 0xFF) {
            ADD_FAILURE() << "wrote before the output, at byte " << before.size() - i << " before it";
            break;
        }
    }
    std::vector<unsigned char> result(bytes + guard_bytes);
    STEPWISE_CUDA_CHECK(cudaMemcpy(result.data(), out, result.size(), cudaMemcpyDeviceToHost));
    for (std::size_t i = bytes; i < result.size(); ++i) {
        if (result[i] != 0xFF) {
            ADD_FAILURE() << "wrote past the output, at byte " << i - bytes << " after it";
            break;
        }
    }
    if (!in_place) {
        std::vector<unsigned char> kept(bytes);
        STEPWISE_CUDA_CHECK(cudaMemcpy(kept.data(), in, bytes, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(kept == in_bytes) << "the step changed its input";
    }
    r.out = widen(result.data(), input.size(), is_bf16);
    return r;
}

//! Compares a whole result with the reference of the input (as the type rounds it) and checks it.
void expect_matches_reference(const std::vector<float>& input, const std::vector<float>& got, Shape shape, bool is_bf16)
{
    const std::vector<float> seen = is_bf16 ? from_bf16(to_bf16(input)) : input;
    const Tolerance t = tolerance(shape.cols, is_bf16);
    Comparison c;
    std::vector<double> expected(static_cast<std::size_t>(shape.cols));
    for (int r = 0; r < shape.rows; ++r) {
        const std::size_t first = static_cast<std::size_t>(r) * shape.cols;
        reference_row(seen.data() + first, shape.cols, expected.data());
        compare_row(got.data() + first, expected.data(), shape.cols, r, t, c);
    }
    EXPECT_TRUE(c.passed(t)) << shape.rows << " x " << shape.cols << (is_bf16 ? " bf16: " : " fp32: ")
                             << c.describe(t);
}

class SoftmaxStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! Random logits at every shape, in each type the step takes, compared with the reference.
    void expect_every_shape(bool is_bf16)
    {
        const std::uint64_t seed = fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        for (const Shape& shape : stepwise::testing::shapes_to_run(shapes, large_shapes)) {
            const std::vector<float> input =
                random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed + shape.cols);
            const StepRun r = run_step(GetParam(), is_bf16, input, shape);
            ASSERT_EQ(r.launch, cudaSuccess) << shape.rows << " x " << shape.cols;
            expect_matches_reference(input, r.out, shape, is_bf16);
        }
    }

    //! Rows of special values at row lengths of every layout: the reference says which rows are NaN.
    void expect_special_values(bool is_bf16)
    {
        const float inf = std::numeric_limits<float>::infinity();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (const int cols : {3, 100, 1000, 5000, 20000, 150000}) {
            const Shape shape{8, cols};
            std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * cols, fresh_seed());
            const auto row = [&](int r) { return input.begin() + static_cast<std::ptrdiff_t>(r) * cols; };
            std::fill(row(0), row(1), -inf);                     // all -inf: NaN (0 / 0)
            for (int j = 0; j < cols; j += 2) {                  // half -inf, the first among them: those give 0
                row(1)[j] = -inf;
            }
            row(2)[cols / 2] = inf;                              // +inf: NaN
            row(3)[cols - 1] = nan;                              // NaN: NaN, and only this row
            row(4)[cols / 3] = 1e30f;                            // one huge value: 1 there, 0 elsewhere
            std::fill(row(5), row(6), 1e4f);                     // all equal and large: 1 / cols each
            std::fill(row(6), row(7), -1e30f);                   // all equal and hugely negative
            for (int j = 0; j < cols; ++j) {                     // tiny spread: near 1 / cols
                row(7)[j] = 1e-30f * static_cast<float>(j % 7);
            }
            const StepRun r = run_step(GetParam(), is_bf16, input, shape);
            ASSERT_EQ(r.launch, cudaSuccess) << cols << " values per row";
            expect_matches_reference(input, r.out, shape, is_bf16);
        }
    }
};

TEST_P(SoftmaxStepTest, MatchesTheReferenceAtEveryShapeInFp32) { expect_every_shape(false); }

TEST_P(SoftmaxStepTest, InfinitiesNaNAndHugeValuesInFp32) { expect_special_values(false); }

//! The steps that also take bf16 (the final one).
class SoftmaxBf16StepTest : public SoftmaxStepTest {};

TEST_P(SoftmaxBf16StepTest, MatchesTheReferenceAtEveryShapeInBf16) { expect_every_shape(true); }

TEST_P(SoftmaxBf16StepTest, InfinitiesNaNAndHugeValuesInBf16) { expect_special_values(true); }

TEST_P(SoftmaxStepTest, InPlace)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape& shape : {Shape{100, 3}, Shape{64, 1024}, Shape{3, 16385}, Shape{2, 100000}, Shape{1, 262145}}) {
        const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed);
        for (const bool is_bf16 : {false, true}) {
            if (is_bf16 && GetParam().bf16 == nullptr) {
                continue;
            }
            const StepRun r = run_step(GetParam(), is_bf16, input, shape, true);
            ASSERT_EQ(r.launch, cudaSuccess);
            expect_matches_reference(input, r.out, shape, is_bf16);
        }
    }
}

TEST_P(SoftmaxStepTest, RejectsAnEmptyShapeAndNullPointers)
{
    const Step& step = GetParam();
    DeviceBuffer<float> d(16);
    std::size_t temp_bytes = 0;
    EXPECT_EQ(step.fp32(nullptr, temp_bytes, d.data(), d.data(), 0, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.fp32(nullptr, temp_bytes, d.data(), d.data(), 4, 0, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.fp32(nullptr, temp_bytes, nullptr, d.data(), 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.fp32(nullptr, temp_bytes, d.data(), nullptr, 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---- every step at the limits of its int sizes ----

//! @brief Counts, into `*wrong`, the `count` outputs at `d` that are not exactly 1: the softmax of a one-value row.
template <class T>
static __global__ void count_not_one_kernel(const T* d, std::size_t count, unsigned long long* wrong)
{
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        if (!(static_cast<float>(d[i]) == 1.0f)) {
            atomicAdd(wrong, 1ull);
        }
    }
}

//! @brief One row's maximum and a sum of exp(x - maximum) over it.
struct RowStats {
    double max, sum;
};

//! @brief The hashed input's element `i` (`fill_hashed` of `seed`), as a `T` holds it.
template <class T>
__host__ __device__ double hashed_input(std::uint64_t seed, std::size_t i)
{
    return static_cast<float>(T(stepwise::testing::hashed_value(stepwise::testing::Hashed::uniform, seed, i)));
}

//! @brief Counts, into `*wrong`, the outputs at `d` (`rows` x `cols`, at most 4 rows) further than `relative` (and
//!        1e-37 absolute) from exp(x - max) / sum of the hashed input with each row's `stats`; NaN counts.
template <class T>
static __global__ void count_out_of_tolerance_kernel(const T* d, int rows, int cols, std::uint64_t seed,
                                                     RowStats s0, RowStats s1, RowStats s2, RowStats s3,
                                                     double relative, unsigned long long* wrong)
{
    const RowStats stats[4] = {s0, s1, s2, s3};
    const std::size_t count = static_cast<std::size_t>(rows) * cols;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        const RowStats s = stats[i / cols];
        const double expected = exp(hashed_input<T>(seed, i) - s.max) / s.sum;
        if (!(fabs(static_cast<double>(static_cast<float>(d[i])) - expected) <= relative * expected + 1e-37)) {
            atomicAdd(wrong, 1ull);
        }
    }
}

//! @brief The maximum and sum of each row of the hashed input, in double, on the host's threads.
template <class T>
std::vector<RowStats> hashed_row_stats(int rows, int cols, std::uint64_t seed)
{
    struct Max {
        double value = -std::numeric_limits<double>::infinity();
        Max& operator+=(Max other)
        {
            value = std::max(value, other.value);
            return *this;
        }
    };
    std::vector<RowStats> stats;
    for (int r = 0; r < rows; ++r) {
        const std::size_t first = static_cast<std::size_t>(r) * cols;
        const auto x = [&](std::size_t j) { return hashed_input<T>(seed, first + j); };
        const double max = stepwise::testing::parallel_sum<Max>(cols, [&](std::size_t j) { return Max{x(j)}; }).value;
        stats.push_back({max, stepwise::testing::parallel_sum<double>(cols, [&](std::size_t j) {
                             return std::exp(x(j) - max);
                         })});
    }
    return stats;
}

//! @brief `step` in place on `rows` x `cols` hashed values of type `T` at `d`.
template <class T>
void run_in_place(const Step& step, T* d, int rows, int cols, std::uint64_t seed)
{
    stepwise::testing::fill_hashed(d, static_cast<std::size_t>(rows) * cols, stepwise::testing::Hashed::uniform, seed);
    const auto call = [&](void* d_temp, std::size_t& bytes) {
        if constexpr (std::is_same_v<T, bf16>) {
            return step.bf16(d_temp, bytes, d, d, rows, cols, 0);
        } else {
            return step.fp32(d_temp, bytes, d, d, rows, cols, 0);
        }
    };
    std::size_t temp_bytes = 0;
    EXPECT_EQ(call(nullptr, temp_bytes), cudaSuccess) << rows << " x " << cols;
    DeviceBuffer<unsigned char> temp(std::max<std::size_t>(temp_bytes, 1));
    EXPECT_EQ(call(temp.data(), temp_bytes), cudaSuccess) << rows << " x " << cols;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << rows << " x " << cols;
}

//! @brief What `count` (a kernel launch over a zeroed counter) counted.
template <class Count>
unsigned long long counted(Count count)
{
    DeviceBuffer<unsigned long long> wrong(1);
    wrong.fill_bytes(0, 0);
    count(wrong.data());
    STEPWISE_CUDA_CHECK(cudaGetLastError());
    unsigned long long h = 0;
    STEPWISE_CUDA_CHECK(cudaMemcpy(&h, wrong.data(), sizeof(h), cudaMemcpyDeviceToHost));
    return h;
}

//! @brief One row of INT_MAX values and three of 2^28 + 8 (past 2^31 bytes), in place at `d` (room for INT_MAX `T`s).
//!        A long row's outputs are checked in two parts: the row's sum, as the step took it (from its first output),
//!        within the chapter's tolerance of the double one (a sum of a thread's values one by one drifts: some 1 %
//!        over the 2^23 a thread of 256 takes in a row of 2^31), and every output within 1e-5 (and the bf16
//!        roundings) of exp(x - max) over that sum, which an output from the wrong element or row misses by up to e^2.
template <class T>
void expect_long_rows(const Step& step, T* d, std::uint64_t seed)
{
    constexpr bool is_bf16 = std::is_same_v<T, bf16>;
    static std::map<std::pair<int, int>, std::vector<RowStats>> stats;  // taken once for every step
    for (const Shape shape : {Shape{1, std::numeric_limits<int>::max()}, Shape{3, (1 << 28) + 8}}) {
        auto [known, unknown] = stats.try_emplace({shape.rows, shape.cols});
        if (unknown) {
            known->second = hashed_row_stats<T>(shape.rows, shape.cols, seed);
        }
        run_in_place(step, d, shape.rows, shape.cols, seed);
        std::vector<RowStats> as_taken(4, RowStats{0, 1});
        for (int r = 0; r < shape.rows; ++r) {
            const std::size_t first = static_cast<std::size_t>(r) * shape.cols;
            T y{};
            STEPWISE_CUDA_CHECK(cudaMemcpy(&y, d + first, sizeof(T), cudaMemcpyDeviceToHost));
            const RowStats exact = known->second[r];
            as_taken[r] = {exact.max, std::exp(hashed_input<T>(seed, first) - exact.max) / static_cast<float>(y)};
            EXPECT_NEAR(as_taken[r].sum / exact.sum, 1.0, tolerance(shape.cols, is_bf16).relative)
                << step.id << ": " << shape.rows << " x " << shape.cols << ", row " << r << "'s sum";
        }
        const double relative = 1e-5 + (is_bf16 ? 2 * std::ldexp(1.0, -8) : 0.0);
        EXPECT_EQ(counted([&](unsigned long long* wrong) {
                      count_out_of_tolerance_kernel<<<4096, 256>>>(d, shape.rows, shape.cols, seed, as_taken[0],
                                                                   as_taken[1], as_taken[2], as_taken[3], relative,
                                                                   wrong);
                  }),
                  0u)
            << step.id << ": " << shape.rows << " x " << shape.cols << ", outputs out of tolerance";
    }
}

//! @brief Rows = INT_MAX of one value each (every output exactly 1), then, where `long_rows`, expect_long_rows(), in
//!        place, in type `T`.
template <class T>
void expect_int_limits(const Step& step, bool long_rows)
{
    constexpr int int_max = std::numeric_limits<int>::max();
    static const std::uint64_t seed = fresh_seed();  // one for every step: the long rows' sums are taken once
    SCOPED_TRACE("seed " + std::to_string(seed));
    T* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, static_cast<std::size_t>(int_max) * sizeof(T)), cudaSuccess);
    run_in_place(step, d, int_max, 1, seed);
    EXPECT_EQ(counted([&](unsigned long long* wrong) { count_not_one_kernel<<<4096, 256>>>(d, int_max, wrong); }), 0u)
        << step.id << ": 2^31 - 1 rows of one value, outputs other than 1";
    if (long_rows) {
        expect_long_rows(step, d, seed);
    }
    EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_P(SoftmaxStepTest, RowsAndRowLengthsUpToIntMax)
{
    // 2^31 - 1 rows of floats, and step 1's maximum and sum of each
    const std::size_t largest = 3 * static_cast<std::size_t>(std::numeric_limits<int>::max()) * sizeof(float);
    if (const std::string why = stepwise::testing::large_problem_skip_reason(largest); !why.empty()) {
        GTEST_SKIP() << why;
    }
    const Step& step = GetParam();
    // Step 1 gives a row one thread, which would read a row of 2^28 values one by one for minutes.
    const bool long_rows = std::string(step.id) != steps().front().id;
    expect_int_limits<float>(step, long_rows);
    if (step.bf16 != nullptr) {
        expect_int_limits<bf16>(step, long_rows);
    }
}

INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxStepTest, ::testing::ValuesIn(steps()), step_name);
INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxBf16StepTest,
                         ::testing::ValuesIn(stepwise::testing::kept(steps(), [](const Step& s) { return s.bf16 != nullptr; })),
                         step_name);

// ---- the final step: any alignment its types allow, and its errors ----

TEST(SoftmaxFinalStep, RowsAtEveryElementAlignment)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Lengths that are multiples of 8, at pointers 1 to 7 elements past a 16-byte boundary: the 2- and 4-byte paths.
    for (const Shape& shape : {Shape{33, 64}, Shape{4, 8192}, Shape{2, 65536}, Shape{1, 262144}}) {
        const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed);
        for (const bool is_bf16 : {false, true}) {
            for (std::size_t offset = 1; offset < 8; offset += 3) {
                const StepRun r = run_step(steps().back(), is_bf16, input, shape, false, offset);
                ASSERT_EQ(r.launch, cudaSuccess) << "offset " << offset;
                expect_matches_reference(input, r.out, shape, is_bf16);
            }
        }
    }
}

//! Rows that start at every offset from a 16-byte boundary (lengths k * W + r, W values an access, r = 1 to W - 1,
//! and pointers 0 to W - 1 elements past a boundary), at every layout: rows of 1, 2, W - 1 and W + 1 values, a warp's
//! and a block's, rows that take the cluster path (16385, 50257, 100003 values) and the split path (131071 fp32,
//! 262143); each row's window straddles its neighbours, so that a head or tail value read or written for the wrong
//! row, or outside the matrix, shows.
TEST(SoftmaxFinalStep, RowsAtEveryMisalignmentMatchTheReference)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool is_bf16 : {false, true}) {
        const int w = is_bf16 ? 8 : 4;  // values of a 16-byte access
        std::vector<Shape> odd;
        for (const int k : {0, 1, 5, 40, 1023}) {
            for (int r = 1; r < w; ++r) {
                odd.push_back({2 * w + 1, k * w + r});
            }
        }
        for (const int cols : {16385, 50257, 100003, 128256, 131071, 262143}) {
            odd.push_back({w + 1, cols});
        }
        for (const Shape& shape : odd) {
            const std::vector<float> input =
                random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed + shape.cols);
            for (int offset = 0; offset < w; ++offset) {
                const StepRun r = run_step(steps().back(), is_bf16, input, shape, false, offset);
                ASSERT_EQ(r.launch, cudaSuccess) << shape.rows << " x " << shape.cols << ", offset " << offset;
                SCOPED_TRACE("offset " + std::to_string(offset));
                expect_matches_reference(input, r.out, shape, is_bf16);
            }
        }
    }
}

//! Input and output misaligned alike (a window for both), 16 bytes apart (the same), differently (one value an
//! access), and in place, at rows of the rows kernel, the cluster path and the split path.
TEST(SoftmaxFinalStep, InputAndOutputAtDifferentMisalignments)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool is_bf16 : {false, true}) {
        const std::size_t w = is_bf16 ? 8 : 4;
        for (const Shape& shape : {Shape{33, 3}, Shape{17, 4095}, Shape{5, 50257}, Shape{3, 262143}}) {
            const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed);
            for (const auto& [offset, out_shift] : {std::pair<std::size_t, std::size_t>{1, 0}, {1, w}, {1, 1},
                                                    {3, w - 2}, {0, 1}}) {
                SCOPED_TRACE("offset " + std::to_string(offset) + ", output " + std::to_string(out_shift) + " more");
                const StepRun r = run_step(steps().back(), is_bf16, input, shape, false, offset, out_shift);
                ASSERT_EQ(r.launch, cudaSuccess);
                expect_matches_reference(input, r.out, shape, is_bf16);
            }
            for (std::size_t offset = 1; offset < w; offset += 2) {
                SCOPED_TRACE("in place, offset " + std::to_string(offset));
                const StepRun r = run_step(steps().back(), is_bf16, input, shape, true, offset);
                ASSERT_EQ(r.launch, cudaSuccess);
                expect_matches_reference(input, r.out, shape, is_bf16);
            }
        }
    }
}

//! The final step's layout of a row off a 16-byte boundary (Peel): every value in exactly one slot of an aligned row's
//! layout (support/peeled_row_layout.hpp). No GPU needed.
template <int Width>
void expect_each_value_held_once()
{
    namespace s = row_ends_staged;
    stepwise::testing::expect_each_value_in_one_slot<Width>(
        [](int head, int cols) { return s::peel_for<Width>(head, cols); },
        [](const s::Peel& peel, int k) { return s::end_value<Width>(peel, k); }, {100, 4095, 4096, 50257});
}

TEST(SoftmaxFinalStep, APeeledRowHoldsEachValueInOneSlotOfAnAlignedRowsLayout)
{
    expect_each_value_held_once<4>();  // fp32
    expect_each_value_held_once<8>();  // bf16
}

TEST(SoftmaxFinalStep, RejectsMisalignedPointersAndASmallWorkspace)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    namespace s = row_ends_staged;
    DeviceBuffer<unsigned char> d(1 << 22);
    const auto* odd_float = reinterpret_cast<const float*>(d.data() + 2);
    const auto* odd_bf16 = reinterpret_cast<const bf16*>(d.data() + 1);
    std::size_t temp_bytes = 0;
    EXPECT_EQ(s::softmax(nullptr, temp_bytes, odd_float, reinterpret_cast<float*>(d.data()), 2, 2), cudaErrorInvalidValue);
    EXPECT_EQ(s::softmax(nullptr, temp_bytes, odd_bf16, reinterpret_cast<bf16*>(d.data()), 2, 2), cudaErrorInvalidValue);
    // Rows longer than a cluster need a workspace: one byte short of it is refused.
    const int cols = 300000;
    expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& bytes) {
        return s::softmax(d_temp, bytes, reinterpret_cast<const float*>(d.data()), reinterpret_cast<float*>(d.data()),
                          2, cols);
    });
}

TEST(SoftmaxProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Shape shape{4096, 4096};
    const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, fresh_seed());
    for (const Step& step : steps()) {
        const StepRun r = run_step(step, false, input, shape);
        ASSERT_EQ(r.launch, cudaSuccess) << step.id;
        if (step.bf16 != nullptr) {
            ASSERT_EQ(run_step(step, true, input, shape).launch, cudaSuccess) << step.id;
        }
    }
}

TEST(SoftmaxUsage, TheFinalStepOnBf16Rows)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const int num_rows = 1000;
    const int num_cols = 3000;
    const std::vector<float> logits = random_logits(static_cast<std::size_t>(num_rows) * num_cols, fresh_seed());
    const std::vector<std::uint16_t> bits = to_bf16(logits);
    std::vector<__nv_bfloat16> h_in(bits.size());
    std::memcpy(static_cast<void*>(h_in.data()), bits.data(), bits.size() * sizeof(std::uint16_t));
    std::vector<__nv_bfloat16> h_out(h_in.size());
    // example-begin softmax-usage
    namespace sm = stepwise::softmax::row_ends_staged;
    const std::size_t bytes = h_in.size() * sizeof(__nv_bfloat16);
    __nv_bfloat16* d_x = nullptr;  // any shape, 2-byte aligned; computed in place here
    ASSERT_EQ(cudaMalloc(&d_x, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_x, h_in.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);

    std::size_t temp_bytes = 0;  // first ask for the workspace's size, then run
    ASSERT_EQ(sm::softmax(nullptr, temp_bytes, d_x, d_x, num_rows, num_cols), cudaSuccess);
    void* d_temp = nullptr;
    ASSERT_EQ(cudaMalloc(&d_temp, temp_bytes), cudaSuccess);
    ASSERT_EQ(sm::softmax(d_temp, temp_bytes, d_x, d_x, num_rows, num_cols), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_out.data(), d_x, bytes, cudaMemcpyDeviceToHost), cudaSuccess);  // waits for it

    ASSERT_EQ(cudaFree(d_temp), cudaSuccess);
    ASSERT_EQ(cudaFree(d_x), cudaSuccess);
    // example-end softmax-usage
    std::vector<std::uint16_t> out_bits(h_out.size());
    std::memcpy(out_bits.data(), static_cast<const void*>(h_out.data()), out_bits.size() * sizeof(std::uint16_t));
    expect_matches_reference(logits, from_bf16(out_bits), {num_rows, num_cols}, true);
}

}  // namespace
}  // namespace stepwise::softmax
