// GPU tests of the normalization chapter: every step's LayerNorm and RMSNorm against the double-precision CPU
// reference, in fp32 (and bf16 for the steps that take it), at shapes that take every layout of the launchers, with
// special rows, epsilon, in place, and with invalid arguments.
#include "core/device_buffer.hpp"
#include "normalization/normalization_reference.hpp"
#include "normalization/normalization_steps.hpp"
#include "support/gpu_test_support.hpp"

#include "../../snippets/normalization/10_values_per_thread.cuh"
#include "../../snippets/normalization/11_parameters_with_the_row.cuh"
#include "../../snippets/normalization/12_any_row_alignment.cuh"
#include "../../snippets/normalization/13_shifted_parameters.cuh"
#include "../../snippets/normalization/14_one_alignment_a_cluster.cuh"
#include "../../snippets/normalization/15_one_load_copy_a_thread.cuh"
#include "../../snippets/normalization/16_bounded_window_registers.cuh"
#include "../../snippets/normalization/17_row_ends_staged.cuh"
#include "../../snippets/normalization/18_row_ends_packed.cuh"
#include "../../snippets/normalization/19_many_rows_one_warp.cuh"
#include "../../snippets/normalization/20_padding_by_whole_chunks.cuh"
#include "../../snippets/normalization/21_lanes_known_at_compile_time.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace stepwise::normalization {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::expect_refuses_a_workspace_one_byte_short;
using stepwise::testing::launch_with_poisoned_workspace;
using bf16 = __nv_bfloat16;

enum class Norm { layer, rms };

struct Shape {
    int rows, cols;
};

//! Every layout of the launchers: rows of a few lanes, a warp, a block (up to 16384 values), a cluster (up to 131072
//! values: 16 blocks of 256 threads where the GPU takes them, else 8) and longer (the split path); lengths that are
//! multiples of 4 and 8 (16-byte accesses) and not. 300 x 20000: more rows than clusters, so that each cluster takes
//! several in turn.
const std::vector<Shape> shapes = {{1, 1},     {1, 7},      {7, 3},       {100000, 3},  {257, 16},   {129, 100},
                                   {64, 128},  {33, 513},   {65, 1024},   {31, 1025},   {16, 4096},  {9, 8191},
                                   {1000, 1000}, {5, 16384}, {3, 16385},  {3, 100000},  {2, 32768},  {300, 20000},
                                   {2, 131072}, {2, 131073}, {1, 262144}, {2, 300001}};
//! Shapes left out under compute-sanitizer (slow there), beyond the above; 700 x 40000: many turns of each cluster.
const std::vector<Shape> large_shapes = {{4097, 4095}, {1024, 8192}, {700, 40000}, {64, 1 << 20}};

constexpr std::size_t guard_bytes = 256;  //!< poisoned bytes after each output
constexpr float default_epsilon = 1e-5f;

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }
const char* name_of(Norm norm) { return norm == Norm::layer ? "LayerNorm" : "RMSNorm"; }

//! A problem: x, gamma and beta as floats (the type's values: bf16 ones are rounded first), and epsilon.
struct Problem {
    Shape shape;
    std::vector<float> x, gamma, beta;
    float epsilon = default_epsilon;
};

Problem random_problem(Shape shape, std::uint64_t seed, bool is_bf16)
{
    Problem p{shape, random_values(static_cast<std::size_t>(shape.rows) * shape.cols, seed, -3.0f, 5.0f),
              random_values(static_cast<std::size_t>(shape.cols), seed + 1, 0.5f, 1.5f),
              random_values(static_cast<std::size_t>(shape.cols), seed + 2, -0.5f, 0.5f)};
    if (is_bf16) {
        p.x = round_to_bf16(p.x);
        p.gamma = round_to_bf16(p.gamma);
        p.beta = round_to_bf16(p.beta);
    }
    return p;
}

//! What a run found: y as floats, and LayerNorm's mean and rstd.
struct StepRun {
    cudaError_t launch = cudaErrorUnknown;
    std::vector<float> y, mean, rstd;
};

//! A device copy of `values` (as the type holds them) after `offset` elements, followed by poisoned guard bytes.
struct Placed {
    DeviceBuffer<unsigned char> buffer;
    unsigned char* data;
    Placed(const std::vector<float>& values, bool is_bf16, std::size_t offset)
        : buffer(values.size() * (is_bf16 ? 2 : 4) + offset * (is_bf16 ? 2 : 4) + guard_bytes)
    {
        buffer.fill_bytes(0xFF, 0);
        data = buffer.data() + offset * (is_bf16 ? 2 : 4);
        const std::vector<unsigned char> bytes = narrow(values, is_bf16);
        STEPWISE_CUDA_CHECK(cudaMemcpy(data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    }
    //! The `count` values it holds, after checking the guard after them is still poisoned.
    std::vector<float> read(std::size_t count, bool is_bf16, const char* what) const
    {
        const std::size_t bytes = count * (is_bf16 ? 2 : 4);
        std::vector<unsigned char> held(bytes + guard_bytes);
        STEPWISE_CUDA_CHECK(cudaMemcpy(held.data(), data, held.size(), cudaMemcpyDeviceToHost));
        for (std::size_t i = bytes; i < held.size(); ++i) {
            if (held[i] != 0xFF) {
                ADD_FAILURE() << "wrote past " << what << ", at byte " << i - bytes << " after it";
                break;
            }
        }
        return widen(held.data(), count, is_bf16);
    }
};

//! Runs `step`'s `norm` (its fp32 or bf16 launcher) on `p` into poisoned outputs followed by poisoned guards, with a
//! poisoned workspace; `in_place` gives x's buffer as y. `offset` elements shift x, y, gamma and beta from
//! cudaMalloc's alignment; `out_shift` more shift y, `parameter_shift` more gamma and beta. Checks the guards, and
//! that x (not in place), gamma and beta were kept.
StepRun run_step(const Step& step, Norm norm, bool is_bf16, const Problem& p, bool in_place = false,
                 std::size_t offset = 0, std::size_t out_shift = 0, std::size_t parameter_shift = 0)
{
    StepRun r;
    const std::size_t values = p.x.size(), rows = static_cast<std::size_t>(p.shape.rows);
    Placed x(p.x, is_bf16, offset), gamma(p.gamma, is_bf16, offset + parameter_shift),
        beta(p.beta, is_bf16, offset + parameter_shift);
    Placed y(std::vector<float>(values, std::numeric_limits<float>::quiet_NaN()), is_bf16, offset + out_shift);
    Placed mean(std::vector<float>(rows, std::numeric_limits<float>::quiet_NaN()), false, 0);
    Placed rstd(std::vector<float>(rows, std::numeric_limits<float>::quiet_NaN()), false, 0);
    unsigned char* out = in_place ? x.data : y.data;
    auto* d_mean = reinterpret_cast<float*>(mean.data);
    auto* d_rstd = reinterpret_cast<float*>(rstd.data);
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        const int n = p.shape.rows, c = p.shape.cols;
        if (is_bf16) {
            const auto* in = reinterpret_cast<const bf16*>(x.data);
            const auto* g = reinterpret_cast<const bf16*>(gamma.data);
            return norm == Norm::layer
                       ? step.layer_norm_bf16(d_temp, temp_bytes, in, g, reinterpret_cast<const bf16*>(beta.data),
                                              reinterpret_cast<bf16*>(out), d_mean, d_rstd, n, c, p.epsilon, 0)
                       : step.rms_norm_bf16(d_temp, temp_bytes, in, g, reinterpret_cast<bf16*>(out), n, c, p.epsilon,
                                            0);
        }
        const auto* in = reinterpret_cast<const float*>(x.data);
        const auto* g = reinterpret_cast<const float*>(gamma.data);
        return norm == Norm::layer
                   ? step.layer_norm_fp32(d_temp, temp_bytes, in, g, reinterpret_cast<const float*>(beta.data),
                                          reinterpret_cast<float*>(out), d_mean, d_rstd, n, c, p.epsilon, 0)
                   : step.rms_norm_fp32(d_temp, temp_bytes, in, g, reinterpret_cast<float*>(out), n, c, p.epsilon, 0);
    };
    r.launch = launch_with_poisoned_workspace(call);  // outputs and guards are read and checked even where it failed
    r.y = (in_place ? x : y).read(values, is_bf16, "y");
    if (norm == Norm::layer) {
        r.mean = mean.read(rows, false, "the means");
        r.rstd = rstd.read(rows, false, "the rstds");
    } else {
        const std::vector<float> untouched = mean.read(rows, false, "the means");
        EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](float v) { return std::isnan(v); }));
    }
    const auto kept = [](const std::vector<float>& a, const std::vector<float>& b) {  // bit for bit: NaN included
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    };
    if (!in_place) {
        EXPECT_TRUE(kept(x.read(values, is_bf16, "x"), p.x)) << "the step changed its input";
    }
    EXPECT_TRUE(kept(gamma.read(p.gamma.size(), is_bf16, "gamma"), p.gamma)) << "the step changed gamma";
    EXPECT_TRUE(kept(beta.read(p.beta.size(), is_bf16, "beta"), p.beta)) << "the step changed beta";
    return r;
}

//! Compares the rows of a result that `compared` keeps with the reference, and checks them.
void expect_matches_reference(Norm norm, const Problem& p, const StepRun& r, bool is_bf16,
                              const std::function<bool(int)>& compared = [](int) { return true; })
{
    const int cols = p.shape.cols;
    const double t = tolerance(cols, is_bf16);
    Comparison c;
    std::vector<double> expected(static_cast<std::size_t>(cols));
    for (int row = 0; row < p.shape.rows; ++row) {
        if (!compared(row)) {
            continue;
        }
        const std::size_t first = static_cast<std::size_t>(row) * cols;
        const float* x = p.x.data() + first;
        if (norm == Norm::layer) {
            const RowStats e = layer_norm_row(x, p.gamma.data(), p.beta.data(), cols, p.epsilon, expected.data());
            const RowStats got{r.mean[row], r.rstd[row]};
            compare_row(x, p.gamma.data(), p.beta.data(), r.y.data() + first, &got, expected.data(), e, cols,
                        p.epsilon, row, t, c);
        } else {
            const RowStats e = rms_norm_row(x, p.gamma.data(), cols, p.epsilon, expected.data());
            compare_row(x, p.gamma.data(), nullptr, r.y.data() + first, nullptr, expected.data(), e, cols, p.epsilon,
                        row, t, c);
        }
    }
    EXPECT_TRUE(c.passed()) << name_of(norm) << " " << p.shape.rows << " x " << cols << (is_bf16 ? " bf16: " : " fp32: ")
                            << c.describe(t);
}

//! Random rows at every shape, in fp32 or bf16, through `step`'s launchers, compared with the reference.
void expect_every_shape(const Step& step, bool is_bf16)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape& shape : stepwise::testing::shapes_to_run(shapes, large_shapes)) {
        const Problem p = random_problem(shape, seed + shape.cols, is_bf16);
        for (const Norm norm : {Norm::layer, Norm::rms}) {
            const StepRun r = run_step(step, norm, is_bf16, p);
            ASSERT_EQ(r.launch, cudaSuccess) << name_of(norm) << " " << shape.rows << " x " << shape.cols;
            expect_matches_reference(norm, p, r, is_bf16);
        }
    }
}

class NormalizationStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    void expect_every_shape(bool is_bf16) { normalization::expect_every_shape(GetParam(), is_bf16); }

    //! Special rows at row lengths of every layout. Rows of 1e30 only for the steps that take every finite input.
    void expect_special_rows(bool is_bf16)
    {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const bool full_range = GetParam().full_range;
        for (const int cols : {3, 100, 1000, 5000, 20000, 150000}) {
            Problem p = random_problem({9, cols}, fresh_seed(), false);
            const auto row = [&](int r) { return p.x.begin() + static_cast<std::ptrdiff_t>(r) * cols; };
            std::fill(row(0), row(1), 3.7f);         // equal values: variance 0, LayerNorm gives beta
            std::fill(row(1), row(2), 0.0f);         // zeros
            row(2)[cols / 2] = nan;                  // a NaN: this row NaN, and only this row
            for (int j = 0; j < cols; ++j) {
                row(3)[j] *= 1e-30f;                 // tiny values: epsilon dominates
                row(4)[j] += 1e4f;                   // a mean far from 0 against the spread
                if (full_range) {
                    row(5)[j] *= 1e30f;              // squares beyond fp32's largest
                }
            }
            row(6)[cols - 1] = std::numeric_limits<float>::infinity();  // stays in its row (its result unspecified)
            if (is_bf16) {
                p.x = round_to_bf16(p.x);
                p.gamma = round_to_bf16(p.gamma);
                p.beta = round_to_bf16(p.beta);
            }
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                const StepRun r = run_step(GetParam(), norm, is_bf16, p);
                ASSERT_EQ(r.launch, cudaSuccess) << cols << " values per row";
                expect_matches_reference(norm, p, r, is_bf16, [](int row) { return row != 6; });
                if (norm == Norm::layer && full_range) {  // equal values: exactly beta (rounded to the type)
                    for (int j = 0; j < cols; ++j) {
                        ASSERT_EQ(r.y[j], p.beta[j]) << "row of equal values, col " << j;
                    }
                }
            }
        }
    }
};

TEST_P(NormalizationStepTest, MatchesTheReferenceAtEveryShapeInFp32) { expect_every_shape(false); }

TEST_P(NormalizationStepTest, SpecialRowsInFp32) { expect_special_rows(false); }

//! The steps that also take bf16 (8 on).
class NormalizationBf16StepTest : public NormalizationStepTest {};

TEST_P(NormalizationBf16StepTest, MatchesTheReferenceAtEveryShapeInBf16) { expect_every_shape(true); }

TEST_P(NormalizationBf16StepTest, SpecialRowsInBf16) { expect_special_rows(true); }

TEST_P(NormalizationStepTest, EpsilonIsHonoured)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape& shape : {Shape{64, 128}, Shape{4, 5000}, Shape{2, 40000}}) {
        Problem p = random_problem(shape, seed, false);
        for (float& v : p.x) {
            v *= 0.01f;  // variance about 2e-4: epsilon of 0.5 changes the result, 0 is the plain formula
        }
        for (const float epsilon : {0.0f, 0.5f}) {
            p.epsilon = epsilon;
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                const StepRun r = run_step(GetParam(), norm, false, p);
                ASSERT_EQ(r.launch, cudaSuccess);
                expect_matches_reference(norm, p, r, false);
            }
        }
    }
}

TEST_P(NormalizationStepTest, InPlace)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape& shape : {Shape{100, 3}, Shape{64, 1024}, Shape{3, 16385}, Shape{2, 100000}, Shape{1, 262145}}) {
        for (const bool is_bf16 : {false, true}) {
            if (is_bf16 && GetParam().layer_norm_bf16 == nullptr) {
                continue;
            }
            const Problem p = random_problem(shape, seed, is_bf16);
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                const StepRun r = run_step(GetParam(), norm, is_bf16, p, true);
                ASSERT_EQ(r.launch, cudaSuccess);
                expect_matches_reference(norm, p, r, is_bf16);
            }
        }
    }
}

TEST_P(NormalizationStepTest, RejectsAnEmptyShapeNullPointersAndANegativeEpsilon)
{
    const Step& step = GetParam();
    DeviceBuffer<float> d(16);
    float* v = d.data();
    std::size_t temp_bytes = 0;
    EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, v, v, v, v, v, v, 0, 4, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, v, v, v, v, v, v, 4, 0, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, nullptr, v, v, v, v, v, 2, 2, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, v, v, nullptr, v, v, v, 2, 2, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, v, v, v, v, nullptr, v, 2, 2, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, v, v, v, v, v, v, 2, 2, -1.0f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, temp_bytes, v, nullptr, v, 2, 2, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, temp_bytes, v, v, nullptr, 2, 2, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, temp_bytes, v, v, v, 2, 0, 1e-5f, 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

//! The steps whose one-pass statistics make a row of equal values exactly its mean (5 on): LayerNorm gives exactly
//! beta there, with epsilon 0 too, where rstd is infinite.
class NormalizationExactMeanStepTest : public NormalizationStepTest {};

TEST_P(NormalizationExactMeanStepTest, EqualRowsGiveExactlyBetaWithEpsilonZero)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const int cols : {3, 100, 1000, 5000, 20000, 150000}) {
        for (const bool is_bf16 : {false, true}) {
            if (is_bf16 && GetParam().layer_norm_bf16 == nullptr) {
                continue;
            }
            Problem p = random_problem({4, cols}, seed + cols, is_bf16);
            p.epsilon = 0.0f;
            const auto row = [&](int r) { return p.x.begin() + static_cast<std::ptrdiff_t>(r) * cols; };
            std::fill(row(0), row(1), 3.75f);  // equal values
            // equal and large (squares beyond fp32's largest only for the steps that take them)
            std::fill(row(1), row(2), GetParam().full_range ? -1e20f : -2.5e3f);
            if (is_bf16) {
                p.x = round_to_bf16(p.x);  // as the GPU reads them
            }
            const StepRun r = run_step(GetParam(), Norm::layer, is_bf16, p);
            ASSERT_EQ(r.launch, cudaSuccess) << cols << " values per row";
            expect_matches_reference(Norm::layer, p, r, is_bf16);  // the random rows too
            for (int equal_row = 0; equal_row < 2; ++equal_row) {
                EXPECT_EQ(r.mean[equal_row], row(equal_row)[0]) << "row " << equal_row << ", " << cols << " values";
                EXPECT_TRUE(std::isinf(r.rstd[equal_row])) << "row " << equal_row << ", " << cols << " values";
                for (int j = 0; j < cols; ++j) {
                    ASSERT_EQ(r.y[static_cast<std::size_t>(equal_row) * cols + j], p.beta[j])
                        << "row " << equal_row << " of equal values, col " << j << " of " << cols;
                }
            }
        }
    }
}

//! The steps that take every finite input whose sums stay finite (6 on: squares scaled by a power of two).
class NormalizationFullRangeStepTest : public NormalizationStepTest {};

//! A LayerNorm row near the limit their @pre states: values of +-4e34 alternating in 4000 columns, whose absolute
//! differences from the first value sum to 1.6e38, about half fp32's largest (and whose squares overflow fp32 unless
//! scaled); the outputs are finite and right.
TEST_P(NormalizationFullRangeStepTest, LayerNormRowsNearTheLimitOfTheirDifferences)
{
    Problem p = random_problem({2, 4000}, fresh_seed(), false);
    for (int j = 0; j < 4000; ++j) {
        p.x[j] = j % 2 == 0 ? 4e34f : -4e34f;
    }
    const StepRun r = run_step(GetParam(), Norm::layer, false, p);
    ASSERT_EQ(r.launch, cudaSuccess);
    expect_matches_reference(Norm::layer, p, r, false);
    EXPECT_TRUE(std::isfinite(r.mean[0]) && std::isfinite(r.rstd[0]));
}

INSTANTIATE_TEST_SUITE_P(Normalization, NormalizationStepTest, ::testing::ValuesIn(steps()), step_name);
INSTANTIATE_TEST_SUITE_P(Normalization, NormalizationExactMeanStepTest,
                         ::testing::ValuesIn(stepwise::testing::kept(
                             steps(), [](const Step& s) { return std::string(s.id) >= "05_one_pass_moments"; })),
                         step_name);
INSTANTIATE_TEST_SUITE_P(Normalization, NormalizationFullRangeStepTest,
                         ::testing::ValuesIn(stepwise::testing::kept(steps(), [](const Step& s) { return s.full_range; })),
                         step_name);
INSTANTIATE_TEST_SUITE_P(Normalization, NormalizationBf16StepTest,
                         ::testing::ValuesIn(stepwise::testing::kept(
                             steps(), [](const Step& s) { return s.layer_norm_bf16 != nullptr; })),
                         step_name);

// ---- the final step: any alignment its types allow, and its errors ----

TEST(NormalizationFinalStep, RowsAtEveryElementAlignment)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Lengths that are multiples of 8, at pointers 1 to 7 elements past a 16-byte boundary: each row through its
    // window of 16-byte accesses (step 12; step 11 took the 2- and 4-byte paths).
    for (const Shape& shape : {Shape{33, 64}, Shape{4, 8192}, Shape{2, 65536}, Shape{1, 262144}}) {
        for (const bool is_bf16 : {false, true}) {
            const Problem p = random_problem(shape, seed, is_bf16);
            for (std::size_t offset = 1; offset < 8; offset += 3) {
                for (const Norm norm : {Norm::layer, Norm::rms}) {
                    const StepRun r = run_step(steps().back(), norm, is_bf16, p, false, offset);
                    ASSERT_EQ(r.launch, cudaSuccess) << "offset " << offset;
                    expect_matches_reference(norm, p, r, is_bf16);
                }
            }
        }
    }
}

//! Rows that start at every offset from a 16-byte boundary (lengths k * W + r, W values an access, r = 1 to W - 1,
//! and pointers 0 to W - 1 elements past a boundary), at every layout: rows of 1, 2, W - 1 and W + 1 values, a warp's
//! and a block's, rows that take the cluster path (16385, 50257, 100003 values; fp32 131071) and the split path
//! (bf16 131071 where the GPU takes no clusters of 16, 262143); each row's window straddles its neighbours, so that a
//! head or tail value read or written for the wrong row, or outside the matrix, shows. Outputs poisoned, LayerNorm's
//! mean and rstd checked, gamma and beta at x's misalignment and one value past it.
TEST(NormalizationFinalStep, RowsAtEveryMisalignmentMatchTheReference)
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
        for (const int cols : {16385, 50257, 100003, 131071, 262143}) {
            odd.push_back({w + 1, cols});
        }
        for (const Shape& shape : odd) {
            const Problem p = random_problem(shape, seed + shape.cols, is_bf16);
            for (int offset = 0; offset < w; ++offset) {
                for (const Norm norm : {Norm::layer, Norm::rms}) {
                    const std::size_t parameter_shift = offset % 2;
                    SCOPED_TRACE(std::string(name_of(norm)) + ", offset " + std::to_string(offset) + ", gamma " +
                                 std::to_string(parameter_shift) + " more");
                    const StepRun r = run_step(steps().back(), norm, is_bf16, p, false, offset, 0, parameter_shift);
                    ASSERT_EQ(r.launch, cudaSuccess) << shape.rows << " x " << shape.cols;
                    expect_matches_reference(norm, p, r, is_bf16);
                }
            }
        }
    }
}

//! The clusters of the windowed cluster path, for every number the GPU could hold at once: at least one, no more
//! than the rows or the GPU holds (or one period of them), fewer than a period lost, and every row of a cluster
//! (`clusters` apart) equally far past a 16-byte boundary, at every misalignment of the matrix. No GPU needed.
template <typename T>
void expect_one_head_a_cluster()
{
    namespace s = lanes_known_at_compile_time;
    constexpr int w = 16 / sizeof(T);
    for (const int cols : {1, 2, 3, 4, 6, 8, 9, 4095, 16385, 50257, 100003, 131071}) {
        const int period = s::head_period<T>(cols);
        for (int rows = 1; rows <= 40; ++rows) {
            for (int active = 1; active <= rows; ++active) {
                const int clusters = s::windowed_clusters<T>(active, rows, cols);
                SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + ", " + std::to_string(active) +
                             " clusters at once: " + std::to_string(clusters));
                ASSERT_GE(clusters, 1);
                ASSERT_LE(clusters, std::max(active, std::min(period, rows)));
                ASSERT_GT(clusters, active - period);
                for (int offset = 0; offset < w; ++offset) {
                    for (int row = clusters; row < rows; ++row) {
                        const auto head = [&](int r) { return (offset + std::int64_t{r} * cols) % w; };
                        ASSERT_EQ(head(row), head(row - clusters)) << "offset " << offset << ", row " << row;
                    }
                }
            }
        }
    }
}

TEST(NormalizationFinalStep, EveryRowOfAWindowedClusterHasOneHead)
{
    expect_one_head_a_cluster<float>();
    expect_one_head_a_cluster<bf16>();
}

//! Input and output misaligned alike (a window for both), 16 bytes apart (the same), differently (one value an
//! access), and in place, at rows of the rows kernel, the cluster path and the split path; gamma and beta at other
//! misalignments than x's.
TEST(NormalizationFinalStep, InputAndOutputAtDifferentMisalignments)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool is_bf16 : {false, true}) {
        const std::size_t w = is_bf16 ? 8 : 4;
        for (const Shape& shape : {Shape{33, 3}, Shape{17, 4095}, Shape{5, 50257}, Shape{3, 262143}}) {
            const Problem p = random_problem(shape, seed + shape.cols, is_bf16);
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                for (const auto& [offset, out_shift, parameter_shift] :
                     {std::tuple<std::size_t, std::size_t, std::size_t>{1, 0, 0}, {1, w, 2}, {1, 1, 0}, {3, w - 2, 1},
                      {0, 1, 0}, {0, 0, 1}}) {
                    SCOPED_TRACE(std::string(name_of(norm)) + ", offset " + std::to_string(offset) + ", output " +
                                 std::to_string(out_shift) + " more, gamma " + std::to_string(parameter_shift) +
                                 " more");
                    const StepRun r = run_step(steps().back(), norm, is_bf16, p, false, offset, out_shift,
                                               parameter_shift);
                    ASSERT_EQ(r.launch, cudaSuccess);
                    expect_matches_reference(norm, p, r, is_bf16);
                }
                for (std::size_t offset = 1; offset < w; offset += 2) {
                    SCOPED_TRACE(std::string(name_of(norm)) + ", in place, offset " + std::to_string(offset));
                    const StepRun r = run_step(steps().back(), norm, is_bf16, p, true, offset);
                    ASSERT_EQ(r.launch, cudaSuccess);
                    expect_matches_reference(norm, p, r, is_bf16);
                }
            }
        }
    }
}

//! The registry's step `id`.
const Step& step_of(const std::string& id)
{
    for (const Step& step : steps()) {
        if (step.id == id) {
            return step;
        }
    }
    throw std::invalid_argument("no normalization step " + id);
}

//! The steps that choose the values a thread by row length and by the GPU's memory, 10 to 12 (the same tables in
//! each), as the tests take them: the step's table (`values`), its query of the GPU's memory, and its launchers with
//! the values a thread of a GPU of `memory`, whatever GPU runs them (`layer_norm<memory>`, `rms_norm<memory>`).
#define STEPWISE_VALUES_A_THREAD_STEP(name, ns, id)                                                                   \
    struct name {                                                                                                     \
        using Memory = ns::Memory;                                                                                    \
        using Moments = ns::Moments;                                                                                  \
        using Squares = ns::Squares;                                                                                  \
        static const Step& step() { return step_of(id); }                                                             \
        template <typename T, typename Stats>                                                                         \
        static int values(int num_cols, Memory memory)                                                                \
        {                                                                                                             \
            return ns::values_per_thread<T, Stats>(num_cols, memory);                                                 \
        }                                                                                                             \
        static Memory memory_of_current_device() { return ns::memory_of_current_device(); }                           \
        template <Memory memory, typename T>                                                                          \
        static cudaError_t layer_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,          \
                                      const T* d_gamma, const T* d_beta, T* d_out, float* d_mean, float* d_rstd,      \
                                      int num_rows, int num_cols, float epsilon, cudaStream_t stream)                 \
        {                                                                                                             \
            const ns::Args<T> args{d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, num_rows, num_cols, epsilon};       \
            return ns::normalize<T, ns::Moments>(d_temp_storage, temp_storage_bytes, args, memory, stream);          \
        }                                                                                                             \
        template <Memory memory, typename T>                                                                          \
        static cudaError_t rms_norm(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,            \
                                    const T* d_gamma, T* d_out, int num_rows, int num_cols, float epsilon,            \
                                    cudaStream_t stream)                                                              \
        {                                                                                                             \
            const ns::Args<T> args{d_in, d_gamma, nullptr, d_out, nullptr, nullptr, num_rows, num_cols, epsilon};    \
            return ns::normalize<T, ns::Squares>(d_temp_storage, temp_storage_bytes, args, memory, stream);          \
        }                                                                                                             \
    };

STEPWISE_VALUES_A_THREAD_STEP(ValuesPerThreadStep, bf16_in_out, "10_values_per_thread")
STEPWISE_VALUES_A_THREAD_STEP(WithTheRowStep, parameters_with_the_row, "11_parameters_with_the_row")
STEPWISE_VALUES_A_THREAD_STEP(AnyRowStep, any_row_alignment, "12_any_row_alignment")
STEPWISE_VALUES_A_THREAD_STEP(ShiftedParametersStep, shifted_parameters, "13_shifted_parameters")
STEPWISE_VALUES_A_THREAD_STEP(OneAlignmentAClusterStep, one_alignment_a_cluster, "14_one_alignment_a_cluster")
STEPWISE_VALUES_A_THREAD_STEP(OneLoadCopyAThreadStep, one_load_copy_a_thread, "15_one_load_copy_a_thread")
STEPWISE_VALUES_A_THREAD_STEP(BoundedWindowRegistersStep, bounded_window_registers, "16_bounded_window_registers")
STEPWISE_VALUES_A_THREAD_STEP(RowEndsStagedStep, row_ends_staged, "17_row_ends_staged")
STEPWISE_VALUES_A_THREAD_STEP(RowEndsPackedStep, row_ends_packed, "18_row_ends_packed")
STEPWISE_VALUES_A_THREAD_STEP(ManyRowsOneWarpStep, many_rows_one_warp, "19_many_rows_one_warp")
STEPWISE_VALUES_A_THREAD_STEP(PaddingByWholeChunksStep, padding_by_whole_chunks, "20_padding_by_whole_chunks")
STEPWISE_VALUES_A_THREAD_STEP(LanesKnownAtCompileTimeStep, lanes_known_at_compile_time, "21_lanes_known_at_compile_time")
#undef STEPWISE_VALUES_A_THREAD_STEP

//! Step `S` as it runs on a GPU of `memory`.
template <typename S, typename S::Memory memory>
Step step_on()
{
    Step step = S::step();
    step.layer_norm_fp32 = S::template layer_norm<memory, float>;
    step.rms_norm_fp32 = S::template rms_norm<memory, float>;
    step.layer_norm_bf16 = S::template layer_norm<memory, bf16>;
    step.rms_norm_bf16 = S::template rms_norm<memory, bf16>;
    return step;
}

//! Step `S`'s values a thread by row length, type, statistics and the GPU's memory.
template <typename S>
void expect_values_a_thread()
{
    using Memory = typename S::Memory;
    using Moments = typename S::Moments;
    using Squares = typename S::Squares;
    const auto values = [](auto type, auto stats, int num_cols, Memory memory) {
        return S::template values<decltype(type), decltype(stats)>(num_cols, memory);
    };
    SCOPED_TRACE(S::step().id);
    for (const Memory memory : {Memory::usual, Memory::fast}) {  // fp32 rows: the same on every GPU
        EXPECT_EQ(values(float{}, Moments{}, 64, memory), 8);
        EXPECT_EQ(values(float{}, Moments{}, 128, memory), 16);
        EXPECT_EQ(values(float{}, Squares{}, 1024, memory), 8);
        EXPECT_EQ(values(float{}, Squares{}, 1025, memory), 16);
        EXPECT_EQ(values(float{}, Moments{}, 8192, memory), 16);
        EXPECT_EQ(values(float{}, Moments{}, 8193, memory), 32);
        EXPECT_EQ(values(float{}, Squares{}, 65536, memory), 32);
        EXPECT_EQ(values(float{}, Squares{}, 65537, memory), 64);
    }
    // bf16 rows: each step at a quarter of the length where the memory is fast.
    EXPECT_EQ(values(bf16{}, Squares{}, 1024, Memory::usual), 8);
    EXPECT_EQ(values(bf16{}, Squares{}, 1024, Memory::fast), 16);
    EXPECT_EQ(values(bf16{}, Squares{}, 256, Memory::fast), 8);
    EXPECT_EQ(values(bf16{}, Moments{}, 4096, Memory::usual), 16);
    EXPECT_EQ(values(bf16{}, Moments{}, 4096, Memory::fast), 32);
    EXPECT_EQ(values(bf16{}, Moments{}, 1024, Memory::fast), 16);
    EXPECT_EQ(values(bf16{}, Moments{}, 32768, Memory::usual), 32);
    EXPECT_EQ(values(bf16{}, Moments{}, 32768, Memory::fast), 64);
    EXPECT_EQ(values(bf16{}, Moments{}, 16384, Memory::fast), 32);
    EXPECT_EQ(values(bf16{}, Squares{}, 131072, Memory::usual), 64);
    EXPECT_EQ(values(bf16{}, Squares{}, 2147483647, Memory::fast), 64);  // the length counted in 64 bits
}

TEST(NormalizationLauncher, ValuesAThreadByRowLengthTypeAndMemory)
{
    // No GPU needed: the choice is a table over the row's length, the type, the statistics and the GPU's memory.
    expect_values_a_thread<ValuesPerThreadStep>();
    expect_values_a_thread<WithTheRowStep>();
    expect_values_a_thread<AnyRowStep>();
    expect_values_a_thread<ShiftedParametersStep>();
    expect_values_a_thread<OneAlignmentAClusterStep>();
    expect_values_a_thread<OneLoadCopyAThreadStep>();
    expect_values_a_thread<BoundedWindowRegistersStep>();
    expect_values_a_thread<RowEndsStagedStep>();
    expect_values_a_thread<RowEndsPackedStep>();
    expect_values_a_thread<ManyRowsOneWarpStep>();
    expect_values_a_thread<PaddingByWholeChunksStep>();
    expect_values_a_thread<LanesKnownAtCompileTimeStep>();
}

// Where rows are many (at least many_rows_per_sm an SM), bf16 LayerNorm rows of 129 to 1024 values take 32 values a
// thread on a GPU of fast memory: one warp a row of up to 1024. Elsewhere the final step keeps step 10's table. No GPU
// needed.
TEST(NormalizationLauncher, ManyRowsOfUpTo1024Bf16ValuesTakeOneWarp)
{
    namespace s = lanes_known_at_compile_time;
    using s::Memory;
    using s::Moments;
    using s::Squares;
    constexpr int sms = 132;
    constexpr int many = s::many_rows_per_sm * sms;
    for (const int cols : {129, 333, 512, 1000, 1023, 1024}) {
        SCOPED_TRACE(std::to_string(cols) + " values a row");
        EXPECT_EQ((s::values_for_rows<bf16, Moments>(many, cols, Memory::fast, sms)), 32);
        EXPECT_EQ((s::values_for_rows<bf16, Moments>(1 << 30, cols, Memory::fast, sms)), 32);
        EXPECT_EQ((s::values_for_rows<bf16, Moments>(many - 1, cols, Memory::fast, sms)), 16);  // rows too few
        EXPECT_EQ((s::values_for_rows<bf16, Moments>(many, cols, Memory::usual, sms)), 16);     // memory not fast
        EXPECT_EQ((s::values_for_rows<bf16, Moments>(many, cols, Memory::fast, 0)), 16);        // SMs unknown
        EXPECT_EQ((s::values_for_rows<bf16, Squares>(many, cols, Memory::fast, sms)),           // RMSNorm: the table
                  (s::values_per_thread<bf16, Squares>(cols, Memory::fast)));
        EXPECT_EQ((s::values_for_rows<float, Moments>(many, cols, Memory::fast, sms)),          // fp32: the table
                  (s::values_per_thread<float, Moments>(cols, Memory::fast)));
    }
    for (const int cols : {1, 128, 1025, 4096, 100000}) {  // shorter and longer rows: the table
        EXPECT_EQ((s::values_for_rows<bf16, Moments>(many, cols, Memory::fast, sms)),
                  (s::values_per_thread<bf16, Moments>(cols, Memory::fast))) << cols << " values a row";
    }
}

// The one-warp rows on this GPU: bf16 LayerNorm at many_rows_per_sm rows an SM and 7 more, aligned and 3 values past
// a 16-byte boundary (packed rows), against the reference; values_for_rows() picks 32 values a thread there where
// the GPU's memory is fast (its choice checked above). Under compute-sanitizer one length only.
TEST(NormalizationFinalStep, ManyRowsOfUpTo1024Bf16ValuesMatchTheReference)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    namespace s = lanes_known_at_compile_time;
    const int sms = s::traits_of_current_device().sms;
    ASSERT_GE(sms, 1);
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int rows = s::many_rows_per_sm * sms + 7;
    const std::vector<int> lengths = stepwise::testing::under_sanitizer() ? std::vector<int>{333}
                                                                          : std::vector<int>{129, 333, 512, 1023, 1024};
    for (const int cols : lengths) {
        const Problem p = random_problem({rows, cols}, seed + cols, true);
        for (const std::size_t offset : {std::size_t{0}, std::size_t{3}}) {
            SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(cols) + ", offset " + std::to_string(offset));
            const StepRun r = run_step(steps().back(), Norm::layer, true, p, false, offset);
            ASSERT_EQ(r.launch, cudaSuccess);
            expect_matches_reference(Norm::layer, p, r, true);
        }
    }
}

//! Row lengths whose rows take every power of two of lanes, 1 to 32 (the rows kernel's `Lanes`), in some type and norm
//! on either memory (checked below, without a GPU); the longest take a block.
constexpr int every_lane_count_cols[] = {5, 12, 24, 48, 100, 200, 400};

TEST(NormalizationLauncher, EveryLaneCountIsTakenByTheRowsOfTheLaneTest)
{
    namespace s = lanes_known_at_compile_time;
    for (const s::Memory memory : {s::Memory::usual, s::Memory::fast}) {
        std::set<int> lanes;
        for (const int cols : every_lane_count_cols) {
            for (const int values : {s::values_per_thread<float, s::Moments>(cols, memory),
                                     s::values_per_thread<float, s::Squares>(cols, memory),
                                     s::values_per_thread<bf16, s::Moments>(cols, memory),
                                     s::values_per_thread<bf16, s::Squares>(cols, memory)}) {
                lanes.insert(s::choose_layout(1001, cols, values, 0).group_threads);
            }
        }
        for (const int warp_lanes : {1, 2, 4, 8, 16, 32}) {
            EXPECT_EQ(lanes.count(warp_lanes), 1u)
                << warp_lanes << " lanes, " << (memory == s::Memory::fast ? "fast" : "usual") << " memory";
        }
    }
}

//! Rows of every power of two of lanes, 1 to 32 (the rows kernel's `Lanes`): 5 to 400 values, fp32 and bf16, both
//! norms, on 16-byte boundaries and 3 values past one, against the reference.
TEST(NormalizationFinalStep, RowsOfEveryLaneCountMatchTheReference)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const int cols : every_lane_count_cols) {
        for (const bool is_bf16 : {false, true}) {
            const Problem p = random_problem({1001, cols}, seed + cols, is_bf16);
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                for (const std::size_t offset : {std::size_t{0}, std::size_t{3}}) {
                    SCOPED_TRACE(std::string(name_of(norm)) + (is_bf16 ? " bf16 " : " fp32 ") + "1001 x " +
                                 std::to_string(cols) + ", offset " + std::to_string(offset));
                    const StepRun r = run_step(steps().back(), norm, is_bf16, p, false, offset);
                    ASSERT_EQ(r.launch, cudaSuccess);
                    expect_matches_reference(norm, p, r, is_bf16);
                }
            }
        }
    }
}

//! Step `S`'s bf16 rows with the values a thread of the other memory than this GPU's.
template <typename S>
void expect_bf16_rows_with_the_other_memory()
{
    using Memory = typename S::Memory;
    SCOPED_TRACE(S::step().id);
    const bool fast = S::memory_of_current_device() == Memory::fast;
    expect_every_shape(fast ? step_on<S, Memory::usual>() : step_on<S, Memory::fast>(), true);
}

// The values a thread of bf16 rows depend on the GPU's memory: the steps' own tests take this GPU's choice, and this
// one the other's, so that each GPU tests both (fp32 rows choose alike on every GPU): step 10, which brings the
// tables, step 11, and the final step, which keeps them (and lays its windowed rows out by them).
TEST(NormalizationLauncher, Bf16RowsWithTheValuesAThreadOfTheOtherMemory)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    expect_bf16_rows_with_the_other_memory<ValuesPerThreadStep>();
    expect_bf16_rows_with_the_other_memory<WithTheRowStep>();
    expect_bf16_rows_with_the_other_memory<AnyRowStep>();
    expect_bf16_rows_with_the_other_memory<ShiftedParametersStep>();
    expect_bf16_rows_with_the_other_memory<OneAlignmentAClusterStep>();
    expect_bf16_rows_with_the_other_memory<OneLoadCopyAThreadStep>();
    expect_bf16_rows_with_the_other_memory<BoundedWindowRegistersStep>();
    expect_bf16_rows_with_the_other_memory<RowEndsStagedStep>();
    expect_bf16_rows_with_the_other_memory<RowEndsPackedStep>();
    expect_bf16_rows_with_the_other_memory<ManyRowsOneWarpStep>();
    expect_bf16_rows_with_the_other_memory<PaddingByWholeChunksStep>();
    expect_bf16_rows_with_the_other_memory<LanesKnownAtCompileTimeStep>();
}

//! Every value of a row at every head (its first value 0 to W - 1 places past a 16-byte boundary) has exactly one
//! place in the packed row (load_packed()): the body's chunks start on a boundary and lie inside the row, and the
//! places past the body hold the values before and after it. No GPU needed.
template <int W>
void expect_each_value_packed_once()
{
    namespace s = lanes_known_at_compile_time;
    for (const int cols : {1, 2, W - 1, W, W + 1, 2 * W - 1, 2 * W + 3, 4095, 4096, 50257}) {
        for (int head = 0; head < W; ++head) {
            SCOPED_TRACE(std::to_string(cols) + " values, head " + std::to_string(head));
            const s::Packing p = s::packing_of<W>(head, cols);
            if (p.body > 0) {
                ASSERT_EQ((head + p.first) % W, 0);  // the body starts on a boundary
            }
            ASSERT_EQ(p.body % W, 0);
            ASSERT_LE(p.first + p.body, cols);
            ASSERT_LT(cols - p.body, 2 * W);  // at most two chunks past the body
            std::vector<int> held(cols, 0);
            for (int col = 0; col < cols; ++col) {
                const int column = s::packed_column(col, p);
                ASSERT_GE(column, 0);
                ASSERT_LT(column, cols);
                ++held[column];
            }
            for (int column = 0; column < cols; ++column) {
                ASSERT_EQ(held[column], 1) << "column " << column;
            }
        }
    }
}

TEST(NormalizationFinalStep, APackedRowHoldsEachValueInOnePlace)
{
    expect_each_value_packed_once<4>();  // fp32
    expect_each_value_packed_once<8>();  // bf16
}

TEST(NormalizationFinalStep, RejectsMisalignedPointersAndASmallWorkspace)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    namespace s = lanes_known_at_compile_time;
    DeviceBuffer<unsigned char> d(1 << 24);
    auto* f = reinterpret_cast<float*>(d.data());
    auto* b = reinterpret_cast<bf16*>(d.data());
    const auto* odd_float = reinterpret_cast<const float*>(d.data() + 2);
    const auto* odd_bf16 = reinterpret_cast<const bf16*>(d.data() + 1);
    std::size_t temp_bytes = 0;
    EXPECT_EQ(s::layer_norm(nullptr, temp_bytes, odd_float, f, f, f, f, f, 2, 2, 1e-5f), cudaErrorInvalidValue);
    EXPECT_EQ(s::layer_norm(nullptr, temp_bytes, f, odd_float, f, f, f, f, 2, 2, 1e-5f), cudaErrorInvalidValue);
    EXPECT_EQ(s::layer_norm(nullptr, temp_bytes, b, b, odd_bf16, b, f, f, 2, 2, 1e-5f), cudaErrorInvalidValue);
    EXPECT_EQ(s::rms_norm(nullptr, temp_bytes, odd_bf16, b, b, 2, 2, 1e-5f), cudaErrorInvalidValue);
    // mean and rstd 2 bytes past a 4-byte boundary, refused by every step from 6 on (their @pre: 4-byte aligned)
    auto* odd_stats = reinterpret_cast<float*>(d.data() + 2);
    for (const Step& step : steps()) {
        if (std::string(step.id) < "06_row_in_registers") {
            continue;
        }
        EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, f, f, f, f, odd_stats, f, 2, 2, 1e-5f, 0),
                  cudaErrorInvalidValue) << step.id << ": mean";
        EXPECT_EQ(step.layer_norm_fp32(nullptr, temp_bytes, f, f, f, f, f, odd_stats, 2, 2, 1e-5f, 0),
                  cudaErrorInvalidValue) << step.id << ": rstd";
        if (step.layer_norm_bf16 != nullptr) {
            EXPECT_EQ(step.layer_norm_bf16(nullptr, temp_bytes, b, b, b, b, odd_stats, f, 2, 2, 1e-5f, 0),
                      cudaErrorInvalidValue) << step.id << ": bf16, mean";
        }
    }
    // Rows longer than a cluster need a workspace, and so do rows off 16-byte boundaries (4095 values: all but the
    // first), for the shifted copies of gamma and beta: one byte short of it is refused.
    for (const int cols : {300000, 4095}) {
        for (const bool layer : {true, false}) {
            expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& bytes) {
                return layer ? s::layer_norm(d_temp, bytes, f, f, f, f, f + 2 * cols, f + 2 * cols + 2, 2, cols, 1e-5f)
                             : s::rms_norm(d_temp, bytes, f, f, f, 2, cols, 1e-5f);
            });
        }
    }
}

// rows = INT_MAX, one column each, through every step from 6 on (their blocks of short rows counted in 64 bits): in
// place, x of equal bytes, so that each row is one value v: LayerNorm gives its mean v and exactly beta, RMSNorm
// v / sqrt(v^2 + epsilon) * gamma. 8 GiB of x, 16 GiB of mean and rstd.
TEST(NormalizationFinalStep, RowsUpToIntMax)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (stepwise::testing::under_sanitizer()) {
        GTEST_SKIP() << "2^31 rows under compute-sanitizer would take hours; the layouts are checked at small sizes";
    }
    constexpr int rows = std::numeric_limits<int>::max();
    constexpr std::size_t count = static_cast<std::size_t>(rows);
    float *x = nullptr, *mean = nullptr, *rstd = nullptr;
    if (cudaMalloc(&x, count * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&mean, count * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&rstd, count * sizeof(float)) != cudaSuccess) {
        cudaFree(x);
        cudaFree(mean);
        (void)cudaGetLastError();
        GTEST_SKIP() << "the GPU has no 24 GiB free for 2^31 - 1 rows";
    }
    const float gamma_beta[2] = {1.5f, 0.25f};
    DeviceBuffer<float> parameters(2);
    ASSERT_EQ(cudaMemcpy(parameters.data(), gamma_beta, sizeof(gamma_beta), cudaMemcpyHostToDevice), cudaSuccess);
    constexpr float v = 0x1.7e7e7ep-1f;  // every float of the bytes 0x3f (0x3f3f3f3f): 0.7470588...
    const auto sampled = [&](const float* d, std::size_t at) {
        float h = 0;
        EXPECT_EQ(cudaMemcpy(&h, d + at, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    };
    for (const Step& step : steps()) {
        if (std::string(step.id) < "06_row_in_registers") {
            continue;
        }
        for (const Norm norm : {Norm::layer, Norm::rms}) {
            ASSERT_EQ(cudaMemset(x, 0x3f, count * sizeof(float)), cudaSuccess);
            std::size_t temp_bytes = 0;
            const auto call = [&](void* d_temp, std::size_t& bytes) {
                return norm == Norm::layer
                           ? step.layer_norm_fp32(d_temp, bytes, x, parameters.data(), parameters.data() + 1, x, mean,
                                                  rstd, rows, 1, 1e-5f, 0)
                           : step.rms_norm_fp32(d_temp, bytes, x, parameters.data(), x, rows, 1, 1e-5f, 0);
            };
            ASSERT_EQ(call(nullptr, temp_bytes), cudaSuccess) << step.id;
            DeviceBuffer<unsigned char> temp(std::max<std::size_t>(temp_bytes, 1));
            ASSERT_EQ(call(temp.data(), temp_bytes), cudaSuccess) << step.id;
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << step.id;
            const double expected = norm == Norm::layer ? 0.25 : v / std::sqrt(double{v} * v + 1e-5) * 1.5;
            for (const std::size_t at : {std::size_t{0}, count / 2, count - 256, count - 1}) {
                EXPECT_NEAR(sampled(x, at), expected, 1e-6) << step.id << (norm == Norm::layer ? " LayerNorm" : " RMSNorm")
                                                            << ", row " << at;
                if (norm == Norm::layer) {
                    EXPECT_EQ(sampled(mean, at), v) << step.id << ", row " << at;
                }
            }
        }
    }
    EXPECT_EQ(cudaFree(x), cudaSuccess);
    EXPECT_EQ(cudaFree(mean), cudaSuccess);
    EXPECT_EQ(cudaFree(rstd), cudaSuccess);
}

TEST(NormalizationProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Problem p = random_problem({4096, 4096}, fresh_seed(), false);
    for (const Step& step : steps()) {
        for (const Norm norm : {Norm::layer, Norm::rms}) {
            ASSERT_EQ(run_step(step, norm, false, p).launch, cudaSuccess) << step.id;
            if (step.layer_norm_bf16 != nullptr) {
                ASSERT_EQ(run_step(step, norm, true, random_problem({4096, 4096}, 1, true)).launch, cudaSuccess);
            }
        }
    }
}

TEST(NormalizationUsage, TheFinalStepOnBf16Rows)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const int num_rows = 1000;
    const int num_cols = 3000;
    const Problem p = random_problem({num_rows, num_cols}, fresh_seed(), true);
    const auto to_device_type = [](const std::vector<float>& v) {
        const std::vector<unsigned char> bytes = narrow(v, true);
        std::vector<__nv_bfloat16> out(v.size());
        std::memcpy(static_cast<void*>(out.data()), bytes.data(), bytes.size());
        return out;
    };
    const std::vector<__nv_bfloat16> h_x = to_device_type(p.x), h_gamma = to_device_type(p.gamma),
                                     h_beta = to_device_type(p.beta);
    std::vector<__nv_bfloat16> h_y(h_x.size());
    std::vector<float> h_mean(num_rows), h_rstd(num_rows);
    // example-begin normalization-usage
    namespace nm = stepwise::normalization::lanes_known_at_compile_time;
    __nv_bfloat16 *d_x = nullptr, *d_gamma = nullptr, *d_beta = nullptr;  // any shape, 2-byte aligned
    float *d_mean = nullptr, *d_rstd = nullptr;                           // each row's, kept for the backward pass
    const std::size_t bytes = h_x.size() * sizeof(__nv_bfloat16), row_bytes = num_cols * sizeof(__nv_bfloat16);
    ASSERT_EQ(cudaMalloc(&d_x, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_gamma, row_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_beta, row_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_mean, num_rows * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_rstd, num_rows * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_x, h_x.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_gamma, h_gamma.data(), row_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_beta, h_beta.data(), row_bytes, cudaMemcpyHostToDevice), cudaSuccess);

    std::size_t temp_bytes = 0;  // first ask for the workspace's size, then run (in place here)
    const float epsilon = 1e-5f;
    ASSERT_EQ(nm::layer_norm(nullptr, temp_bytes, d_x, d_gamma, d_beta, d_x, d_mean, d_rstd, num_rows, num_cols,
                             epsilon),
              cudaSuccess);
    void* d_temp = nullptr;
    ASSERT_EQ(cudaMalloc(&d_temp, temp_bytes), cudaSuccess);
    ASSERT_EQ(nm::layer_norm(d_temp, temp_bytes, d_x, d_gamma, d_beta, d_x, d_mean, d_rstd, num_rows, num_cols,
                             epsilon),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_y.data(), d_x, bytes, cudaMemcpyDeviceToHost), cudaSuccess);  // waits for it
    ASSERT_EQ(cudaMemcpy(h_mean.data(), d_mean, num_rows * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_rstd.data(), d_rstd, num_rows * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);

    for (void* d : {static_cast<void*>(d_x), static_cast<void*>(d_gamma), static_cast<void*>(d_beta),
                    static_cast<void*>(d_mean), static_cast<void*>(d_rstd), d_temp}) {
        ASSERT_EQ(cudaFree(d), cudaSuccess);
    }
    // example-end normalization-usage
    StepRun r;
    r.y = widen(reinterpret_cast<const unsigned char*>(h_y.data()), h_y.size(), true);
    r.mean = h_mean;
    r.rstd = h_rstd;
    expect_matches_reference(Norm::layer, p, r, true);
}

}  // namespace
}  // namespace stepwise::normalization
