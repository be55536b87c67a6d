// GPU tests of the normalization backward chapter: every step against the double-precision CPU reference, LayerNorm
// and RMSNorm, fp32 and bf16, at shapes that are multiples of nothing and at many rows (the parameters' gradients sum
// them), with special values, the same bits on every run, and invalid arguments. Outputs and the workspace are
// poisoned before each run; guards after dx, dgamma and dbeta must stay poisoned, and the inputs unchanged.
#include "core/bf16.hpp"
#include "core/device_buffer.hpp"
#include "normalization_backward/normalization_backward_reference.hpp"
#include "normalization_backward/normalization_backward_steps.hpp"
#include "support/gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace stepwise::normalization_backward {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::launch_with_poisoned_workspace;
using bf16 = __nv_bfloat16;

struct Shape {
    int rows, cols;
};

//! A value, a few, rows of a block's worth and more, vocabularies' widths (multiples of nothing: 50257), long rows;
//! many short rows and many rows of a thousand (dgamma and dbeta sum 100000 and 1000 rows); short rows on 16-byte
//! boundaries of 8 to 256 values, from one lane to a warp (step 10's groups of lanes); either side of the
//! lengths where a step changes how it holds a row (1024, 4096 and 16384 values: steps 3 and 4's registers; 131072:
//! step 7's clusters), a row of 8 x 5001 values that leaves a cluster's last block a part of a slice, and one of
//! 8 x 1025 bf16 values, whose last group of 32 chunks has one chunk (step 12 lays out column sums by such groups);
//! a few rows of a block's worth (7 x 8200, 2 x 16384), which leave blocks of step 13's clusters without a row.
const std::vector<Shape> shapes = {{1, 1},     {7, 3},     {100000, 3}, {3, 8},     {77, 24},   {1001, 128},
                                   {513, 256}, {37, 1000}, {33, 513},   {1000, 1000}, {6, 1025}, {5, 4097},
                                   {9, 8191},  {7, 8200},  {2, 16384}, {3, 16385},  {4, 32768}, {5, 40008},
                                   {3, 50257}, {2, 131072}, {2, 131080}};
//! Shapes left out under compute-sanitizer (slow there).
const std::vector<Shape> large_shapes = {{4096, 4096}};

constexpr std::size_t guard_floats = 64;  //!< poisoned floats after each output

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

//! A problem's inputs, x and dy as the type holds them, and the forward's statistics as it saves them (fp32).
struct Problem {
    Shape shape;
    bool is_bf16, layer_norm;
    std::vector<float> x, dy, gamma, mean, rstd;
};

//! Random x (rows off center), dy and gamma; each row's mean and rstd computed in double from x with `epsilon`.
Problem random_problem(Shape shape, bool is_bf16, bool layer_norm, std::uint64_t seed, double epsilon = 1e-5)
{
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Problem p{shape, is_bf16, layer_norm, {}, {}, {}, {}, {}};
    const std::size_t n = static_cast<std::size_t>(shape.rows) * shape.cols;
    p.x.resize(n);
    p.dy.resize(n);
    p.gamma.resize(static_cast<std::size_t>(shape.cols));
    for (int i = 0; i < shape.rows; ++i) {
        const float offset = 2.0f * u(gen);
        for (int j = 0; j < shape.cols; ++j) {
            p.x[static_cast<std::size_t>(i) * shape.cols + j] = offset + 3.0f * u(gen);
        }
    }
    for (float& v : p.dy) {
        v = u(gen);
    }
    for (float& v : p.gamma) {
        v = 1.0f + 0.5f * u(gen);
    }
    if (is_bf16) {
        p.x = round_to_bf16(p.x);
        p.dy = round_to_bf16(p.dy);
    }
    p.mean.resize(static_cast<std::size_t>(shape.rows));
    p.rstd.resize(p.mean.size());
    saved_statistics(p.x.data(), shape.rows, shape.cols, layer_norm, epsilon, p.mean.data(), p.rstd.data());
    return p;
}

//! What a run wrote: its launch's error, dx, dgamma and dbeta (LayerNorm).
struct StepRun {
    cudaError_t launch = cudaErrorUnknown;
    std::vector<float> dx, dgamma, dbeta;
};

//! How many elements past a 16-byte boundary x, dy, dx and gamma start (0: on it, as cudaMalloc gives them).
struct Offsets {
    int x = 0, dy = 0, dx = 0, gamma = 0;
};

//! Runs `step` on `p` into poisoned outputs, each followed by a poisoned guard, with a poisoned workspace; checks the
//! guards and that the inputs were kept. x, dy, dx and gamma start `offsets` elements into their buffers.
StepRun run_step(const Step& step, const Problem& p, Offsets offsets = {})
{
    const std::size_t n = p.x.size(), cols = p.gamma.size();
    const std::vector<unsigned char> x_bytes = narrow(p.x, p.is_bf16), dy_bytes = narrow(p.dy, p.is_bf16);
    const std::size_t element = p.is_bf16 ? 2 : 4;
    const std::size_t x_at = offsets.x * element, dy_at = offsets.dy * element, dx_at = offsets.dx * element;
    DeviceBuffer<unsigned char> d_x_buffer(x_at + x_bytes.size()), d_dy_buffer(dy_at + dy_bytes.size());
    DeviceBuffer<unsigned char> d_dx_buffer(dx_at + (n + guard_floats) * element);
    DeviceBuffer<float> d_gamma_buffer(offsets.gamma + cols), d_mean(p.mean.size()), d_rstd(p.rstd.size());
    DeviceBuffer<float> d_dgamma(cols + guard_floats), d_dbeta(cols + guard_floats);
    unsigned char* const d_x = d_x_buffer.data() + x_at;
    unsigned char* const d_dy = d_dy_buffer.data() + dy_at;
    unsigned char* const d_dx = d_dx_buffer.data() + dx_at;
    float* const d_gamma = d_gamma_buffer.data() + offsets.gamma;
    STEPWISE_CUDA_CHECK(cudaMemcpy(d_x, x_bytes.data(), x_bytes.size(), cudaMemcpyHostToDevice));
    STEPWISE_CUDA_CHECK(cudaMemcpy(d_dy, dy_bytes.data(), dy_bytes.size(), cudaMemcpyHostToDevice));
    STEPWISE_CUDA_CHECK(cudaMemcpy(d_gamma, p.gamma.data(), cols * sizeof(float), cudaMemcpyHostToDevice));
    d_mean.upload(p.mean);
    d_rstd.upload(p.rstd);
    d_dx_buffer.fill_bytes(0xFF, 0);
    d_dgamma.fill_bytes(0xFF, 0);
    d_dbeta.fill_bytes(0xFF, 0);
    const int rows = p.shape.rows, n_cols = p.shape.cols;
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        if (p.is_bf16) {
            const auto* x = reinterpret_cast<const bf16*>(d_x);
            const auto* dy = reinterpret_cast<const bf16*>(d_dy);
            auto* dx = reinterpret_cast<bf16*>(d_dx);
            return p.layer_norm ? step.layer_norm_bf16(d_temp, temp_bytes, x, dy, d_gamma, d_mean.data(),
                                                       d_rstd.data(), dx, d_dgamma.data(), d_dbeta.data(), rows,
                                                       n_cols, 0)
                                : step.rms_norm_bf16(d_temp, temp_bytes, x, dy, d_gamma, d_rstd.data(), dx,
                                                     d_dgamma.data(), rows, n_cols, 0);
        }
        const auto* x = reinterpret_cast<const float*>(d_x);
        const auto* dy = reinterpret_cast<const float*>(d_dy);
        auto* dx = reinterpret_cast<float*>(d_dx);
        return p.layer_norm ? step.layer_norm_fp32(d_temp, temp_bytes, x, dy, d_gamma, d_mean.data(), d_rstd.data(),
                                                   dx, d_dgamma.data(), d_dbeta.data(), rows, n_cols, 0)
                            : step.rms_norm_fp32(d_temp, temp_bytes, x, dy, d_gamma, d_rstd.data(), dx,
                                                 d_dgamma.data(), rows, n_cols, 0);
    };
    StepRun r;
    r.launch = launch_with_poisoned_workspace(call);
    std::vector<unsigned char> dx_bytes((n + guard_floats) * element);
    STEPWISE_CUDA_CHECK(cudaMemcpy(dx_bytes.data(), d_dx, dx_bytes.size(), cudaMemcpyDeviceToHost));
    for (std::size_t i = n * element; i < dx_bytes.size(); ++i) {
        if (dx_bytes[i] != 0xFF) {
            ADD_FAILURE() << "wrote past dx, at byte " << i - n * element << " after it";
            break;
        }
    }
    r.dx = widen(dx_bytes.data(), n, p.is_bf16);
    const auto download_guarded = [&](DeviceBuffer<float>& d, const char* what, bool written) {
        std::vector<float> all = d.download();
        for (std::size_t i = written ? cols : 0; i < all.size(); ++i) {
            std::uint32_t bits;
            std::memcpy(&bits, &all[i], sizeof bits);
            if (bits != 0xFFFFFFFFu) {
                ADD_FAILURE() << "wrote " << what << " at " << i << ", past its " << (written ? cols : 0) << " values";
                break;
            }
        }
        all.resize(cols);
        return all;
    };
    r.dgamma = download_guarded(d_dgamma, "dgamma", true);
    r.dbeta = download_guarded(d_dbeta, "dbeta", p.layer_norm);  // RMSNorm: nothing of dbeta written
    std::vector<unsigned char> kept(x_bytes.size());
    STEPWISE_CUDA_CHECK(cudaMemcpy(kept.data(), d_x, kept.size(), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(kept == x_bytes) << "the step changed x";
    STEPWISE_CUDA_CHECK(cudaMemcpy(kept.data(), d_dy, kept.size(), cudaMemcpyDeviceToHost));
    EXPECT_TRUE(kept == dy_bytes) << "the step changed dy";
    return r;
}

//! Compares a run with the reference of its problem: every row of dx, and dgamma (and dbeta) column by column.
void expect_matches_reference(const Problem& p, const StepRun& r)
{
    const int rows = p.shape.rows, cols = p.shape.cols;
    const std::string what = std::to_string(rows) + " x " + std::to_string(cols) +
                             (p.layer_norm ? " LayerNorm" : " RMSNorm") + (p.is_bf16 ? " bf16" : " fp32");
    std::vector<double> dx(static_cast<std::size_t>(cols)), dgamma(static_cast<std::size_t>(cols), 0.0),
        dbeta(static_cast<std::size_t>(cols), 0.0);
    const double dx_tol = dx_tolerance(cols, p.is_bf16);
    Comparison c;
    for (int i = 0; i < rows; ++i) {
        const std::size_t first = static_cast<std::size_t>(i) * cols;
        if (p.layer_norm) {
            layer_norm_backward_row(p.x.data() + first, p.dy.data() + first, p.gamma.data(), p.mean[i], p.rstd[i], cols,
                                    dx.data(), dgamma.data(), dbeta.data());
        } else {
            rms_norm_backward_row(p.x.data() + first, p.dy.data() + first, p.gamma.data(), p.rstd[i], cols, dx.data(),
                                  dgamma.data());
        }
        compare_dx_row(p.x.data() + first, p.dy.data() + first, p.gamma.data(), p.mean[i], p.rstd[i], p.layer_norm,
                       r.dx.data() + first, dx.data(), cols, i, dx_tol, c);
    }
    EXPECT_TRUE(c.passed()) << what << ": " << c.describe(dx_tol);
    std::vector<double> magnitude_g(static_cast<std::size_t>(cols)), magnitude_b(static_cast<std::size_t>(cols));
    parameter_magnitudes(p.x.data(), p.dy.data(), p.layer_norm ? p.mean.data() : nullptr, p.rstd.data(), rows, cols,
                         magnitude_g.data(), p.layer_norm ? magnitude_b.data() : nullptr);
    const double parameter_tol = parameter_tolerance(rows);
    Comparison pc;
    compare_parameter_gradient("dgamma", r.dgamma.data(), dgamma.data(), magnitude_g.data(), cols, parameter_tol, pc);
    if (p.layer_norm) {
        compare_parameter_gradient("dbeta", r.dbeta.data(), dbeta.data(), magnitude_b.data(), cols, parameter_tol, pc);
    }
    EXPECT_TRUE(pc.passed()) << what << ": " << pc.describe(parameter_tol);
}

class NormBackwardStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    void expect_every_shape(bool is_bf16, bool layer_norm)
    {
        const std::uint64_t seed = fresh_seed();
        SCOPED_TRACE("seed " + std::to_string(seed));
        for (const Shape& shape : stepwise::testing::shapes_to_run(shapes, large_shapes)) {
            const Problem p = random_problem(shape, is_bf16, layer_norm, seed + shape.cols);
            const StepRun r = run_step(GetParam(), p);
            ASSERT_EQ(r.launch, cudaSuccess) << shape.rows << " x " << shape.cols;
            expect_matches_reference(p, r);
        }
    }
};

TEST_P(NormBackwardStepTest, LayerNormMatchesTheReferenceInFp32) { expect_every_shape(false, true); }
TEST_P(NormBackwardStepTest, LayerNormMatchesTheReferenceInBf16) { expect_every_shape(true, true); }
TEST_P(NormBackwardStepTest, RmsNormMatchesTheReferenceInFp32) { expect_every_shape(false, false); }
TEST_P(NormBackwardStepTest, RmsNormMatchesTheReferenceInBf16) { expect_every_shape(true, false); }

//! A row with a NaN, saved by the forward with a NaN mean and rstd, makes its own row of dx NaN and dgamma NaN (its
//! xhat is NaN at every column), not dbeta nor the other rows; a row of equal values saved with epsilon 0 (rstd
//! infinite; RMSNorm: a row of zeros) has no xhat term, as the forward gave beta there. In fp32 and bf16, at lengths
//! that take each kind of kernel (value by value, a group of lanes, 16-byte chunks, a cluster's slices).
TEST_P(NormBackwardStepTest, ANaNRowStaysInItsDxAndDgammaAndEqualRowsHaveNoXhatTerm)
{
    for (const bool is_bf16 : {false, true}) {
        for (const bool layer_norm : {true, false}) {
            for (const int cols : {3, 128, 1000, 5000, 40008}) {
                Problem p = random_problem({6, cols}, is_bf16, layer_norm, fresh_seed());
                p.x[static_cast<std::size_t>(1) * cols + cols / 2] = std::numeric_limits<float>::quiet_NaN();
                p.mean[1] = p.rstd[1] = std::numeric_limits<float>::quiet_NaN();  // as the forward saves a NaN row's
                const float equal = layer_norm ? 2.5f : 0.0f;  // equal values, epsilon 0: rstd infinite
                std::fill(p.x.begin() + 3 * cols, p.x.begin() + 4 * cols, equal);
                p.mean[3] = equal;
                p.rstd[3] = std::numeric_limits<float>::infinity();
                const StepRun r = run_step(GetParam(), p);
                ASSERT_EQ(r.launch, cudaSuccess) << cols;
                for (int j = 0; j < cols; ++j) {
                    ASSERT_TRUE(std::isnan(r.dx[static_cast<std::size_t>(cols) + j])) << "row 1 col " << j;
                    ASSERT_FALSE(std::isnan(r.dx[j])) << "row 0 col " << j;
                }
                expect_matches_reference(p, r);
            }
        }
    }
}

TEST_P(NormBackwardStepTest, TheSameBitsOnEveryRun)
{
    for (const Shape shape : {Shape{4099, 128}, Shape{2048, 1000}, Shape{64, 32768}}) {
        const Problem p = random_problem(shape, true, true, fresh_seed());
        const StepRun first = run_step(GetParam(), p);
        ASSERT_EQ(first.launch, cudaSuccess);
        for (int run = 0; run < 2; ++run) {
            const StepRun again = run_step(GetParam(), p);
            EXPECT_TRUE(
                std::memcmp(again.dgamma.data(), first.dgamma.data(), first.dgamma.size() * sizeof(float)) == 0 &&
                std::memcmp(again.dbeta.data(), first.dbeta.data(), first.dbeta.size() * sizeof(float)) == 0 &&
                std::memcmp(again.dx.data(), first.dx.data(), first.dx.size() * sizeof(float)) == 0)
                << shape.rows << " x " << shape.cols << ", run " << run;
        }
    }
}

//! Rows whose length is a multiple of 8 values, with x, dy, dx or gamma in turn a few elements past a 16-byte boundary
//! (the others on it): every row off a boundary, where rows on one may be read 16 bytes at a time.
TEST_P(NormBackwardStepTest, RowsOffSixteenByteBoundaries)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape shape : {Shape{37, 1000}, Shape{9, 4096}, Shape{3, 16384}, Shape{2, 32768}}) {
        for (const bool is_bf16 : {false, true}) {
            const Problem p = random_problem(shape, is_bf16, shape.rows % 2 == 1, seed + shape.cols);
            for (const Offsets offsets : {Offsets{1, 0, 0, 0}, Offsets{0, 3, 0, 0}, Offsets{0, 0, 2, 0},
                                          Offsets{0, 0, 0, 1}, Offsets{5, 5, 5, 2}}) {
                const StepRun r = run_step(GetParam(), p, offsets);
                ASSERT_EQ(r.launch, cudaSuccess) << shape.rows << " x " << shape.cols;
                expect_matches_reference(p, r);
            }
        }
    }
}

TEST_P(NormBackwardStepTest, RejectsInvalidArguments)
{
    const Step& step = GetParam();
    DeviceBuffer<float> d(1 << 16);
    float* f = d.data();
    std::size_t bytes = 0;
    EXPECT_EQ(step.layer_norm_fp32(nullptr, bytes, nullptr, f, f, f, f, f, f, f, 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, bytes, f, f, f, nullptr, f, f, f, f, 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.layer_norm_fp32(nullptr, bytes, f, f, f, f, f, f, f, nullptr, 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, bytes, f, f, f, nullptr, f, f, 4, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, bytes, f, f, f, f, f, f, 0, 4, 0), cudaErrorInvalidValue);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, bytes, f, f, f, f, f, f, 4, 0, 0), cudaErrorInvalidValue);
    const auto* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(f) + 2);
    EXPECT_EQ(step.rms_norm_fp32(nullptr, bytes, f, f, f, odd, f, f, 4, 4, 0), cudaErrorInvalidValue);
    const auto* odd_bf16 = reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(f) + 1);
    auto* b = reinterpret_cast<bf16*>(f);
    EXPECT_EQ(step.rms_norm_bf16(nullptr, bytes, odd_bf16, b, f, f, b, f, 4, 4, 0), cudaErrorInvalidValue);
    stepwise::testing::expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& temp_bytes) {
        return step.layer_norm_fp32(d_temp, temp_bytes, f, f + 1024, f + 2048, f + 3072, f + 3076, f + 4096, f + 8192,
                                    f + 8256, 4, 16, 0);
    });
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(NormBackward, NormBackwardStepTest, ::testing::ValuesIn(steps()),
                         step_name);

//! Every step once in each operation and type at one shape: what the chapter's Nsight Compute profile runs.
TEST(NormBackwardProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    for (const Step& step : steps()) {
        for (const bool layer_norm : {true, false}) {
            for (const bool is_bf16 : {false, true}) {
                const Problem p = random_problem({4096, 4096}, is_bf16, layer_norm, 7);
                ASSERT_EQ(run_step(step, p).launch, cudaSuccess) << step.id;
            }
        }
    }
}

}  // namespace
}  // namespace stepwise::normalization_backward
