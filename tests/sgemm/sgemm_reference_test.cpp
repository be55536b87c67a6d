// CPU tests of the SGEMM chapter's reference, tolerances and comparison.
#include "sgemm/sgemm_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace stepwise::sgemm {
namespace {

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();
constexpr float inf_f = std::numeric_limits<float>::infinity();

TEST(SgemmReference, ComputesASmallProductByHand)
{
    // [1 2 3]   [1 0]   [ 1+6+0  0+2+3 ]   [ 7  5]
    // [4 5 6] x [3 1] = [ 4+15+0 0+5+6 ] = [19 11]
    //           [0 1]
    const std::vector<float> A = {1, 2, 3, 4, 5, 6};
    const std::vector<float> B = {1, 0, 3, 1, 0, 1};
    const std::vector<float> C = {10, 20, 30, 40};
    EXPECT_EQ(reference_gemm(2, 2, 3, 1.0, A, B, 0.0, {}), (std::vector<double>{7, 5, 19, 11}));
    EXPECT_EQ(reference_gemm(2, 2, 3, 2.0, A, B, 0.5, C), (std::vector<double>{19, 20, 53, 42}));
}

TEST(SgemmReference, BetaZeroDoesNotReadC)
{
    const std::vector<float> A = {2};
    const std::vector<float> B = {3};
    EXPECT_EQ(reference_gemm(1, 1, 1, 1.0, A, B, 0.0, {nan_f}), (std::vector<double>{6}));
    EXPECT_EQ(reference_gemm(1, 1, 1, 1.0, A, B, 0.0, {}), (std::vector<double>{6}));
    EXPECT_THROW(reference_gemm(1, 1, 1, 1.0, A, B, 1.0, {}), std::invalid_argument);  // beta != 0 needs C
}

TEST(SgemmReference, PropagatesNanAndInfinity)
{
    const std::vector<float> A = {nan_f, 1, 1, 1};  // 2 x 2
    const std::vector<float> B = {1, inf_f, 1, 1};
    const std::vector<double> r = reference_gemm(2, 2, 2, 1.0, A, B, 0.0, {});
    EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]));
    EXPECT_EQ(r[2], 2.0);
    EXPECT_TRUE(std::isinf(r[3]) && r[3] > 0);
}

TEST(SgemmReference, SampledElementsEqualTheFullProduct)
{
    const int M = 37;
    const int N = 41;
    const int K = 19;
    const std::vector<float> A = random_matrix(M, K, 1);
    const std::vector<float> B = random_matrix(K, N, 2);
    const std::vector<float> C = random_matrix(M, N, 3);
    const std::vector<double> full = reference_gemm(M, N, K, 1.5, A, B, -0.5, C);
    const std::vector<std::size_t> where = sample_indices(M, N, 200, 4);
    const std::vector<double> some = reference_elements(M, N, K, 1.5, A, B, -0.5, C, where);
    ASSERT_EQ(some.size(), where.size());
    for (std::size_t i = 0; i < where.size(); ++i) {
        EXPECT_DOUBLE_EQ(some[i], full[where[i]]) << "index " << where[i];
    }
    EXPECT_THROW(reference_elements(M, N, K, 1.0, A, B, 0.0, {}, {static_cast<std::size_t>(M) * N}),
                 std::out_of_range);
}

TEST(SgemmReference, SampleIndicesAreDistinctAndIncludeTheCorners)
{
    const std::vector<std::size_t> where = sample_indices(100, 30, 500, 7);
    EXPECT_EQ(where.size(), 500u);
    EXPECT_EQ(std::set<std::size_t>(where.begin(), where.end()).size(), where.size());
    for (const std::size_t corner : {std::size_t{0}, std::size_t{29}, std::size_t{2970}, std::size_t{2999}}) {
        EXPECT_NE(std::find(where.begin(), where.end(), corner), where.end()) << corner;
    }
    EXPECT_EQ(sample_indices(2, 2, 100, 7).size(), 4u);  // never more than the matrix has
}

TEST(SgemmReference, RandomMatricesAreReproducibleAndWithinTheirRange)
{
    const std::vector<float> a = random_matrix(64, 33, 11);
    EXPECT_EQ(a, random_matrix(64, 33, 11));
    EXPECT_NE(a, random_matrix(64, 33, 12));
    for (const float v : a) {
        EXPECT_GE(v, -1.f);
        EXPECT_LT(v, 1.f);
    }
}

TEST(SgemmTolerance, GrowsWithKAndTf32IsLooser)
{
    EXPECT_LT(fp32_tolerance(16), fp32_tolerance(4096));
    EXPECT_DOUBLE_EQ(fp32_tolerance(4096), 1e-5 * 64);
    EXPECT_DOUBLE_EQ(tf32_tolerance(16), 4e-3);  // the floor
    EXPECT_DOUBLE_EQ(tf32_tolerance(4096), 2e-4 * 64);
    for (const int k : {1, 131, 4096, 8192}) {
        EXPECT_GT(tf32_tolerance(k), 10 * fp32_tolerance(k));
    }
}

TEST(SgemmCompare, AcceptsRoundingAndCatchesOneWrongElement)
{
    const std::vector<double> ref = {1.0, -2.0, 4.0, 0.5};
    std::vector<float> got = {1.0f, -2.0f, 4.0f, 0.5f};
    EXPECT_TRUE(compare(got, ref, 1e-5).within_tolerance());
    got[1] = -2.0f + 1e-5f;  // 2.5e-6 of max|ref| = 4
    EXPECT_TRUE(compare(got, ref, 1e-5).within_tolerance());
    got[2] = 4.1f;
    const Comparison c = compare(got, ref, 1e-5);
    EXPECT_FALSE(c.within_tolerance());
    EXPECT_EQ(c.over_tolerance, 1u);
    EXPECT_EQ(c.worst_index, 2u);
    EXPECT_NEAR(c.max_rel, 0.1 / 4, 1e-6);
    EXPECT_FLOAT_EQ(static_cast<float>(c.worst_got), 4.1f);
    EXPECT_EQ(c.worst_expected, 4.0);
    const std::string line = c.describe(2);  // index 2 of a 2-column matrix: row 1, column 0
    EXPECT_NE(line.find("(1, 0)"), std::string::npos) << line;
    EXPECT_NE(line.find("got 4.0999999"), std::string::npos) << line;
    EXPECT_NE(line.find("expected 4,"), std::string::npos) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << "one line";
}

TEST(SgemmCompare, NanNeverPassesWhereTheReferenceIsFinite)
{
    const Comparison c = compare({1.0f, nan_f}, {1.0, 2.0}, 1.0);  // even with a huge tolerance
    EXPECT_FALSE(c.within_tolerance());
    EXPECT_EQ(c.nan_outputs, 1u);
    EXPECT_EQ(c.worst_index, 1u);
}

TEST(SgemmCompare, SpecialReferencesMustBeMatchedExactly)
{
    const std::vector<double> ref = {std::nan(""), INFINITY, -INFINITY, 1.0};
    EXPECT_TRUE(compare({nan_f, inf_f, -inf_f, 1.0f}, ref, 1e-5).within_tolerance());
    const Comparison lost_nan = compare({1.0f, inf_f, -inf_f, 1.0f}, ref, 1e-5);
    EXPECT_EQ(lost_nan.special_mismatches, 1u);  // NaN lost
    EXPECT_EQ(lost_nan.worst_index, 0u);
    EXPECT_EQ(compare({nan_f, 1.0f, -inf_f, 1.0f}, ref, 1e-5).special_mismatches, 1u);  // infinity missing
    EXPECT_EQ(compare({nan_f, -inf_f, -inf_f, 1.0f}, ref, 1e-5).special_mismatches, 1u);  // wrong sign
    EXPECT_EQ(compare({nan_f, 3e38f, -inf_f, 1.0f}, ref, 1e-5).special_mismatches, 1u);  // finite for infinite
    EXPECT_FALSE(compare({nan_f, inf_f, -inf_f, inf_f}, ref, 1e-5).within_tolerance());  // infinite for finite
    EXPECT_THROW(compare({1.0f}, ref, 1e-5), std::invalid_argument);
}

}  // namespace
}  // namespace stepwise::sgemm
