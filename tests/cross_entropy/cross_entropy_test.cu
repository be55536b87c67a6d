// GPU tests of the cross-entropy chapter: every step against the double-precision CPU reference, in fp32 and bf16, at
// shapes that take every path of the launchers, with ignored tokens and special values, in place, and with invalid
// arguments. Outputs are poisoned before each run, and a guard after the gradient must stay poisoned.
#include "core/bf16.hpp"
#include "core/device_buffer.hpp"
#include "cross_entropy/cross_entropy_reference.hpp"
#include "cross_entropy/cross_entropy_steps.hpp"
#include "support/gpu_test_support.hpp"
#include "support/peeled_row_layout.hpp"

#include "../../snippets/cross_entropy/04_any_row_alignment.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

namespace stepwise::cross_entropy {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::launch_with_poisoned_workspace;
using bf16 = __nv_bfloat16;

struct Shape {
    int rows, cols;
};

//! Rows of one value, of a few, of a warp's and a block's worth; the longest rows held in registers (32768 values)
//! and one value longer (the longer rows' path); vocabularies (GPT-2's 50257, multiple of nothing), over clusters of
//! 2 to 16 blocks where a step has them (300 x 50257: clusters that take several rows in turn, at every alignment,
//! ignored rows among them), and rows longer than the largest cluster holds (300000); many short rows,
//! of one lane to a whole warp of 8 logits each (8, 100, 129, 256: several rows a block, a row's last block part
//! full); lengths that are multiples of 4 and 8 (16-byte accesses) and not.
const std::vector<Shape> shapes = {{1, 1},     {7, 3},      {100000, 3}, {513, 8},    {301, 100}, {1001, 129},
                                   {77, 256},  {37, 1000},  {33, 513},   {64, 1024},  {9, 8191},  {4, 32768},
                                   {3, 32769}, {5, 50257},  {3, 100000}, {2, 131072}, {2, 300000}, {300, 50257}};
//! Shapes left out under compute-sanitizer (slow there).
const std::vector<Shape> large_shapes = {{2048, 4096}, {64, 128256}};

constexpr std::size_t guard_bytes = 256;  //!< poisoned bytes after the gradient
constexpr int ignore = default_ignore_index;
constexpr int ignored_one_in = 8;         //!< about one random label in this many is ignored
constexpr std::uint32_t poisoned_loss = 0xFFFFFFFFu;  //!< the loss's bits before a run (a NaN no kernel writes)

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

//! What a run wrote: its launch's error, the loss and its bits, and the gradient as floats.
struct StepRun {
    cudaError_t launch = cudaErrorUnknown;
    float loss = 0;
    std::uint32_t loss_bits = 0;
    std::vector<float> grad;
};

//! Runs `step` (its fp32 or bf16 launcher) on `input` (as the type holds it) and `labels`, into a poisoned gradient
//! followed by a poisoned guard and a poisoned loss, with a poisoned workspace; `in_place` gives the logits' buffer as
//! the gradient's. `offset` elements shift the logits and the gradient from cudaMalloc's alignment, and `grad_shift`
//! more the gradient alone. Checks the guard and (not in place) that the logits were kept.
StepRun run_step(const Step& step, bool is_bf16, const std::vector<float>& input, const std::vector<int>& labels,
                 Shape shape, float dloss = 1.0f, bool in_place = false, std::size_t offset = 0,
                 std::size_t grad_shift = 0)
{
    StepRun r;
    const std::size_t element = is_bf16 ? 2 : 4;
    const std::vector<unsigned char> in_bytes = narrow(input, is_bf16);
    const std::size_t bytes = in_bytes.size();
    DeviceBuffer<unsigned char> d_in(bytes + offset * element + guard_bytes);
    DeviceBuffer<unsigned char> d_out(bytes + (offset + grad_shift) * element + guard_bytes);
    DeviceBuffer<int> d_labels(labels.size());
    DeviceBuffer<float> d_loss(1);
    d_in.fill_bytes(0xFF, 0);
    d_out.fill_bytes(0xFF, 0);
    d_loss.fill_bytes(0xFF, 0);
    d_labels.upload(labels);
    STEPWISE_CUDA_CHECK(cudaMemcpy(d_in.data() + offset * element, in_bytes.data(), bytes, cudaMemcpyHostToDevice));
    unsigned char* in = d_in.data() + offset * element;
    unsigned char* out = in_place ? in : d_out.data() + (offset + grad_shift) * element;
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        return is_bf16 ? step.bf16(d_temp, temp_bytes, reinterpret_cast<const bf16*>(in), d_labels.data(),
                                   reinterpret_cast<bf16*>(out), d_loss.data(), shape.rows, shape.cols, ignore, dloss, 0)
                       : step.fp32(d_temp, temp_bytes, reinterpret_cast<const float*>(in), d_labels.data(),
                                   reinterpret_cast<float*>(out), d_loss.data(), shape.rows, shape.cols, ignore, dloss,
                                   0);
    };
    r.launch = launch_with_poisoned_workspace(call);  // outputs and guards are read and checked even where it failed
    std::vector<unsigned char> result(bytes + guard_bytes);
    STEPWISE_CUDA_CHECK(cudaMemcpy(result.data(), out, result.size(), cudaMemcpyDeviceToHost));
    for (std::size_t i = bytes; i < result.size(); ++i) {
        if (result[i] != 0xFF) {
            ADD_FAILURE() << "wrote past the gradient, at byte " << i - bytes << " after it";
            break;
        }
    }
    if (!in_place) {
        std::vector<unsigned char> kept(bytes);
        STEPWISE_CUDA_CHECK(cudaMemcpy(kept.data(), in, bytes, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(kept == in_bytes) << "the step changed its logits";
    }
    STEPWISE_CUDA_CHECK(cudaMemcpy(&r.loss, d_loss.data(), sizeof(float), cudaMemcpyDeviceToHost));
    std::memcpy(&r.loss_bits, &r.loss, sizeof(float));
    r.grad = widen(result.data(), input.size(), is_bf16);
    return r;
}

//! Compares a run's loss and whole gradient with the reference of the input (as the type rounds it).
void expect_matches_reference(const std::vector<float>& input, const std::vector<int>& labels, const StepRun& r,
                              Shape shape, bool is_bf16, float dloss = 1.0f)
{
    const std::vector<float> seen = is_bf16 ? from_bf16(to_bf16(input)) : input;
    const std::string what = std::to_string(shape.rows) + " x " + std::to_string(shape.cols) +
                             (is_bf16 ? " bf16" : " fp32");
    EXPECT_NE(r.loss_bits, poisoned_loss) << what << ": the loss was not written";
    const double expected_loss = mean_loss(seen.data(), labels.data(), shape.rows, shape.cols, ignore);
    const Tolerance lt = loss_tolerance(shape.rows, shape.cols);
    EXPECT_TRUE(loss_matches(r.loss, expected_loss, lt))
        << what << ": loss " << r.loss << ", expected " << expected_loss << " (tolerance " << lt.relative << ")";
    const double scale = gradient_scale(dloss, count_not_ignored(labels.data(), shape.rows, shape.cols, ignore));
    const Tolerance gt = gradient_tolerance(shape.cols, is_bf16);
    Comparison c;
    std::vector<double> expected(static_cast<std::size_t>(shape.cols));
    for (int i = 0; i < shape.rows; ++i) {
        const std::size_t first = static_cast<std::size_t>(i) * shape.cols;
        const bool skipped = is_ignored(labels[i], shape.cols, ignore);
        row_gradient(seen.data() + first, shape.cols, labels[i], skipped, scale, expected.data());
        compare_gradient_row(r.grad.data() + first, expected.data(), shape.cols, labels[i], scale, i, gt, c);
    }
    EXPECT_TRUE(c.passed()) << what << ": " << c.describe(gt);
}

class CrossEntropyStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    //! Random logits and labels (some ignored) at every shape, dloss 1 and 2.5, compared with the reference.
    void expect_every_shape(bool is_bf16)
    {
        const std::uint64_t seed = fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        for (const Shape& shape : stepwise::testing::shapes_to_run(shapes, large_shapes)) {
            const std::vector<float> input =
                random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed + shape.cols);
            const std::vector<int> labels = random_labels(shape.rows, shape.cols, ignore, ignored_one_in, seed + 1);
            for (const float dloss : {1.0f, 2.5f}) {
                const StepRun r = run_step(GetParam(), is_bf16, input, labels, shape, dloss);
                ASSERT_EQ(r.launch, cudaSuccess) << shape.rows << " x " << shape.cols;
                expect_matches_reference(input, labels, r, shape, is_bf16, dloss);
            }
        }
    }

    //! Rows of special values at row lengths of both paths: with them counted (the mean NaN, each gradient row as the
    //! reference says) and with the NaN rows ignored (the mean finite, their gradient zero).
    void expect_special_values(bool is_bf16)
    {
        const float inf = std::numeric_limits<float>::infinity();
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (const int cols : {3, 1000, 5000, 40000}) {
            const Shape shape{9, cols};
            std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * cols, fresh_seed());
            const auto row = [&](int r) { return input.begin() + static_cast<std::ptrdiff_t>(r) * cols; };
            std::vector<int> labels = {cols - 1, 0, 1, 0, cols / 3, cols / 2, cols - 1, 0, 0};
            row(0)[cols / 2] = nan;                   // NaN: this row's loss and gradient NaN
            row(1)[cols - 1] = inf;                   // +inf: NaN
            std::fill(row(2), row(3), -inf);          // all -inf: NaN
            for (int j = 0; j < cols; j += 2) {       // half -inf, the label among them: loss +inf, those give 0
                row(3)[j] = -inf;
            }
            row(4)[cols / 3] = 1e30f;                 // one huge logit, the label's: loss 0
            std::fill(row(5), row(6), 1e4f);          // constant and large: loss log(cols)
            row(6)[0] = 1e30f;                        // a huge logit away from the label (the last column)
            std::fill(row(7), row(8), -1e30f);        // constant and hugely negative
            labels[8] = ignore;                       // an ignored row
            if (cols == 3) {
                labels[3] = 1;  // a finite label in the half -inf row of three (column 1 is 0)
            }
            StepRun r = run_step(GetParam(), is_bf16, input, labels, shape);
            ASSERT_EQ(r.launch, cudaSuccess) << cols << " values per row";
            expect_matches_reference(input, labels, r, shape, is_bf16);
            EXPECT_TRUE(std::isnan(r.loss)) << cols << ": a NaN row makes the mean NaN";
            for (const int i : {0, 1, 2}) {
                labels[i] = ignore;  // the NaN rows left out: a finite mean (or +inf, from row 3's -inf label)
            }
            r = run_step(GetParam(), is_bf16, input, labels, shape);
            ASSERT_EQ(r.launch, cudaSuccess);
            expect_matches_reference(input, labels, r, shape, is_bf16);
            EXPECT_FALSE(std::isnan(r.loss)) << cols;
        }
    }
};

TEST_P(CrossEntropyStepTest, MatchesTheReferenceAtEveryShapeInFp32) { expect_every_shape(false); }

TEST_P(CrossEntropyStepTest, MatchesTheReferenceAtEveryShapeInBf16) { expect_every_shape(true); }

TEST_P(CrossEntropyStepTest, NaNInfinitiesAndHugeLogitsInFp32) { expect_special_values(false); }

TEST_P(CrossEntropyStepTest, NaNInfinitiesAndHugeLogitsInBf16) { expect_special_values(true); }

TEST_P(CrossEntropyStepTest, EveryTokenIgnoredGivesNaNAndAZeroGradient)
{
    for (const Shape& shape : {Shape{5, 7}, Shape{3, 40000}}) {
        const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, fresh_seed());
        std::vector<int> labels(shape.rows, ignore);
        labels[1] = shape.cols;  // out of range: treated as ignored
        labels[2] = -1;
        for (const bool is_bf16 : {false, true}) {
            const StepRun r = run_step(GetParam(), is_bf16, input, labels, shape);
            ASSERT_EQ(r.launch, cudaSuccess);
            EXPECT_TRUE(std::isnan(r.loss)) << "0 / 0, as PyTorch's mean reduction";
            EXPECT_NE(r.loss_bits, poisoned_loss) << "the loss was not written";
            for (const float g : r.grad) {
                ASSERT_EQ(g, 0.0f);
            }
        }
    }
}

TEST_P(CrossEntropyStepTest, LabelsOutOfRangeAreTreatedAsIgnored)
{
    // The caller's error, which the steps' @pre say they treat as ignored: not counted, a zero gradient row, no read
    // outside the row.
    for (const Shape& shape : {Shape{8, 5}, Shape{8, 40000}}) {
        const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, fresh_seed());
        const std::vector<int> labels = {0,  shape.cols, -1, ignore, shape.cols - 1, std::numeric_limits<int>::max(),
                                         std::numeric_limits<int>::min(), 1};
        for (const bool is_bf16 : {false, true}) {
            const StepRun r = run_step(GetParam(), is_bf16, input, labels, shape);
            ASSERT_EQ(r.launch, cudaSuccess);
            expect_matches_reference(input, labels, r, shape, is_bf16);
        }
    }
}

TEST_P(CrossEntropyStepTest, InPlaceAndAtEveryElementAlignment)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape& shape : {Shape{100, 3}, Shape{64, 1024}, Shape{3, 32768}, Shape{2, 50257}, Shape{2, 65536}}) {
        const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, seed);
        const std::vector<int> labels = random_labels(shape.rows, shape.cols, ignore, ignored_one_in, seed + 1);
        for (const bool is_bf16 : {false, true}) {
            StepRun r = run_step(GetParam(), is_bf16, input, labels, shape, 1.0f, true);
            ASSERT_EQ(r.launch, cudaSuccess);
            expect_matches_reference(input, labels, r, shape, is_bf16);
            // Past a 16-byte boundary, the logits and the gradient alike (rows off boundaries), in place too, and the
            // gradient a little further (pointers off boundaries by different amounts).
            for (const auto& [offset, grad_shift, in_place] :
                 {std::tuple<std::size_t, std::size_t, bool>{1, 0, false}, {4, 0, false}, {7, 0, false}, {3, 0, true},
                  {1, 1, false}}) {
                r = run_step(GetParam(), is_bf16, input, labels, shape, 1.0f, in_place, offset, grad_shift);
                ASSERT_EQ(r.launch, cudaSuccess) << "offset " << offset << ", gradient " << grad_shift << " more";
                expect_matches_reference(input, labels, r, shape, is_bf16);
            }
        }
    }
}

//! Step 4's layout of a row off a 16-byte boundary (Peel): every logit in exactly one slot of an aligned row's layout
//! (support/peeled_row_layout.hpp). No GPU needed.
template <int Width>
void expect_each_logit_in_one_slot()
{
    namespace s = any_row_alignment;
    stepwise::testing::expect_each_value_in_one_slot<Width>(
        [](int head, int cols) { return s::peel_for<Width>(head, cols); },
        [](const s::Peel& peel, int k) { return s::end_column<Width>(peel, k); }, {1000, 32769, 50257});
}

TEST(CrossEntropyAnyRowAlignment, EachLogitInOneSlotOfAnAlignedRowsLayout)
{
    expect_each_logit_in_one_slot<4>();  // fp32
    expect_each_logit_in_one_slot<8>();  // bf16
}

TEST_P(CrossEntropyStepTest, TheSameLossOnEveryRun)
{
    const Shape shape{4096, 1000};
    const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, fresh_seed());
    const std::vector<int> labels = random_labels(shape.rows, shape.cols, ignore, ignored_one_in, 5);
    const StepRun first = run_step(GetParam(), false, input, labels, shape);
    for (int run = 0; run < 3; ++run) {
        EXPECT_EQ(run_step(GetParam(), false, input, labels, shape).loss_bits, first.loss_bits) << "run " << run;
    }
}

TEST_P(CrossEntropyStepTest, RejectsInvalidArguments)
{
    const Step& step = GetParam();
    DeviceBuffer<unsigned char> d(1 << 16);
    DeviceBuffer<int> labels(16);
    DeviceBuffer<float> loss(1);
    auto* x = reinterpret_cast<float*>(d.data());
    float* y = x + 4096;
    std::size_t temp_bytes = 0;
    const auto call = [&](const float* in, const int* l, float* out, float* lo, int rows, int cols) {
        return step.fp32(nullptr, temp_bytes, in, l, out, lo, rows, cols, ignore, 1.0f, 0);
    };
    EXPECT_EQ(call(x, labels.data(), y, loss.data(), 0, 4), cudaErrorInvalidValue);
    EXPECT_EQ(call(x, labels.data(), y, loss.data(), 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(call(nullptr, labels.data(), y, loss.data(), 4, 4), cudaErrorInvalidValue);
    EXPECT_EQ(call(x, nullptr, y, loss.data(), 4, 4), cudaErrorInvalidValue);
    EXPECT_EQ(call(x, labels.data(), nullptr, loss.data(), 4, 4), cudaErrorInvalidValue);
    EXPECT_EQ(call(x, labels.data(), y, nullptr, 4, 4), cudaErrorInvalidValue);
    EXPECT_EQ(call(reinterpret_cast<const float*>(d.data() + 2), labels.data(), y, loss.data(), 4, 4),
              cudaErrorInvalidValue);
    EXPECT_EQ(call(x, reinterpret_cast<const int*>(d.data() + 1), y, loss.data(), 4, 4), cudaErrorInvalidValue);
    EXPECT_EQ(call(x, labels.data(), x + 1, loss.data(), 4, 4), cudaErrorInvalidValue);  // partly overlapping
    EXPECT_EQ(call(x, labels.data(), x, loss.data(), 4, 4), cudaSuccess);                // in place
    EXPECT_EQ(step.bf16(nullptr, temp_bytes, reinterpret_cast<const bf16*>(d.data() + 1), labels.data(),
                        reinterpret_cast<bf16*>(y), loss.data(), 4, 4, ignore, 1.0f, 0),
              cudaErrorInvalidValue);
    stepwise::testing::expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& bytes) {
        return step.fp32(d_temp, bytes, x, labels.data(), y, loss.data(), 16, 4, ignore, 1.0f, 0);
    });
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(CrossEntropy, CrossEntropyStepTest, ::testing::ValuesIn(steps()), step_name);

TEST(CrossEntropyProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Shape shape{512, 50257};
    const std::vector<float> input = random_logits(static_cast<std::size_t>(shape.rows) * shape.cols, fresh_seed());
    const std::vector<int> labels = random_labels(shape.rows, shape.cols, ignore, ignored_one_in, 9);
    for (const Step& step : steps()) {
        ASSERT_EQ(run_step(step, false, input, labels, shape).launch, cudaSuccess) << step.id;
        ASSERT_EQ(run_step(step, true, input, labels, shape).launch, cudaSuccess) << step.id;
    }
}

}  // namespace
}  // namespace stepwise::cross_entropy
