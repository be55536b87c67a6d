// GPU tests of the SGEMM chapter: every step against a double-precision CPU product, and at 4096^3 against cuBLAS.
#include "core/device_buffer.hpp"
#include "support/gemm_test_support.hpp"
#include "support/gpu_test_support.hpp"
#include "sgemm/sgemm_autotune.hpp"
#include "sgemm/sgemm_reference.hpp"
#include "sgemm/sgemm_steps.hpp"

#include "../../snippets/sgemm/10_autotuned_tiles.cuh"
#include "../../snippets/sgemm/11_any_shape_any_size.cuh"
#include "../../snippets/sgemm/12_tf32_wmma.cuh"
#include "../../snippets/sgemm/13_tf32_wgmma.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

namespace stepwise::sgemm {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::under_sanitizer;

using Shape = stepwise::testing::GemmShape;
using stepwise::testing::shape_text;

//! Shapes of every kind: single elements, multiples of no tile, one to several tiles deep, rectangular (M != N, so
//! a swapped index shows); each step gets those its launcher accepts.
std::vector<Shape> shapes_for(const Step& step)
{
    const std::vector<Shape> all = {{1, 1, 1}, {127, 129, 131}, {33, 65, 7}, {128, 128, 16}, {256, 384, 48},
                                    {128, 256, 128}, {512, 768, 288}, {384, 128, 1024}, {127, 129, 132}, {33, 65, 8}};
    return stepwise::testing::accepted_shapes(step, all);
}

//! The smallest shape the step accepts with M != N, for the tests of one property.
Shape small_shape(const Step& step)
{
    for (const Shape s : {Shape{33, 65, 7}, Shape{256, 384, 48}}) {
        if (step.accepts(s.M, s.N, s.K)) {
            return s;
        }
    }
    return Shape{256, 384, 96};  // K a multiple of 32 (step 10)
}

double tolerance_for(const Step& step, int K) { return step.same_operation ? fp32_tolerance(K) : tf32_tolerance(K); }

//! Bit for bit, so that a NaN in an input compares equal to itself.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr std::size_t guard_floats = 1024;  // poisoned floats after C: an overrun changes them

class SgemmStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(GetParam()); !reason.empty()) {
            GTEST_SKIP() << GetParam().id << " " << reason;
        }
    }

    //! The step's `C = alpha A B + beta C` with C's initial contents `c_in` (empty: poisoned with NaN); checks that
    //! A and B were left alone and that nothing was written past C.
    void run(Shape s, const std::vector<float>& A, const std::vector<float>& B, float alpha, float beta,
             const std::vector<float>& c_in, std::vector<float>& c_out)
    {
        const std::size_t c_size = static_cast<std::size_t>(s.M) * s.N;
        DeviceBuffer<float> d_A(A.size());
        DeviceBuffer<float> d_B(B.size());
        DeviceBuffer<float> d_C(c_size + guard_floats);
        d_A.upload(A);
        d_B.upload(B);
        d_C.fill_bytes(0xFF, 0);
        if (!c_in.empty()) {
            ASSERT_EQ(cudaMemcpy(d_C.data(), c_in.data(), c_size * sizeof(float), cudaMemcpyHostToDevice),
                      cudaSuccess);
        }
        ASSERT_EQ(GetParam().sgemm(s.M, s.N, s.K, alpha, d_A.data(), d_B.data(), beta, d_C.data(), 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> all = d_C.download();
        const std::vector<unsigned char> poison(guard_floats * sizeof(float), 0xFF);
        ASSERT_EQ(std::memcmp(all.data() + c_size, poison.data(), poison.size()), 0) << "wrote past C";
        all.resize(c_size);
        c_out = all;
        EXPECT_TRUE(same_bits(d_A.download(), A)) << "the step changed A";
        EXPECT_TRUE(same_bits(d_B.download(), B)) << "the step changed B";
    }

    void expect_matches(Shape s, const std::vector<float>& got, const std::vector<double>& expected)
    {
        const Comparison c = compare(got, expected, tolerance_for(GetParam(), s.K));
        EXPECT_TRUE(c.within_tolerance()) << shape_text(s) << ": " << c.describe(s.N);
    }
};

TEST_P(SgemmStepTest, MatchesTheDoubleProductAtEveryShape)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Shape> shapes = shapes_for(GetParam());
    ASSERT_FALSE(shapes.empty());
    for (const Shape s : shapes) {
        SCOPED_TRACE(shape_text(s));
        const std::vector<float> A = random_matrix(s.M, s.K, seed + s.M);
        const std::vector<float> B = random_matrix(s.K, s.N, seed + s.N + 1);
        std::vector<float> C;
        ASSERT_NO_FATAL_FAILURE(run(s, A, B, 1.f, 0.f, {}, C));
        expect_matches(s, C, reference_gemm(s.M, s.N, s.K, 1.0, A, B, 0.0, {}));
    }
}

TEST_P(SgemmStepTest, BetaZeroDoesNotReadC)
{
    // C starts as NaN everywhere: one read of it would put a NaN in the result.
    const Shape s = small_shape(GetParam());
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<float> A = random_matrix(s.M, s.K, seed);
    const std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    const std::vector<float> nan_C(static_cast<std::size_t>(s.M) * s.N, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> C;
    ASSERT_NO_FATAL_FAILURE(run(s, A, B, 2.f, 0.f, nan_C, C));
    expect_matches(s, C, reference_gemm(s.M, s.N, s.K, 2.0, A, B, 0.0, {}));
}

TEST_P(SgemmStepTest, HonoursAlphaAndBeta)
{
    const Shape s = small_shape(GetParam());
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<float> A = random_matrix(s.M, s.K, seed);
    const std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    const std::vector<float> C0 = random_matrix(s.M, s.N, seed + 2);
    std::vector<float> C;
    ASSERT_NO_FATAL_FAILURE(run(s, A, B, 1.5f, -0.5f, C0, C));
    expect_matches(s, C, reference_gemm(s.M, s.N, s.K, 1.5, A, B, -0.5, C0));
}

TEST_P(SgemmStepTest, NanAndInfinityReachTheElementsTheReferenceSays)
{
    // A NaN in row 3 of A makes row 3 of C NaN; +Inf in column 5 of B makes column 5 of C infinite, with the sign
    // of A's element that meets it (A's row 3 has the NaN: that element stays NaN). A's column 2 is positive so
    // the infinity's sign is definite.
    const Shape s = small_shape(GetParam());
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<float> A = random_matrix(s.M, s.K, seed);
    std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    const int k_inf = std::min(2, s.K - 1);
    for (int i = 0; i < s.M; ++i) {
        A[static_cast<std::size_t>(i) * s.K + k_inf] = 0.25f + std::abs(A[static_cast<std::size_t>(i) * s.K + k_inf]);
    }
    A[static_cast<std::size_t>(3) * s.K + 0] = std::numeric_limits<float>::quiet_NaN();
    B[static_cast<std::size_t>(k_inf) * s.N + 5] = std::numeric_limits<float>::infinity();
    std::vector<float> C;
    ASSERT_NO_FATAL_FAILURE(run(s, A, B, 1.f, 0.f, {}, C));
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, 1.0, A, B, 0.0, {});
    ASSERT_TRUE(std::isnan(expected[static_cast<std::size_t>(3) * s.N + 7]));
    ASSERT_TRUE(std::isinf(expected[5]) && expected[5] > 0);
    expect_matches(s, C, expected);
}

TEST_P(SgemmStepTest, RejectsBadArgumentsAndLeavesCAlone)
{
    const Step& step = GetParam();
    const Shape s = small_shape(step);
    DeviceBuffer<float> d_A(static_cast<std::size_t>(s.M) * s.K + 4);
    DeviceBuffer<float> d_B(static_cast<std::size_t>(s.K) * s.N + 4);
    DeviceBuffer<float> d_C(static_cast<std::size_t>(s.M) * s.N + 4);
    d_C.fill_bytes(0x5A, 0);
    const auto call = [&](int M, int N, int K, const float* A, const float* B, float* C) {
        return step.sgemm(M, N, K, 1.f, A, B, 0.f, C, 0);
    };
    EXPECT_EQ(call(s.M, s.N, s.K, nullptr, d_B.data(), d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), nullptr, d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), d_B.data(), nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(call(0, s.N, s.K, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(call(s.M, -1, s.K, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(call(s.M, s.N, 0, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
    if (step.m_multiple > 1) {
        EXPECT_EQ(call(s.M + 1, s.N, s.K, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
        EXPECT_EQ(call(s.M, s.N - 1, s.K, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
        EXPECT_EQ(call(s.M, s.N, s.K + 1, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
    }
    if (step.k_multiple > 1) {
        EXPECT_EQ(call(s.M, s.N, s.K + 1, d_A.data(), d_B.data(), d_C.data()), cudaErrorInvalidValue);
    }
    if (step.needs_16_byte_alignment) {
        EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), d_B.data() + 1, d_C.data()), cudaErrorInvalidValue);
        EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data() + 1), cudaErrorInvalidValue);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> after = d_C.download();
    std::vector<unsigned char> expected(after.size() * sizeof(float), 0x5A);
    EXPECT_EQ(std::memcmp(after.data(), expected.data(), expected.size()), 0) << "a rejected call wrote to C";
}

//! `step`'s product of random n x n matrices against cuBLAS's, itself checked at sampled elements against double.
void expect_matches_cublas(const Step& step, int n)
{
    const CublasSgemm cublas(false);
    stepwise::testing::expect_step_matches_library(
        n, random_matrix, sample_indices,
        [&](const float* A, const float* B, float* C) { return cublas(n, n, n, 1.f, A, B, 0.f, C, 0); },
        [&](const float* A, const float* B, float* C) { return step.sgemm(n, n, n, 1.f, A, B, 0.f, C, 0); },
        [&](const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& sampled,
            const std::vector<std::size_t>& where) {
            return compare(sampled, reference_elements(n, n, n, 1.0, A, B, 0.0, {}, where), fp32_tolerance(n));
        },
        [&](const std::vector<float>& got, const std::vector<float>& expected) {
            const Comparison c =
                compare(got, std::vector<double>(expected.begin(), expected.end()), tolerance_for(step, n));
            EXPECT_TRUE(c.within_tolerance()) << "against cuBLAS: " << c.describe(n);
        });
}

TEST_P(SgemmStepTest, MatchesCublasAt4096)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "4096^3 under compute-sanitizer would take minutes; the sanitizers check the smaller shapes";
    }
    expect_matches_cublas(GetParam(), 4096);
}

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

INSTANTIATE_TEST_SUITE_P(Sgemm, SgemmStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- step 11 at any shape: the launcher's rule, every plan it can pick, pointers off by one float ----

namespace at = autotuned;

//! The shapes of every regime the rule has, on GPUs of several sizes.
const Shape rule_shapes[] = {{4096, 4096, 4096}, {2048, 2048, 2048}, {1024, 1024, 1024}, {1000, 1000, 1000},
                             {512, 512, 512},    {256, 256, 256},    {1, 1, 1},          {4097, 4097, 4097},
                             {8192, 8192, 128},  {128, 8192, 8192},  {8192, 128, 8192},  {7, 13, 5},
                             {333, 517, 1001},   {768, 768, 768},    {65, 100000, 3}};

TEST(SgemmPlan, TheRulePicksLargeTilesSplitKMediumOrSmallTilesByShape)
{
    // Host code only: runs without a GPU. An H100 has 132 SMs.
    const auto plan = [](int M, int N, int K) { return at::choose_plan(M, N, K, 132); };
    const int last = static_cast<int>(std::tuple_size_v<at::Configs>) - 1;
    for (const int n : {2048, 4095, 4096, 4097, 8192}) {
        EXPECT_EQ(plan(n, n, n).config, 0) << n;
        EXPECT_EQ(plan(n, n, n).splits, 1) << n;
    }
    EXPECT_EQ(plan(8192, 8192, 128).config, 0);  // short K, many tiles
    EXPECT_EQ(plan(8192, 8192, 128).splits, 1);
    for (const Shape s : {Shape{128, 8192, 8192}, Shape{8192, 128, 8192}}) {
        const at::Plan p = plan(s.M, s.N, s.K);  // few tiles, long K: split
        EXPECT_EQ(p.config, 0) << shape_text(s);
        EXPECT_GT(p.splits, 1) << shape_text(s);
        EXPECT_GE(100LL * ((s.M + 127) / 128) * ((s.N + 127) / 128) * p.splits, at::fill_percent * 132LL * 2)
            << shape_text(s);
    }
    for (const int n : {1000, 1024}) {  // too few large tiles, K too short to split: the medium tiles
        EXPECT_EQ(plan(n, n, n).config, 1) << n;
        EXPECT_EQ(plan(n, n, n).splits, 1) << n;
    }
    for (const int n : {1, 256, 512}) {  // nothing fills the GPU: the smallest tiles, whole K
        EXPECT_EQ(plan(n, n, n).config, last) << n;
        EXPECT_EQ(plan(n, n, n).splits, 1) << n;
    }
}

TEST(SgemmPlan, Step10RunsTheConfigurationStep11PicksForLargeSquareProblems)
{
    // Host code only. Step 10 is step 11's kernel in one configuration: the one step 11's launcher runs, unsplit,
    // over all of M, at 4096^3 on an H100's 132 SMs.
    const at::Plan p = at::choose_plan(4096, 4096, 4096, 132);
    EXPECT_EQ(p.splits, 1);
    EXPECT_EQ(p.rows, 4096);
    using Picked = std::tuple_element_t<0, at::Configs>;
    using Step10 = autotuned_tiles::Large;
    ASSERT_EQ(p.config, 0);
    EXPECT_EQ((std::array{Step10::BM, Step10::BN, Step10::BK, Step10::WM, Step10::WN, Step10::TM, Step10::TN,
                          Step10::stages, Step10::min_blocks, Step10::bursts}),
              (std::array{Picked::BM, Picked::BN, Picked::BK, Picked::WM, Picked::WN, Picked::TM, Picked::TN,
                          Picked::stages, Picked::min_blocks, Picked::bursts}));
}

TEST(SgemmPlan, EveryPlanIsValidAndNoSplitIsEmpty)
{
    for (const int sms : {1, 16, 78, 114, 132, 144}) {
        for (const Shape s : rule_shapes) {
            const at::Plan p = at::choose_plan(s.M, s.N, s.K, sms);
            ASSERT_GE(p.config, 0);
            ASSERT_LT(p.config, static_cast<int>(std::size(at::config_tiles)));
            const int bk = at::config_tiles[p.config].BK;
            ASSERT_GE(p.splits, 1);
            EXPECT_LT(static_cast<long long>(p.splits - 1) * at::split_length(s.K, bk, p.splits), s.K)
                << shape_text(s) << " on " << sms << " SMs: an empty split";
            ASSERT_GE(p.rows, 1) << shape_text(s) << " on " << sms << " SMs";
            ASSERT_LE(p.rows, s.M) << shape_text(s) << " on " << sms << " SMs";
            if (p.rows < s.M) {  // whole waves: unsplit, whole tile rows
                EXPECT_EQ(p.splits, 1) << shape_text(s) << " on " << sms << " SMs";
                EXPECT_EQ(p.rows % at::config_tiles[p.config].BM, 0) << shape_text(s) << " on " << sms << " SMs";
            }
        }
    }
}

TEST(SgemmPlan, ALastWaveThatFillsLittleOfTheGpuIsPlannedOnItsOwn)
{
    // 4097^3 in 128 x 128 tiles, two blocks per SM on 132 SMs: 1089 tiles, 4 waves of 264 and 33 tiles more. The
    // first 4096 rows are exactly 4 waves; the last row is a problem of its own (K split or smaller tiles).
    const at::Plan body = at::choose_plan(4097, 4097, 4097, 132);
    EXPECT_EQ(body.config, 0);
    EXPECT_EQ(body.rows, 4096);
    const at::Plan rest = at::choose_plan(1, 4097, 4097, 132);
    EXPECT_EQ(rest.rows, 1);
    // 4095^3: 1024 tiles, the last wave 232 of 264: run as it is.
    EXPECT_EQ(at::choose_plan(4095, 4095, 4095, 132).rows, 4095);
    EXPECT_EQ(at::choose_plan(8192, 8192, 8192, 132).rows, 8192);  // 4096 tiles: the last wave half full
}

TEST(SgemmPlan, TheAutotuningSweepTimesWhatTheLauncherRunsExactlyOnce)
{
    // The sweep marks as chosen the row the launcher runs: exactly one (configuration, splits) of its list.
    for (const int sms : {16, 78, 114, 132, 144}) {
        for (const Shape s : rule_shapes) {
            int runs = 0;
            for (const AutotuneCandidate& c : autotune_candidates()) {
                for (const int splits : autotune_splits(c, s.M, s.N, s.K, sms)) {
                    runs += launcher_runs(c, splits, s.M, s.N, s.K, sms) ? 1 : 0;
                }
            }
            runs += launcher_whole_waves(s.M, s.N, s.K, sms) ? 1 : 0;  // the launcher's own row
            EXPECT_EQ(runs, 1) << shape_text(s) << " on " << sms << " SMs";
        }
    }
}

//! Step 11 through its launcher, or through a plan forced on it; inputs and C offset by `offset` floats into their
//! buffers (1: only 4-byte aligned), with poisoned guards before and after C.
class SgemmAnyShapeTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override { STEPWISE_SKIP_WITHOUT_GPU(); }

    using Launch = std::function<cudaError_t(int M, int N, int K, float alpha, const float* A, const float* B,
                                             float beta, float* C)>;

    static Launch launcher()
    {
        return [](int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
            return at::sgemm(M, N, K, alpha, A, B, beta, C, 0);
        };
    }

    static Launch forced(at::Plan plan)
    {
        return [plan](int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
            return at::sgemm_planned(plan, M, N, K, alpha, A, B, beta, C, 0);
        };
    }

    //! C = alpha A B + beta C0 (C0 empty: C starts as NaN, beta must be 0); checks guards, A and B.
    void run(Shape s, const std::vector<float>& A, const std::vector<float>& B, float alpha, float beta,
             const std::vector<float>& C0, int offset, const Launch& launch, std::vector<float>& C)
    {
        const std::size_t c_size = static_cast<std::size_t>(s.M) * s.N;
        DeviceBuffer<float> d_A(A.size() + offset);
        DeviceBuffer<float> d_B(B.size() + offset);
        DeviceBuffer<float> d_C(c_size + offset + guard_floats);
        ASSERT_EQ(cudaMemcpy(d_A.data() + offset, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(d_B.data() + offset, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        d_C.fill_bytes(0xFF, 0);
        if (!C0.empty()) {
            ASSERT_EQ(cudaMemcpy(d_C.data() + offset, C0.data(), c_size * sizeof(float), cudaMemcpyHostToDevice),
                      cudaSuccess);
        }
        ASSERT_EQ(launch(s.M, s.N, s.K, alpha, d_A.data() + offset, d_B.data() + offset, beta, d_C.data() + offset),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> all = d_C.download();
        const std::vector<unsigned char> poison(guard_floats * sizeof(float), 0xFF);
        ASSERT_EQ(std::memcmp(all.data(), poison.data(), offset * sizeof(float)), 0) << "wrote before C";
        ASSERT_EQ(std::memcmp(all.data() + offset + c_size, poison.data(), poison.size()), 0) << "wrote past C";
        C.assign(all.begin() + offset, all.begin() + offset + static_cast<std::ptrdiff_t>(c_size));
        std::vector<float> a_after = d_A.download();
        std::vector<float> b_after = d_B.download();
        EXPECT_TRUE(same_bits(std::vector<float>(a_after.begin() + offset, a_after.end()), A)) << "changed A";
        EXPECT_TRUE(same_bits(std::vector<float>(b_after.begin() + offset, b_after.end()), B)) << "changed B";
    }

    //! Fresh inputs; C = 1.5 A B - 0.5 C0 where `with_beta`, else C = A B over a C of NaN; every element checked.
    void check(Shape s, bool with_beta, int offset, const Launch& launch, std::uint64_t seed)
    {
        SCOPED_TRACE(shape_text(s) + (with_beta ? ", beta -0.5" : ", beta 0") + ", offset " + std::to_string(offset));
        const std::vector<float> A = random_matrix(s.M, s.K, seed);
        const std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
        const std::vector<float> C0 = with_beta ? random_matrix(s.M, s.N, seed + 2) : std::vector<float>{};
        std::vector<float> C;
        ASSERT_NO_FATAL_FAILURE(run(s, A, B, with_beta ? 1.5f : 1.f, with_beta ? -0.5f : 0.f, C0, offset, launch, C));
        const std::vector<double> expected =
            reference_gemm(s.M, s.N, s.K, with_beta ? 1.5 : 1.0, A, B, with_beta ? -0.5 : 0.0, C0);
        const Comparison c = compare(C, expected, fp32_tolerance(s.K));
        EXPECT_TRUE(c.within_tolerance()) << c.describe(s.N);
    }
};

TEST_P(SgemmAnyShapeTest, MatchesTheDoubleProductAtShapesThatAreMultiplesOfNothing)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Shape shapes[] = {{1, 1, 1},     {7, 13, 5},   {127, 129, 131}, {333, 517, 1001},
                            {1, 4097, 3},  {4097, 1, 2}, {129, 2, 999},   {130, 258, 17}};
    for (const Shape s : shapes) {
        ASSERT_NO_FATAL_FAILURE(check(s, false, 0, launcher(), seed + s.M));
        ASSERT_NO_FATAL_FAILURE(check(s, true, 0, launcher(), seed + s.N));
    }
}

TEST_P(SgemmAnyShapeTest, TakesPointersOffByOneFloat)
{
    // B and C only 4-byte aligned: the shapes that would take the aligned path take the one with edges.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape s : {Shape{256, 384, 64}, Shape{127, 129, 131}, Shape{128, 8, 2048}}) {
        ASSERT_NO_FATAL_FAILURE(check(s, false, 1, launcher(), seed + s.M));
        ASSERT_NO_FATAL_FAILURE(check(s, true, 1, launcher(), seed + s.N));
    }
}

TEST_P(SgemmAnyShapeTest, EveryConfigurationWithAndWithoutSplitK)
{
    // Each configuration of the launcher's table, forced, whole K and split (3 splits; 2048 of K in 7: uneven), in
    // each of its instances: a shape that fits the aligned one, one with N odd (unaligned), one with N a multiple of
    // 4 but M and K of nothing (edges), and one off by one float (unaligned).
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (int config = 0; config < static_cast<int>(std::size(at::config_tiles)); ++config) {
        for (const int splits : {1, 3, 7}) {
            SCOPED_TRACE("configuration " + std::to_string(config) + ", " + std::to_string(splits) + " splits");
            const at::Plan plan{config, splits};
            ASSERT_NO_FATAL_FAILURE(check({256, 384, 160}, false, 0, forced(plan), seed + config));
            ASSERT_NO_FATAL_FAILURE(check({256, 384, 160}, true, 0, forced(plan), seed + config + 1));
            ASSERT_NO_FATAL_FAILURE(check({127, 129, 131}, true, 0, forced(plan), seed + config + 2));
            ASSERT_NO_FATAL_FAILURE(check({127, 132, 131}, true, 0, forced(plan), seed + config + 4));
            ASSERT_NO_FATAL_FAILURE(check({65, 33, 2048}, false, 1, forced(plan), seed + config + 3));
        }
    }
}

TEST_P(SgemmAnyShapeTest, SplitKKeepsNanAndInfinityWhereTheReferenceHasThem)
{
    // A split product adds partial sums into C with atomics: a NaN of A still fills its row, and +Inf its column.
    const Shape s{128, 192, 2048};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<float> A = random_matrix(s.M, s.K, seed);
    std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    for (int i = 0; i < s.M; ++i) {
        A[static_cast<std::size_t>(i) * s.K + 1500] = 0.25f + std::abs(A[static_cast<std::size_t>(i) * s.K + 1500]);
    }
    A[static_cast<std::size_t>(3) * s.K + 100] = std::numeric_limits<float>::quiet_NaN();
    B[static_cast<std::size_t>(1500) * s.N + 5] = std::numeric_limits<float>::infinity();
    std::vector<float> C;
    ASSERT_NO_FATAL_FAILURE(run(s, A, B, 1.f, 0.f, {}, 0, forced({0, 4}), C));
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, 1.0, A, B, 0.0, {});
    ASSERT_TRUE(std::isnan(expected[static_cast<std::size_t>(3) * s.N + 7]));
    ASSERT_TRUE(std::isinf(expected[5]) && expected[5] > 0);
    const Comparison c = compare(C, expected, fp32_tolerance(s.K));
    EXPECT_TRUE(c.within_tolerance()) << c.describe(s.N);
}

TEST_P(SgemmAnyShapeTest, Matches1000CubedAtSampledElements)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "1000^3 under compute-sanitizer would take minutes; the smaller shapes are checked";
    }
    const Shape s{1000, 1000, 1000};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<float> A = random_matrix(s.M, s.K, seed);
    const std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    const std::vector<float> C0 = random_matrix(s.M, s.N, seed + 2);
    std::vector<float> C;
    ASSERT_NO_FATAL_FAILURE(run(s, A, B, 1.5f, -0.5f, C0, 0, launcher(), C));
    const std::vector<std::size_t> where = sample_indices(s.M, s.N, 4096, seed + 3);
    std::vector<float> sampled;
    for (const std::size_t i : where) {
        sampled.push_back(C[i]);
    }
    for (const float v : C) {
        ASSERT_FALSE(std::isnan(v)) << "a NaN in C";
    }
    const Comparison c = compare(sampled, reference_elements(s.M, s.N, s.K, 1.5, A, B, -0.5, C0, where),
                                 fp32_tolerance(s.K));
    EXPECT_TRUE(c.within_tolerance()) << c.describe(1);
}

TEST_P(SgemmAnyShapeTest, WholeWavesThenTheRowsLeftMatchTheDoubleProduct)
{
    // A shape whose last wave of large tiles fills little of this GPU: the launcher runs the rows of whole waves,
    // then plans the rows left anew (see SgemmPlan.ALastWaveThatFillsLittleOfTheGpuIsPlannedOnItsOwn).
    int device = 0;
    int sms = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
    const at::TileShape large = at::config_tiles[0];
    const int tiles_n = 8;
    const int tile_rows = sms * large.blocks_per_sm / tiles_n + 1;  // whole waves and a last one of at most 8 tiles
    const Shape s{(tile_rows - 1) * large.BM + 5, tiles_n * large.BN - 3, 40};
    const at::Plan plan = at::choose_plan(s.M, s.N, s.K, sms);
    ASSERT_EQ(plan.config, 0) << shape_text(s) << " on " << sms << " SMs";
    ASSERT_LT(plan.rows, s.M) << shape_text(s) << " on " << sms << " SMs: meant to leave a last wave";
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    ASSERT_NO_FATAL_FAILURE(check(s, false, 0, launcher(), seed));
    ASSERT_NO_FATAL_FAILURE(check(s, true, 0, launcher(), seed + 1));
}

TEST_P(SgemmAnyShapeTest, MatchesCublasAtTheRectangularShapes)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "8192-long shapes under compute-sanitizer would take minutes; the smaller shapes are checked";
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const CublasSgemm cublas(false);
    for (const Shape s : {Shape{8192, 8192, 128}, Shape{128, 8192, 8192}, Shape{8192, 128, 8192},
                          Shape{4097, 4097, 4097}}) {
        SCOPED_TRACE(shape_text(s));
        const std::vector<float> A = random_matrix(s.M, s.K, seed + s.M);
        const std::vector<float> B = random_matrix(s.K, s.N, seed + s.N);
        DeviceBuffer<float> d_A(A.size());
        DeviceBuffer<float> d_B(B.size());
        DeviceBuffer<float> d_C(static_cast<std::size_t>(s.M) * s.N);
        d_A.upload(A);
        d_B.upload(B);
        d_C.fill_bytes(0xFF, 0);
        ASSERT_EQ(cublas(s.M, s.N, s.K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> library = d_C.download();
        const std::vector<std::size_t> where = sample_indices(s.M, s.N, 1024, seed);
        std::vector<float> sampled;
        for (const std::size_t i : where) {
            sampled.push_back(library[i]);
        }
        const Comparison exact = compare(sampled, reference_elements(s.M, s.N, s.K, 1.0, A, B, 0.0, {}, where),
                                         fp32_tolerance(s.K));
        ASSERT_TRUE(exact.within_tolerance()) << "cuBLAS against double: " << exact.describe(1);
        d_C.fill_bytes(0xFF, 0);
        ASSERT_EQ(at::sgemm(s.M, s.N, s.K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const Comparison c = compare(d_C.download(), std::vector<double>(library.begin(), library.end()),
                                     fp32_tolerance(s.K));
        EXPECT_TRUE(c.within_tolerance()) << "against cuBLAS: " << c.describe(s.N);
    }
}

//! Only step 11: its tests count on its page ("Sgemm/SgemmAnyShapeTest.*/11_any_shape_any_size").
std::vector<Step> autotuned_step()
{
    std::vector<Step> out;
    for (const Step& step : steps()) {
        if (std::string(step.id) == "11_any_shape_any_size") {
            out.push_back(step);
        }
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Sgemm, SgemmAnyShapeTest, ::testing::ValuesIn(autotuned_step()), step_name);

// ---- the kernels Nsight Compute profiles for the chapter's roofline (make profile) ----

TEST(SgemmProfile, EveryStepOnceAt4096)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (under_sanitizer()) {
        GTEST_SKIP() << "4096^3 under compute-sanitizer would take minutes; the sanitizers check the smaller shapes";
    }
    for (const Step& step : steps()) {
        if (!unsupported_reason(step).empty()) {
            continue;  // SgemmUnsupported checks what it returns
        }
        SCOPED_TRACE(step.id);
        expect_matches_cublas(step, 4096);
    }
}

TEST(SgemmTf32, RejectsACNotAlignedTo32Bytes)
{
    // WMMA loads and stores C's fragments at 256-bit aligned addresses: 16 bytes are not enough.
    STEPWISE_SKIP_WITHOUT_GPU();
    DeviceBuffer<float> d_A(128 * 16);
    DeviceBuffer<float> d_B(16 * 128);
    DeviceBuffer<float> d_C(128 * 128 + 8);
    EXPECT_EQ(tf32_wmma::sgemm(128, 128, 16, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data() + 4), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(SgemmTf32Wgmma, AnyMAndNFromBAndCAlignedToAFloat)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Step& step = steps().back();
    if (const std::string reason = unsupported_reason(step); !reason.empty()) {
        GTEST_SKIP() << step.id << " " << reason;
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    // More than one cluster row of tiles with an odd last one (M = 300), N past two 256-wide tiles, and B and C one
    // float past 16-byte alignment: the transposing copy reads any B, the epilogue writes any C.
    const Shape s{300, 520, 36};
    const std::vector<float> A = random_matrix(s.M, s.K, seed);
    const std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    const std::vector<float> C0 = random_matrix(s.M, s.N, seed + 2);
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, 0.5, A, B, 2.0, C0);
    DeviceBuffer<float> d_A(A.size());
    DeviceBuffer<float> d_B(B.size() + 1);
    DeviceBuffer<float> d_C(C0.size() + 1 + guard_floats);
    d_A.upload(A);
    ASSERT_EQ(cudaMemcpy(d_B.data() + 1, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    d_C.fill_bytes(0xFF, 0);
    ASSERT_EQ(cudaMemcpy(d_C.data() + 1, C0.data(), C0.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(tf32_wgmma::sgemm(s.M, s.N, s.K, 0.5f, d_A.data(), d_B.data() + 1, 2.0f, d_C.data() + 1), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> all = d_C.download();
    const std::vector<float> C(all.begin() + 1, all.begin() + 1 + static_cast<std::ptrdiff_t>(C0.size()));
    const Comparison c = compare(C, expected, tf32_tolerance(s.K));
    EXPECT_TRUE(c.within_tolerance()) << c.describe(s.N);
    unsigned first = 0;
    std::memcpy(&first, all.data(), sizeof first);
    EXPECT_EQ(first, 0xFFFFFFFFu) << "wrote before C";
    const std::vector<unsigned char> poison(guard_floats * sizeof(float), 0xFF);
    EXPECT_EQ(std::memcmp(all.data() + 1 + C0.size(), poison.data(), poison.size()), 0) << "wrote past C";
    // A is read by the TMA: 16-byte aligned, K a multiple of 4.
    EXPECT_EQ(tf32_wgmma::sgemm(s.M, s.N, s.K, 1.f, d_A.data() + 1, d_B.data(), 0.f, d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(tf32_wgmma::sgemm(s.M, s.N, s.K - 1, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- the final steps at the limits their contracts state ----

//! Why this GPU cannot run the step `id` (empty where it can).
std::string why_it_cannot_run(const std::string& id)
{
    if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) {
        return "no usable CUDA GPU: " + reason;
    }
    for (const Step& step : steps()) {
        if (step.id == id) {
            const std::string reason = unsupported_reason(step);
            return reason.empty() ? "" : id + " " + reason;
        }
    }
    return "no step " + id;
}

//! stepwise::testing::expect_exact_product() of a launch of step `id` at `shape`, or a skip where this GPU cannot run
//! that step.
//! @return whether this GPU runs the step
template <class Launch>
bool expect_exact_product_of(const std::string& id, Shape shape, Launch launch)
{
    if (const std::string why = why_it_cannot_run(id); !why.empty()) {
        [&] { GTEST_SKIP() << why; }();
        return false;
    }
    stepwise::testing::expect_exact_product<float, float>(shape, false, launch);
    return true;
}

//! expect_exact_product_of() of step `id`'s launcher `sgemm` (C = A B: alpha 1, beta 0) at `shape`.
template <class Sgemm>
void expect_exact_sgemm_of(const std::string& id, Shape shape, Sgemm sgemm)
{
    expect_exact_product_of(id, shape, [&](const float* A, const float* B, float* C) {
        return sgemm(shape.M, shape.N, shape.K, 1.f, A, B, 0.f, C, cudaStream_t{});
    });
}

constexpr int int_max = std::numeric_limits<int>::max();

TEST(SgemmFinalStep, RejectsPointersThatAreNotFloatAlignedAndLeavesCAlone)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    // A float pointer 2 bytes off would make the kernel's accesses misaligned and end the program's CUDA context.
    DeviceBuffer<float> d_A(64 * 64 + 1);
    DeviceBuffer<float> d_B(64 * 64 + 1);
    DeviceBuffer<float> d_C(64 * 64 + 1);
    d_C.fill_bytes(0x5A, 0);
    const auto off = [](float* p) { return reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(p) + 2); };
    const std::pair<const char*, std::function<cudaError_t(const float*, const float*, float*)>> launchers[] = {
        {"sgemm",
         [](const float* A, const float* B, float* C) { return autotuned::sgemm(64, 64, 64, 1.f, A, B, 0.f, C); }},
        {"sgemm_with<Small>", [](const float* A, const float* B, float* C) {
             return autotuned::sgemm_with<autotuned::Small>(64, 64, 64, 1.f, A, B, 0.f, C, 2);
         }}};
    for (const auto& [name, launch] : launchers) {
        SCOPED_TRACE(name);
        EXPECT_EQ(launch(off(d_A.data()), d_B.data(), d_C.data()), cudaErrorInvalidValue);
        EXPECT_EQ(launch(d_A.data(), off(d_B.data()), d_C.data()), cudaErrorInvalidValue);
        EXPECT_EQ(launch(d_A.data(), d_B.data(), off(d_C.data())), cudaErrorInvalidValue);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "the context survives";
    const std::vector<float> after = d_C.download();
    const std::vector<unsigned char> untouched(after.size() * sizeof(float), 0x5A);
    EXPECT_EQ(std::memcmp(after.data(), untouched.data(), untouched.size()), 0) << "a rejected call wrote to C";
}

TEST(SgemmFinalStep, MUpToIntMax)
{
    // More rows than one grid's 65535 tile rows: the launcher runs them a grid at a time.
    expect_exact_sgemm_of("11_any_shape_any_size", {int_max, 1, 1}, autotuned::sgemm);
}

TEST(SgemmFinalStep, NUpToIntMax) { expect_exact_sgemm_of("11_any_shape_any_size", {1, int_max, 1}, autotuned::sgemm); }

TEST(SgemmFinalStep, KUpToIntMaxSplitAmongTheMostBlocks)
{
    // sgemm runs a 1 x 1 x INT_MAX product in one block (seconds); the same kernel with K split 65535 ways checks
    // the split's arithmetic at INT_MAX in a fraction of that.
    expect_exact_product_of("11_any_shape_any_size", {1, 1, int_max}, [](auto A, auto B, auto C) {
        return autotuned::sgemm_with<autotuned::Small>(1, 1, int_max, 1.f, A, B, 0.f, C, 65535);
    });
}

TEST(SgemmFinalStep, SgemmWithTakesTheGridsLastTileRowAndNotOneMore)
{
    constexpr int rows = 65535 * autotuned::Small::BM;
    if (!expect_exact_product_of("11_any_shape_any_size", {rows, 3, 5}, [](auto A, auto B, auto C) {
            return autotuned::sgemm_with<autotuned::Small>(rows, 3, 5, 1.f, A, B, 0.f, C, 1);
        })) {
        return;
    }
    DeviceBuffer<float> d_A(static_cast<std::size_t>(rows + 1) * 5);
    DeviceBuffer<float> d_B(5 * 3);
    DeviceBuffer<float> d_C(static_cast<std::size_t>(rows + 1) * 3);
    const auto call = [&](int M, int splits) {
        return autotuned::sgemm_with<autotuned::Small>(M, 3, 5, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), splits);
    };
    EXPECT_EQ(call(rows + 1, 1), cudaErrorInvalidValue);
    EXPECT_EQ(call(rows, 0), cudaErrorInvalidValue);
    EXPECT_EQ(call(rows, 65536), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(SgemmTf32Wgmma, MUpToIntMax) { expect_exact_sgemm_of("13_tf32_wgmma", {int_max, 1, 4}, tf32_wgmma::sgemm); }

TEST(SgemmTf32Wgmma, NUpToIntMax)
{
    // 77 GiB: B, its transposed copy and C (an H100 has too little memory and skips it).
    expect_exact_sgemm_of("13_tf32_wgmma", {1, int_max, 4}, tf32_wgmma::sgemm);
}

TEST(SgemmTf32Wgmma, KUpToTheLimitAndNotOneMoreNorTooManyTiles)
{
    constexpr int K = 65535 * 32;
    if (!expect_exact_product_of("13_tf32_wgmma", {3, 5, K}, [](auto A, auto B, auto C) {
            return tf32_wgmma::sgemm(3, 5, K, 1.f, A, B, 0.f, C);
        })) {
        return;
    }
    DeviceBuffer<float> d_A(3 * static_cast<std::size_t>(K + 4));
    DeviceBuffer<float> d_B(static_cast<std::size_t>(K + 4) * 5);
    DeviceBuffer<float> d_C(3 * 5);
    EXPECT_EQ(tf32_wgmma::sgemm(3, 5, K + 4, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data()), cudaErrorInvalidValue);
    // A C of 2^46 tiles: rejected from the arguments alone, before anything is read.
    EXPECT_EQ(tf32_wgmma::sgemm(int_max, int_max, 4, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data()),
              cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- a step this GPU cannot run (sm_80 code on a 7.5 GPU, sm_90a code on anything but 9.0) says so, does nothing ----

TEST(SgemmUnsupported, AStepThisGpuCannotRunReturnsNotSupportedAndLeavesCAlone)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    constexpr int n = 128;
    DeviceBuffer<float> d_A(n * n);
    DeviceBuffer<float> d_B(n * n);
    DeviceBuffer<float> d_C(n * n);
    d_C.fill_bytes(0x5A, 0);
    int checked = 0;
    for (const Step& step : steps()) {
        if (unsupported_reason(step).empty()) {
            continue;
        }
        EXPECT_EQ(step.sgemm(n, n, n, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), 0), cudaErrorNotSupported)
            << step.id;
        ++checked;
    }
    if (checked == 0) {
        GTEST_SKIP() << "every step of the chapter runs on this GPU";
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> after = d_C.download();
    std::vector<unsigned char> expected(after.size() * sizeof(float), 0x5A);
    EXPECT_EQ(std::memcmp(after.data(), expected.data(), expected.size()), 0) << "an unsupported step wrote to C";
}

// ---- the library baselines the timing program measures ----

TEST(SgemmBaseline, CublasComputesTheRowMajorProductInFp32AndTf32)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Shape s{127, 129, 131};
    const std::uint64_t seed = fresh_seed();
    const std::vector<float> A = random_matrix(s.M, s.K, seed);
    const std::vector<float> B = random_matrix(s.K, s.N, seed + 1);
    const std::vector<float> C0 = random_matrix(s.M, s.N, seed + 2);
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, 1.5, A, B, -0.5, C0);
    DeviceBuffer<float> d_A(A.size());
    DeviceBuffer<float> d_B(B.size());
    DeviceBuffer<float> d_C(C0.size());
    d_A.upload(A);
    d_B.upload(B);
    for (const bool tf32 : {false, true}) {
        d_C.upload(C0);
        const CublasSgemm cublas(tf32);
        ASSERT_EQ(cublas(s.M, s.N, s.K, 1.5f, d_A.data(), d_B.data(), -0.5f, d_C.data(), 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const Comparison c = compare(d_C.download(), expected, tf32 ? tf32_tolerance(s.K) : fp32_tolerance(s.K));
        EXPECT_TRUE(c.within_tolerance()) << (tf32 ? "TF32: " : "fp32: ") << c.describe(s.N);
    }
}

// ---- how to call a step from your own code ----

TEST(SgemmUsage, MultiplyWithTheAutotunedStep)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (const std::string reason = stepwise::unsupported_reason(autotuned::requirement, autotuned::requirement_met());
        !reason.empty()) {
        GTEST_SKIP() << "11_any_shape_any_size " << reason;
    }
    const std::uint64_t seed = fresh_seed();
    const std::vector<float> h_A = random_matrix(512, 257, seed);
    const std::vector<float> h_B = random_matrix(257, 383, seed + 1);
    // example-begin sgemm-usage
    const int M = 512;  // C is M x N, A is M x K, B is K x N, all row-major:
    const int N = 383;  // any sizes for this step
    const int K = 257;
    std::vector<float> h_C(static_cast<std::size_t>(M) * N);

    float* d_A = nullptr;
    float* d_B = nullptr;
    float* d_C = nullptr;  // any float pointers; cudaMalloc's (16-byte aligned) are the fastest
    ASSERT_EQ(cudaMalloc(&d_A, h_A.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_B, h_B.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_C, h_C.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_A, h_A.data(), h_A.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_B, h_B.data(), h_B.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);

    // C = 1 * A * B + 0 * C: with beta = 0, C's old contents are not read.
    ASSERT_EQ(stepwise::sgemm::autotuned::sgemm(M, N, K, 1.f, d_A, d_B, 0.f, d_C), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_C.data(), d_C, h_C.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);

    ASSERT_EQ(cudaFree(d_C), cudaSuccess);
    ASSERT_EQ(cudaFree(d_B), cudaSuccess);
    ASSERT_EQ(cudaFree(d_A), cudaSuccess);
    // example-end sgemm-usage
    const Comparison c = compare(h_C, reference_gemm(M, N, K, 1.0, h_A, h_B, 0.0, {}), fp32_tolerance(K));
    EXPECT_TRUE(c.within_tolerance()) << c.describe(N);
}

}  // namespace
}  // namespace stepwise::sgemm
