// GPU tests of the tensor-core GEMM chapter: every step against the double product of its bf16 inputs, at shapes
// that are multiples of no tile where a step takes them, and at 4096^3 against cuBLAS; the final step's
// configurations, its ping-pong consumers and three consumers over several tiles a block, and its paths for
// unaligned rows; the launchers' choices of configuration (no GPU needed); the libraries themselves against double.
#include "core/device_buffer.hpp"
#include "support/gemm_test_support.hpp"
#include "support/gpu_test_support.hpp"
#include "sgemm/sgemm_reference.hpp"
#include "tensor_core_gemm/tensor_core_gemm_autotune.hpp"
#include "tensor_core_gemm/tensor_core_gemm_cutlass.hpp"
#include "tensor_core_gemm/tensor_core_gemm_libraries.hpp"
#include "tensor_core_gemm/tensor_core_gemm_reference.hpp"
#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"

#include "../../snippets/tensor_core_gemm/10_ping_pong_consumers.cuh"
#include "../../snippets/tensor_core_gemm/11_split_columns.cuh"
#include "../../snippets/tensor_core_gemm/12_two_loaders.cuh"
#include "../../snippets/tensor_core_gemm/13_tile_choice_by_rounds.cuh"
#include "../../snippets/tensor_core_gemm/14_three_consumer_tiles.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::tensor_core_gemm {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::under_sanitizer;

using Shape = stepwise::testing::GemmShape;
using stepwise::testing::shape_text;

//! Shapes of every kind: single elements, multiples of no tile (K not a multiple of 8 either: rows the TMA cannot
//! address), one to several tiles deep, rectangular (M != N, so a swapped index shows); each step gets those its
//! launcher accepts.
std::vector<Shape> shapes_for(const Step& step)
{
    const std::vector<Shape> all = {{1, 1, 8}, {127, 129, 136}, {33, 65, 7}, {300, 1, 24}, {128, 256, 64},
                                    {256, 256, 128}, {256, 512, 192}, {384, 256, 1024}, {512, 768, 320}, {1, 300, 4095}};
    return stepwise::testing::accepted_shapes(step, all);
}

//! The smallest shape the step accepts with M != N, for the tests of one property.
Shape small_shape(const Step& step) { return step.accepts(33, 65, 7) ? Shape{33, 65, 7} : Shape{256, 512, 192}; }

constexpr std::size_t guard_elements = 1024;  // poisoned elements after C: an overrun changes them

//! Runs `gemm` on fresh device copies of A and B into a C poisoned with NaN and followed by a guard region; checks
//! that A and B were left alone and nothing was written past C. Returns C as floats.
std::vector<float> run(GemmFunction gemm, Shape s, const std::vector<bf16>& A, const std::vector<bf16>& B,
                       std::size_t a_offset = 0, std::size_t b_offset = 0)
{
    const std::size_t c_size = static_cast<std::size_t>(s.M) * s.N;
    DeviceBuffer<bf16> d_A(A.size() + a_offset);
    DeviceBuffer<bf16> d_B(B.size() + b_offset);
    DeviceBuffer<bf16> d_C(c_size + guard_elements);
    EXPECT_EQ(cudaMemcpy(d_A.data() + a_offset, A.data(), A.size() * sizeof(bf16), cudaMemcpyHostToDevice),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d_B.data() + b_offset, B.data(), B.size() * sizeof(bf16), cudaMemcpyHostToDevice),
              cudaSuccess);
    d_C.fill_bytes(0xFF, 0);
    EXPECT_EQ(gemm(s.M, s.N, s.K, d_A.data() + a_offset, d_B.data() + b_offset, d_C.data(), 0), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<bf16> all = d_C.download();
    const std::vector<unsigned char> poison(guard_elements * sizeof(bf16), 0xFF);
    EXPECT_EQ(std::memcmp(all.data() + c_size, poison.data(), poison.size()), 0) << "wrote past C";
    all.resize(c_size);
    std::vector<bf16> a_after(A.size());
    std::vector<bf16> b_after(B.size());
    EXPECT_EQ(cudaMemcpy(a_after.data(), d_A.data() + a_offset, A.size() * sizeof(bf16), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(b_after.data(), d_B.data() + b_offset, B.size() * sizeof(bf16), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::memcmp(a_after.data(), A.data(), A.size() * sizeof(bf16)), 0) << "the step changed A";
    EXPECT_EQ(std::memcmp(b_after.data(), B.data(), B.size() * sizeof(bf16)), 0) << "the step changed B";
    return to_float(all);
}

void expect_matches(Shape s, const std::vector<float>& got, const std::vector<double>& expected, Tolerance t)
{
    const sgemm::Comparison c = sgemm::compare(got, expected, t.of_max, t.of_element);
    EXPECT_TRUE(c.within_tolerance()) << shape_text(s) << ": " << c.describe(s.N);
}

class TensorCoreGemmStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(GetParam()); !reason.empty()) {
            GTEST_SKIP() << GetParam().id << " " << reason;
        }
    }
};

TEST_P(TensorCoreGemmStepTest, MatchesTheDoubleProductAtEveryShape)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Shape> shapes = shapes_for(GetParam());
    ASSERT_FALSE(shapes.empty());
    for (const Shape s : shapes) {
        SCOPED_TRACE(shape_text(s));
        const std::vector<bf16> A = random_matrix(s.M, s.K, seed + s.M);
        const std::vector<bf16> B = random_matrix(s.N, s.K, seed + s.N + 1);
        expect_matches(s, run(GetParam().gemm, s, A, B), reference_gemm(s.M, s.N, s.K, A, B), exact_tolerance(s.K));
    }
}

TEST_P(TensorCoreGemmStepTest, NanAndInfinityReachTheElementsTheReferenceSays)
{
    // A NaN in row 3 of A makes row 3 of C NaN; +Inf in column 5 of B makes column 5 of C infinite, with the sign of
    // A's element that meets it (A's column k_inf is positive, so the sign is definite).
    const Shape s = small_shape(GetParam());
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<bf16> A = random_matrix(s.M, s.K, seed);
    std::vector<bf16> B = random_matrix(s.N, s.K, seed + 1);
    const int k_inf = std::min(2, s.K - 1);
    for (int i = 0; i < s.M; ++i) {
        bf16& a = A[static_cast<std::size_t>(i) * s.K + k_inf];
        a = __float2bfloat16_rn(0.25f + std::abs(__bfloat162float(a)));
    }
    A[static_cast<std::size_t>(3) * s.K] = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
    B[static_cast<std::size_t>(5) * s.K + k_inf] = __float2bfloat16_rn(std::numeric_limits<float>::infinity());
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, A, B);
    ASSERT_TRUE(std::isnan(expected[static_cast<std::size_t>(3) * s.N + 7]));
    ASSERT_TRUE(std::isinf(expected[5]) && expected[5] > 0);
    expect_matches(s, run(GetParam().gemm, s, A, B), expected, exact_tolerance(s.K));
}

TEST_P(TensorCoreGemmStepTest, RejectsBadArgumentsAndLeavesCAlone)
{
    const Step& step = GetParam();
    const Shape s = small_shape(step);
    DeviceBuffer<bf16> d_A(static_cast<std::size_t>(s.M) * s.K + 8);
    DeviceBuffer<bf16> d_B(static_cast<std::size_t>(s.K) * s.N + 8);
    DeviceBuffer<bf16> d_C(static_cast<std::size_t>(s.M) * s.N + 8);
    d_C.fill_bytes(0x5A, 0);
    const auto call = [&](int M, int N, int K, const bf16* A, const bf16* B, bf16* C) {
        return step.gemm(M, N, K, A, B, C, 0);
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
        EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), d_B.data() + 1, d_C.data()), cudaErrorInvalidValue);
        EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data() + 1), cudaErrorInvalidValue);
    } else {  // any shape and any 16-bit aligned A and B; C must hold bf16 at 2-byte alignment
        bf16* odd_c = reinterpret_cast<bf16*>(reinterpret_cast<char*>(d_C.data()) + 1);
        EXPECT_EQ(call(s.M, s.N, s.K, d_A.data(), d_B.data(), odd_c), cudaErrorInvalidValue);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<bf16> after = d_C.download();
    const std::vector<unsigned char> expected(after.size() * sizeof(bf16), 0x5A);
    EXPECT_EQ(std::memcmp(after.data(), expected.data(), expected.size()), 0) << "a rejected call wrote to C";
}

TEST_P(TensorCoreGemmStepTest, MatchesCublasAt4096)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "4096^3 under compute-sanitizer would take minutes; the sanitizers check the smaller shapes";
    }
    constexpr int n = 4096;
    const CublasGemmBf16 cublas;
    stepwise::testing::expect_step_matches_library(
        n, random_matrix, sgemm::sample_indices,
        [&](const bf16* A, const bf16* B, bf16* C) { return cublas(n, n, n, A, B, C, 0); },
        [&](const bf16* A, const bf16* B, bf16* C) { return GetParam().gemm(n, n, n, A, B, C, 0); },
        [&](const std::vector<bf16>& A, const std::vector<bf16>& B, const std::vector<float>& sampled,
            const std::vector<std::size_t>& where) {
            const Tolerance t = exact_tolerance(n);
            return sgemm::compare(sampled, reference_elements(n, n, n, A, B, where), t.of_max, t.of_element);
        },
        [&](const std::vector<float>& got, const std::vector<float>& expected) {
            expect_matches({n, n, n}, got, std::vector<double>(expected.begin(), expected.end()), rounded_tolerance(n));
        });
}

INSTANTIATE_TEST_SUITE_P(TensorCoreGemm, TensorCoreGemmStepTest, ::testing::ValuesIn(steps()),
                         [](const ::testing::TestParamInfo<Step>& info) { return std::string(info.param.id); });

// ---- step 8: clusters that walk several tiles ----

TEST(TensorCoreGemmPersistent, ClustersWalkSeveralTilesAndAGroupOfOneClusterRow)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const auto step = std::find_if(steps().begin(), steps().end(), [](const Step& s) {
        return std::string(s.id) == "08_persistent_tile_scheduler";
    });
    ASSERT_NE(step, steps().end());
    if (const std::string reason = unsupported_reason(*step); !reason.empty()) {
        GTEST_SKIP() << step->id << " " << reason;
    }
    // 2304 x 2048: 9 x 8 places of a cluster's two 128 x 256 tiles, more than the 66 clusters a GPU of 132 SMs runs at
    // once, so that some clusters compute a second tile; the schedule's second group of 8 cluster rows has one row.
    // K = 128: two k-tiles a tile, so that the ring of four stages wraps across tiles.
    const Shape s{2304, 2048, 128};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<bf16> A = random_matrix(s.M, s.K, seed);
    const std::vector<bf16> B = random_matrix(s.N, s.K, seed + 1);
    expect_matches(s, run(step->gemm, s, A, B), reference_gemm(s.M, s.N, s.K, A, B), exact_tolerance(s.K));
}

// ---- the final step: every configuration, every path ----

class TensorCoreGemmFinalStepTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(steps().back()); !reason.empty()) {
            GTEST_SKIP() << steps().back().id << " " << reason;
        }
    }
};

TEST_F(TensorCoreGemmFinalStepTest, EveryAutotunedConfigurationAtShapesThatAreMultiplesOfNoTile)
{
    // The launcher picks one configuration per shape; the sweep times them all: each must take every shape.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape s : {Shape{300, 520, 136}, Shape{129, 1000, 72}, Shape{261, 33, 200}}) {
        const std::vector<bf16> A = random_matrix(s.M, s.K, seed + s.M);
        const std::vector<bf16> B = random_matrix(s.N, s.K, seed + s.N);
        const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, A, B);
        for (const AutotuneCandidate& candidate : autotune_candidates()) {
            SCOPED_TRACE(candidate.id + " at " + shape_text(s));
            expect_matches(s, run(candidate.gemm, s, A, B), expected, exact_tolerance(s.K));
        }
    }
}

TEST_F(TensorCoreGemmFinalStepTest, CopiesRowsTheTmaCannotAddressAndStoresOddRowsItself)
{
    // K not a multiple of 8, or A and B not 16-byte aligned: the TMA cannot describe them, the launcher copies them
    // into padded rows; N odd: C's rows are not 16-byte multiples, each thread stores its own elements.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Shape s{257, 383, 1001};
    const std::vector<bf16> A = random_matrix(s.M, s.K, seed);
    const std::vector<bf16> B = random_matrix(s.N, s.K, seed + 1);
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, A, B);
    expect_matches(s, run(three_consumer_tiles::gemm, s, A, B), expected, exact_tolerance(s.K));
    expect_matches(s, run(three_consumer_tiles::gemm, s, A, B, 1, 3), expected, exact_tolerance(s.K));
    const Shape aligned{257, 383, 1000};
    const std::vector<bf16> A2 = random_matrix(aligned.M, aligned.K, seed + 2);
    const std::vector<bf16> B2 = random_matrix(aligned.N, aligned.K, seed + 3);
    const std::vector<double> expected2 = reference_gemm(aligned.M, aligned.N, aligned.K, A2, B2);
    expect_matches(aligned, run(three_consumer_tiles::gemm, aligned, A2, B2, 5, 0), expected2, exact_tolerance(aligned.K));
}

TEST_F(TensorCoreGemmFinalStepTest, LargeOddShapeAtSampledElements)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "4095 x 4097 x 1000 under compute-sanitizer would take minutes; the smaller shapes are checked";
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Shape s{4095, 4097, 1000};
    const std::vector<bf16> A = random_matrix(s.M, s.K, seed);
    const std::vector<bf16> B = random_matrix(s.N, s.K, seed + 1);
    const std::vector<float> C = run(three_consumer_tiles::gemm, s, A, B);
    const std::vector<std::size_t> where = sgemm::sample_indices(s.M, s.N, 4096, seed + 2);
    std::vector<float> sampled;
    for (const std::size_t i : where) {
        sampled.push_back(C[i]);
    }
    const Tolerance t = exact_tolerance(s.K);
    const sgemm::Comparison c =
        sgemm::compare(sampled, reference_elements(s.M, s.N, s.K, A, B, where), t.of_max, t.of_element);
    EXPECT_TRUE(c.within_tolerance()) << c.describe(1);
    std::size_t nans = 0;
    for (const float v : C) {
        nans += std::isnan(v) ? 1 : 0;
    }
    EXPECT_EQ(nans, 0u) << "elements left unwritten (C was poisoned with NaN)";
}

// The launcher at the limits its contract states: M or N at INT_MAX (2^24 tiles, whose last row or column starts 64 or
// 256 below it), K at max_k, and one more rejected. Inputs of signed powers of two: every product and sum is exact.

constexpr int int_max = std::numeric_limits<int>::max();

constexpr int max_mn = three_consumer_tiles::max_mn;  //!< INT_MAX - 1023: the launcher's largest M and N

TEST_F(TensorCoreGemmFinalStepTest, MUpToItsLimitAndNotOneMore)
{
    stepwise::testing::expect_exact_product<bf16, bf16>({max_mn, 1, 8}, true, [](auto A, auto B, auto C) {
        return three_consumer_tiles::gemm(max_mn, 1, 8, A, B, C);
    });
    DeviceBuffer<bf16> d(64);
    EXPECT_EQ(three_consumer_tiles::gemm(max_mn + 1, 1, 8, d.data(), d.data(), d.data()), cudaErrorInvalidValue);
    EXPECT_EQ(three_consumer_tiles::gemm(int_max, 1, 8, d.data(), d.data(), d.data()), cudaErrorInvalidValue);
}

TEST_F(TensorCoreGemmFinalStepTest, NUpToItsLimitAndNotOneMore)
{
    stepwise::testing::expect_exact_product<bf16, bf16>({1, max_mn, 8}, true, [](auto A, auto B, auto C) {
        return three_consumer_tiles::gemm(1, max_mn, 8, A, B, C);
    });
    DeviceBuffer<bf16> d(64);
    EXPECT_EQ(three_consumer_tiles::gemm(1, max_mn + 1, 8, d.data(), d.data(), d.data()), cudaErrorInvalidValue);
    EXPECT_EQ(three_consumer_tiles::gemm(1, int_max, 8, d.data(), d.data(), d.data()), cudaErrorInvalidValue);
}

//! Every configuration of the final step, by name, as gemm_with() runs it.
const std::pair<const char*, GemmFunction> final_step_configurations[] = {
    {"PingPong176", three_consumer_tiles::gemm_with<three_consumer_tiles::PingPong176>},
    {"PingPong192", three_consumer_tiles::gemm_with<three_consumer_tiles::PingPong192>},
    {"Cooperative256", three_consumer_tiles::gemm_with<three_consumer_tiles::Cooperative256>},
    {"Cooperative128", three_consumer_tiles::gemm_with<three_consumer_tiles::Cooperative128>},
    {"SplitColumns128", three_consumer_tiles::gemm_with<three_consumer_tiles::SplitColumns128>},
    {"SplitColumns64", three_consumer_tiles::gemm_with<three_consumer_tiles::SplitColumns64>},
    {"SplitColumns96", three_consumer_tiles::gemm_with<three_consumer_tiles::SplitColumns96>},
    {"Cooperative144", three_consumer_tiles::gemm_with<three_consumer_tiles::Cooperative144>},
    {"ThreeConsumers192", three_consumer_tiles::gemm_with<three_consumer_tiles::ThreeConsumers192>}};

// Each configuration at M = max_mn and at N = max_mn, whichever the launcher would choose there: the schedule's last
// cluster place lies past C, and its tiles count up to two tiles past C's last row or column (a 192-row tile at
// 11184806 x 192), which max_mn keeps inside an int.
TEST_F(TensorCoreGemmFinalStepTest, EveryConfigurationUpToTheLimitOfMAndN)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "products of 2^31 rows under compute-sanitizer would take hours; the launcher's run at small sizes";
    }
    for (const auto& [name, gemm] : final_step_configurations) {
        SCOPED_TRACE(name);
        stepwise::testing::expect_exact_product<bf16, bf16>(
            {max_mn, 1, 8}, true, [gemm = gemm](auto A, auto B, auto C) { return gemm(max_mn, 1, 8, A, B, C, 0); });
        stepwise::testing::expect_exact_product<bf16, bf16>(
            {1, max_mn, 8}, true, [gemm = gemm](auto A, auto B, auto C) { return gemm(1, max_mn, 8, A, B, C, 0); });
    }
}

// The limit of C's tiles is the same for every configuration and the launcher: at M = max_mn, the narrowest C of
// 2^30 tiles of 64 x 64 or more, and one column wider, are refused by each alike, from their arguments alone.
TEST_F(TensorCoreGemmFinalStepTest, EveryConfigurationHasTheSameLimitOfTiles)
{
    DeviceBuffer<bf16> d_A(64);
    DeviceBuffer<bf16> d_C(1);
    constexpr long long tiles = three_consumer_tiles::max_cluster_tiles;     // 2^30
    const long long rows_of_tiles = three_consumer_tiles::tiles_of(max_mn, 64);  // 2^25 - 16
    const int too_wide = static_cast<int>((tiles + rows_of_tiles - 1) / rows_of_tiles - 1) * 64 + 1;  // 33 columns
    ASSERT_GE(rows_of_tiles * three_consumer_tiles::tiles_of(too_wide, 64), tiles);
    ASSERT_LT(rows_of_tiles * three_consumer_tiles::tiles_of(too_wide - 1, 64), tiles);
    for (const auto& [name, gemm] : final_step_configurations) {
        EXPECT_EQ(gemm(max_mn, too_wide, 8, d_A.data(), d_A.data(), d_C.data(), 0), cudaErrorInvalidValue) << name;
        EXPECT_EQ(gemm(max_mn, too_wide + 1, 8, d_A.data(), d_A.data(), d_C.data(), 0), cudaErrorInvalidValue) << name;
    }
    EXPECT_EQ(three_consumer_tiles::gemm(max_mn, too_wide, 8, d_A.data(), d_A.data(), d_C.data()),
              cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The copies of unaligned A and B come from a pool of the step's own, which keeps its memory until it is released.
TEST_F(TensorCoreGemmFinalStepTest, ThePoolOfCopiesIsReleasedAndMadeAgain)
{
    const Shape s{129, 65, 7};  // K odd: A and B are copied
    const std::uint64_t seed = fresh_seed();
    const std::vector<bf16> A = random_matrix(s.M, s.K, seed);
    const std::vector<bf16> B = random_matrix(s.N, s.K, seed + 1);
    const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, A, B);
    expect_matches(s, run(three_consumer_tiles::gemm, s, A, B), expected, exact_tolerance(s.K));
    int device = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_NE(three_consumer_tiles::copy_pools()[device].load(), nullptr);
    EXPECT_EQ(three_consumer_tiles::release_copy_pools(), cudaSuccess);
    EXPECT_EQ(three_consumer_tiles::copy_pools()[device].load(), nullptr);
    expect_matches(s, run(three_consumer_tiles::gemm, s, A, B), expected, exact_tolerance(s.K));  // a new pool
    EXPECT_NE(three_consumer_tiles::copy_pools()[device].load(), nullptr);
}

TEST_F(TensorCoreGemmFinalStepTest, KUpToItsLimitAndNotOneMoreNorTooManyTiles)
{
    // One tile and 2^25 k-tiles: seconds, the longest K the launcher takes (its padded rows count in an int).
    stepwise::testing::expect_exact_product<bf16, bf16>({1, 1, three_consumer_tiles::max_k}, true, [](auto A, auto B, auto C) {
        return three_consumer_tiles::gemm(1, 1, three_consumer_tiles::max_k, A, B, C);
    });
    DeviceBuffer<bf16> d_A(64);
    DeviceBuffer<bf16> d_C(1);
    // Rejected from their arguments alone, before anything is read: K past its limit, and a C of 2^46 tiles.
    EXPECT_EQ(three_consumer_tiles::gemm(1, 1, three_consumer_tiles::max_k + 1, d_A.data(), d_A.data(), d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(three_consumer_tiles::gemm(max_mn, max_mn, 8, d_A.data(), d_A.data(), d_C.data()), cudaErrorInvalidValue);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(TensorCoreGemmFinalStepTest, UsageExample)
{
    const int M = 1000;
    const int N = 2048;
    const int K = 512;
    const std::vector<bf16> A_host = random_matrix(M, K, 1);
    const std::vector<bf16> B_host = random_matrix(N, K, 2);  // B's columns, each K values
    // example-begin tensor-core-gemm-usage
    // C = A B: A is M x K row-major, B is K x N column-major (N columns of K values), C is M x N row-major; bf16 in
    // and out, fp32 accumulation.
    __nv_bfloat16* d_A = nullptr;
    __nv_bfloat16* d_B = nullptr;
    __nv_bfloat16* d_C = nullptr;
    cudaError_t error = cudaMalloc(&d_A, A_host.size() * sizeof(__nv_bfloat16));
    if (error == cudaSuccess) error = cudaMalloc(&d_B, B_host.size() * sizeof(__nv_bfloat16));
    if (error == cudaSuccess) error = cudaMalloc(&d_C, static_cast<std::size_t>(M) * N * sizeof(__nv_bfloat16));
    if (error == cudaSuccess)
        error = cudaMemcpy(d_A, A_host.data(), A_host.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);
    if (error == cudaSuccess)
        error = cudaMemcpy(d_B, B_host.data(), B_host.size() * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice);
    // Any M, N, K >= 1; cudaErrorNotSupported on a GPU other than compute capability 9.0 or a build without sm_90a.
    if (error == cudaSuccess) error = stepwise::tensor_core_gemm::three_consumer_tiles::gemm(M, N, K, d_A, d_B, d_C);
    if (error == cudaSuccess) error = cudaDeviceSynchronize();
    std::vector<__nv_bfloat16> C_host(static_cast<std::size_t>(M) * N);
    if (error == cudaSuccess)
        error = cudaMemcpy(C_host.data(), d_C, C_host.size() * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost);
    cudaFree(d_A);
    cudaFree(d_B);
    cudaFree(d_C);
    // example-end tensor-core-gemm-usage
    ASSERT_EQ(error, cudaSuccess) << cudaGetErrorString(error);
    expect_matches({M, N, K}, to_float(C_host), reference_gemm(M, N, K, A_host, B_host), exact_tolerance(K));
}

//! Runs each named configuration at each shape on fresh random A and B and compares C with the double product.
void expect_configurations_match(std::initializer_list<Shape> shapes,
                                 std::initializer_list<std::pair<const char*, GemmFunction>> configurations)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Shape s : shapes) {
        const std::vector<bf16> A = random_matrix(s.M, s.K, seed + s.N);
        const std::vector<bf16> B = random_matrix(s.N, s.K, seed + s.N + 1);
        const std::vector<double> expected = reference_gemm(s.M, s.N, s.K, A, B);
        for (const auto& [name, gemm] : configurations) {
            SCOPED_TRACE(std::string(name) + " at " + shape_text(s));
            expect_matches(s, run(gemm, s, A, B), expected, exact_tolerance(s.K));
        }
    }
}

TEST_F(TensorCoreGemmFinalStepTest, PingPongConsumersTakeTurnsOverSeveralTilesABlock)
{
    // 3000 x 2900: 24 x 17 tiles of 128 x 176 in 204 places, 24 x 16 of 128 x 192 in 192: on 132 SMs (66 clusters)
    // each block gets two to four tiles, odd and even counts, so both consumers alternate, pass their turns and
    // share the staging area; N = 2901 takes the path where the threads store C themselves.
    // Step 10's kernel, where ping-pong comes in; step 12's, where two threads load; and the final step's.
    namespace pc = ping_pong_consumers;
    expect_configurations_match({Shape{3000, 2900, 72}, Shape{3000, 2901, 72}},
                                {{"step 10's PingPong176", pc::gemm_with<pc::PingPong176>},
                                 {"step 10's PingPong192", pc::gemm_with<pc::PingPong192>},
                                 {"step 12's PingPong176", ping_pong::gemm_with<ping_pong::PingPong176>},
                                 {"step 12's PingPong192", ping_pong::gemm_with<ping_pong::PingPong192>},
                                 {"PingPong176", three_consumer_tiles::gemm_with<three_consumer_tiles::PingPong176>},
                                 {"PingPong192", three_consumer_tiles::gemm_with<three_consumer_tiles::PingPong192>}});
}

TEST_F(TensorCoreGemmFinalStepTest, ThreeConsumersShareTilesOverSeveralTilesABlock)
{
    // 3000 x 2900: 16 x 16 tiles of 192 x 192 in 128 places: on 66 clusters some blocks compute one tile and some
    // two, so that each consumer's one staging box takes a second tile's stores; N = 2901: the threads store C.
    expect_configurations_match({Shape{3000, 2900, 136}, Shape{3000, 2901, 136}},
                                {{"ThreeConsumers192", three_consumer_tiles::gemm_with<three_consumer_tiles::ThreeConsumers192>}});
}

// ---- the launchers' choices of configuration: arithmetic on the shape and the SM count, no GPU needed (132 SMs on an
// H100 or H200, 66 clusters of two) ----

//! The name of the configuration `step` (a step's namespace) chooses for an M x N C on `sm_count` SMs.
#define STEPWISE_CHOSEN(step, M, N, sm_count) std::string(step::chosen_configuration(M, N, sm_count).name)

TEST(TensorCoreGemmLauncher, Step10TakesTheLargeTileWhoseWavesCostLeastElseStep9sChoice)
{
    namespace pc = ping_pong_consumers;
    // 4096 x 4096: 256 places of 128 x 256 in 4 waves (cost 4 x 256 = 1024), 384 of 128 x 176 in 6 (1056), 352 of
    // 128 x 192 in 6 (1152).
    EXPECT_EQ(pc::makespan(pc::ping_pong_176.shape, 4096, 4096, 132), 1056);
    EXPECT_EQ(pc::makespan(pc::ping_pong_192.shape, 4096, 4096, 132), 1152);
    EXPECT_EQ(pc::makespan(pc::cooperative_256.shape, 4096, 4096, 132), 1024);
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 4096, 4096, 132), "Cooperative256");
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 8192, 8192, 132), "PingPong192");   // 4048, 4032, 4096
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 4096, 14336, 132), "PingPong176");  // 3520, 3648, 3584
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 3072, 3072, 132), "PingPong192");   // 704, 576, 768
    // Fewer than 119 tiles of 128 x 256: 128 x 128 where 119 of those, else 64 x 128 with one consumer, as step 9.
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 1536, 1536, 132), "Cooperative128");  // 144 tiles of 128 x 128
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 1024, 1024, 132), "OneConsumer128");  // 64 tiles of 128 x 128
    EXPECT_EQ(STEPWISE_CHOSEN(pc, 1, 1, 132), "OneConsumer128");
    EXPECT_EQ(STEPWISE_CHOSEN(pc, int_max, int_max, 132), "Cooperative256");  // counted without overflow
}

TEST(TensorCoreGemmLauncher, Steps11And12ChooseAsStep10WithTheColumnsOfTheSmallTileSplit)
{
    namespace pc = ping_pong_consumers;
    const int sizes[][2] = {{4096, 4096}, {8192, 8192}, {4096, 14336}, {3072, 3072}, {1536, 1536},
                            {1024, 1024}, {1, 1},       {int_max, int_max}};
    for (const auto& [M, N] : sizes) {
        std::string step10 = STEPWISE_CHOSEN(pc, M, N, 132);
        if (step10 == "OneConsumer128") {
            step10 = "SplitColumns128";  // the same 64 x 128 tile, two consumers on its halves
        }
        EXPECT_EQ(STEPWISE_CHOSEN(split_columns, M, N, 132), step10) << M << " x " << N;
        EXPECT_EQ(STEPWISE_CHOSEN(ping_pong, M, N, 132), step10) << M << " x " << N;
    }
}

TEST(TensorCoreGemmLauncher, Step13TakesTheFewestRoundsOfTheCheapestKTilesForSmallProblems)
{
    namespace tc = tile_choice_by_rounds;
    // Large problems as step 12 (3072^3: 128 x 192 in 3 rounds, 576).
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 4096, 4096, 132), "Cooperative256");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 3072, 3072, 132), "PingPong192");
    // Fewer tiles of 128 x 256: rounds x k_tile_cost, which is the loads' for the split tiles (19 eighths of a cycle a
    // row: 2432 for 64 x 64, 3040 for 64 x 96, 3648 for 64 x 128, 4864 for 128 x 128, 5168 for 128 x 144) and the
    // product's beyond (8192 for 128 x 256).
    EXPECT_EQ(tc::k_tile_cost(tc::split_columns_64.shape), 2432);
    EXPECT_EQ(tc::k_tile_cost(tc::split_columns_96.shape), 3040);
    EXPECT_EQ(tc::k_tile_cost(tc::split_columns_128.shape), 3648);
    EXPECT_EQ(tc::k_tile_cost(tc::cooperative_128.shape), 4864);
    EXPECT_EQ(tc::k_tile_cost(tc::cooperative_144.shape), 5168);
    EXPECT_EQ(tc::k_tile_cost(tc::cooperative_256.shape), 8192);
    EXPECT_EQ(tc::k_tile_cost(tc::ping_pong_176.shape), 5776);
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 512, 512, 132), "SplitColumns64");  // 64 of 64 x 64 in one round
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1, 1, 132), "SplitColumns64");
    EXPECT_EQ(tc::rounds_of(tc::split_columns_64.shape, 768, 768, 132), 2);  // 144 of 64 x 64: a second round for 12
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 768, 768, 132), "SplitColumns96");    // 48 places of 64 x 96 once (3040)
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1024, 1024, 132), "SplitColumns128");  // 64 places of 64 x 128 in one round
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1536, 1536, 132), "Cooperative144");  // 66 places of 128 x 144: one round
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1792, 1792, 132), "Cooperative256");  // 128 x 176 would take two rounds
}

TEST(TensorCoreGemmLauncher, FinalStepPicksTheLargeTileWhoseWavesCostLeastElseTheFewestRoundsOfTheCheapestKTiles)
{
    namespace tc = three_consumer_tiles;
    // 4096 x 4096: 256 places of 128 x 256 in 4 waves (cost 4 x 256 = 1024), 384 of 128 x 176 in 6 (1056), 352 of
    // 128 x 192 in 6 (1152).
    EXPECT_EQ(tc::makespan(tc::ping_pong_176.shape, 4096, 4096, 132), 1056);
    EXPECT_EQ(tc::makespan(tc::ping_pong_192.shape, 4096, 4096, 132), 1152);
    EXPECT_EQ(tc::makespan(tc::cooperative_256.shape, 4096, 4096, 132), 1024);
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 4096, 4096, 132), "Cooperative256");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 16384, 1024, 132), "Cooperative256");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 8192, 8192, 132), "PingPong192");   // 4048, 4032, 4096
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 4096, 14336, 132), "PingPong176");  // 3520, 3648, 3584
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 2048, 2048, 132), "Cooperative256");  // 16 x 8 = 128 tiles of 128 x 256: one wave
    // Three consumers' 192 x 192 tiles where their waves cost no more in at most four rounds: 3072^3, 128 places in
    // 2 rounds (2 x 288 = 576), as 128 x 192 in 3 (576); 4097^3, 242 in 4 (1152), as 128 x 192 in 6; 2112^3, 66 in
    // one (288) against 128 x 176's 352. 5120^3: 378 places in 6 rounds (1728), as 128 x 192 in 9: too many rounds.
    EXPECT_EQ(tc::rounds_of(tc::three_consumers_192.shape, 3072, 3072, 132), 2);
    EXPECT_EQ(tc::makespan(tc::three_consumers_192.shape, 3072, 3072, 132), 576);
    EXPECT_EQ(tc::makespan(tc::ping_pong_192.shape, 3072, 3072, 132), 576);
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 3072, 3072, 132), "ThreeConsumers192");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 4097, 4097, 132), "ThreeConsumers192");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 2112, 2112, 132), "ThreeConsumers192");
    EXPECT_EQ(tc::makespan(tc::three_consumers_192.shape, 5120, 5120, 132), 1728);
    EXPECT_EQ(tc::makespan(tc::ping_pong_192.shape, 5120, 5120, 132), 1728);
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 5120, 5120, 132), "PingPong192");
    // Fewer tiles of 128 x 256: as step 13.
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 512, 512, 132), "SplitColumns64");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1, 1, 132), "SplitColumns64");
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 640, 640, 132), "SplitColumns64");     // 100 of 64 x 64 in one round (2432)
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 768, 768, 132), "SplitColumns96");     // 48 places of 64 x 96 once (3040)
    EXPECT_EQ(tc::rounds_of(tc::split_columns_96.shape, 1024, 1024, 132), 2);  // 88 places of 64 x 96
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1024, 1024, 132), "SplitColumns128");  // 64 places of 64 x 128 in one round
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1024, 2048, 132), "Cooperative128");   // 64 places of 128 x 128 in one round
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1152, 1152, 132), "Cooperative128");   // 64 x 128 would take two rounds
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1280, 1280, 132), "Cooperative128");   // 4864 before 128 x 144's 5168
    EXPECT_EQ(tc::rounds_of(tc::cooperative_144.shape, 1536, 1536, 132), 1);  // 66 places: every SM one tile
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1536, 1536, 132), "Cooperative144");   // 5168 before 128 x 176's 5776
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 1792, 1792, 132), "Cooperative256");   // 49 places of 128 x 256
    EXPECT_EQ(STEPWISE_CHOSEN(tc, 8192, 8192, 1), "Cooperative256");     // one SM: no last wave to fill
    EXPECT_EQ(STEPWISE_CHOSEN(tc, int_max, int_max, 132), "Cooperative256");  // counted without overflow
}

// ---- cuBLAS, the baseline, on the same operation (left out of racecheck: its own kernels report hazards there) ----

//! Runs `gemm` on fresh copies of A and B into a C poisoned with NaN and compares C with the double product.
void expect_library_matches(Shape s, std::uint64_t seed,
                            const std::function<cudaError_t(const bf16*, const bf16*, bf16*)>& gemm)
{
    const std::vector<bf16> A = random_matrix(s.M, s.K, seed + s.M);
    const std::vector<bf16> B = random_matrix(s.N, s.K, seed + s.N);
    DeviceBuffer<bf16> d_A(A.size());
    DeviceBuffer<bf16> d_B(B.size());
    DeviceBuffer<bf16> d_C(static_cast<std::size_t>(s.M) * s.N);
    d_A.upload(A);
    d_B.upload(B);
    d_C.fill_bytes(0xFF, 0);
    ASSERT_EQ(gemm(d_A.data(), d_B.data(), d_C.data()), cudaSuccess) << shape_text(s);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_matches(s, to_float(d_C.download()), reference_gemm(s.M, s.N, s.K, A, B), exact_tolerance(s.K));
}

TEST(TensorCoreGemmCublas, MatchesTheDoubleProductInTheSameLayouts)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const CublasGemmBf16 cublas;
    for (const Shape s : {Shape{127, 129, 136}, Shape{64, 96, 40}, Shape{1, 300, 8}}) {
        expect_library_matches(s, seed, [&](const bf16* d_A, const bf16* d_B, bf16* d_C) {
            return cublas(s.M, s.N, s.K, d_A, d_B, d_C, 0);
        });
    }
}

// ---- the tuned libraries: cuBLASLt's picked algorithm, CUTLASS's configurations (left out of racecheck too) ----

TEST(TensorCoreGemmCublasLt, ThePickedAlgorithmMatchesTheDoubleProduct)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    CublasLtGemmBf16Best cublaslt;
    DeviceBuffer<unsigned char> flush(std::size_t{1} << 20);
    for (const Shape s : {Shape{127, 129, 136}, Shape{64, 96, 40}, Shape{256, 512, 192}}) {
        DeviceBuffer<bf16> d_A(static_cast<std::size_t>(s.M) * s.K), d_B(static_cast<std::size_t>(s.N) * s.K);
        DeviceBuffer<bf16> d_C(static_cast<std::size_t>(s.M) * s.N);
        EXPECT_EQ(cublaslt(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(), 0), cudaErrorInvalidValue)
            << "ran before an algorithm was picked for " << shape_text(s);
        const auto [candidates, kept] = cublaslt.pick(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(),
                                                      PickRule{1, 2, 2, 2}, flush.data(), flush.size(), 0);
        ASSERT_FALSE(candidates.empty());
        ASSERT_LT(kept, candidates.size());
        expect_library_matches(s, seed, [&](const bf16* a, const bf16* b, bf16* c) {
            return cublaslt(s.M, s.N, s.K, a, b, c, 0);
        });
    }
}

TEST(TensorCoreGemmCutlass, EveryConfigurationMatchesTheDoubleProduct)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (const std::string reason = cutlass_unavailable_reason(); !reason.empty()) {
        GTEST_SKIP() << reason;
    }
    if (const std::string reason = unsupported_reason(steps().back()); !reason.empty()) {
        GTEST_SKIP() << "CUTLASS's sm90 kernels, as step 8: " << reason;
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const CutlassGemm& config : cutlass_gemms()) {
        for (const Shape s : {Shape{127, 136, 136}, Shape{1, 256, 64}, Shape{300, 520, 1032}}) {
            ASSERT_TRUE(config.accepts(s.M, s.N, s.K)) << config.id << " at " << shape_text(s);
            DeviceBuffer<unsigned char> workspace(std::max<std::size_t>(config.workspace_bytes(s.M, s.N, s.K), 1));
            SCOPED_TRACE(config.id);
            expect_library_matches(s, seed, [&](const bf16* a, const bf16* b, bf16* c) {
                return config.gemm(s.M, s.N, s.K, a, b, c, workspace.data(), workspace.size(), 0);
            });
        }
    }
}

// ---- what `make profile` runs under Nsight Compute ----

TEST(TensorCoreGemmProfile, EveryStepOnceAt4096)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (under_sanitizer()) {
        GTEST_SKIP() << "the profiling test is for Nsight Compute; the other tests run under the sanitizers";
    }
    constexpr int n = 4096;
    const std::vector<bf16> A = random_matrix(n, n, fresh_seed());
    const std::vector<bf16> B = random_matrix(n, n, fresh_seed());
    DeviceBuffer<bf16> d_A(A.size());
    DeviceBuffer<bf16> d_B(B.size());
    DeviceBuffer<bf16> d_C(A.size());
    d_A.upload(A);
    d_B.upload(B);
    int ran = 0;
    for (const Step& step : steps()) {
        if (!unsupported_reason(step).empty()) {
            continue;
        }
        ASSERT_EQ(step.gemm(n, n, n, d_A.data(), d_B.data(), d_C.data(), 0), cudaSuccess) << step.id;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << step.id;
        ++ran;
    }
    if (ran == 0) {
        GTEST_SKIP() << "no step of the chapter runs on this GPU";
    }
}

}  // namespace
}  // namespace stepwise::tensor_core_gemm
