// CPU tests of the tensor-core GEMM chapter's reference, inputs, tolerances and the comparison's per-element term.
#include "sgemm/sgemm_reference.hpp"
#include "tensor_core_gemm/tensor_core_gemm_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepwise::tensor_core_gemm {
namespace {

std::vector<bf16> bf16s(std::initializer_list<float> values)
{
    std::vector<bf16> out;
    for (const float v : values) {
        out.push_back(__float2bfloat16_rn(v));
    }
    return out;
}

TEST(TensorCoreGemmReference, ComputesASmallProductByHandWithBStoredByColumns)
{
    // A = [1 2 3]   B = [1 0]   A B = [ 7  5]
    //     [4 5 6]       [3 1]         [19 11]
    //                   [0 1]
    // B is passed column by column: (1, 3, 0), (0, 1, 1).
    const std::vector<bf16> A = bf16s({1, 2, 3, 4, 5, 6});
    const std::vector<bf16> B = bf16s({1, 3, 0, 0, 1, 1});
    EXPECT_EQ(reference_gemm(2, 2, 3, A, B), (std::vector<double>{7, 5, 19, 11}));
    EXPECT_THROW(reference_gemm(2, 3, 3, A, B), std::invalid_argument);
}

TEST(TensorCoreGemmReference, IsExactForBf16Inputs)
{
    // bf16 has 8 significant bits: each product is exact in double, so is a short sum of them.
    const std::vector<bf16> A = bf16s({1.0078125f, -3.5f});
    const std::vector<bf16> B = bf16s({255.0f, 0.0078125f});
    EXPECT_EQ(reference_gemm(1, 1, 2, A, B)[0], 1.0078125 * 255.0 - 3.5 * 0.0078125);
}

TEST(TensorCoreGemmReference, PropagatesNanAndInfinity)
{
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<double> r = reference_gemm(2, 2, 1, bf16s({nan, 2}), bf16s({1, inf}));
    EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]));
    EXPECT_EQ(r[2], 2.0);
    EXPECT_TRUE(std::isinf(r[3]) && r[3] > 0);
}

TEST(TensorCoreGemmReference, SampledElementsEqualTheFullProduct)
{
    const int M = 37;
    const int N = 41;
    const int K = 19;
    const std::vector<bf16> A = random_matrix(M, K, 1);
    const std::vector<bf16> B = random_matrix(N, K, 2);
    const std::vector<double> full = reference_gemm(M, N, K, A, B);
    const std::vector<std::size_t> where = sgemm::sample_indices(M, N, 200, 4);
    const std::vector<double> some = reference_elements(M, N, K, A, B, where);
    ASSERT_EQ(some.size(), where.size());
    for (std::size_t i = 0; i < where.size(); ++i) {
        EXPECT_EQ(some[i], full[where[i]]);
    }
    EXPECT_THROW(reference_elements(M, N, K, A, B, {static_cast<std::size_t>(M) * N}), std::out_of_range);
}

TEST(TensorCoreGemmReference, RandomMatricesAreBf16InTheUnitIntervalAndDependOnTheSeed)
{
    const std::vector<bf16> a = random_matrix(64, 64, 7);
    const std::vector<float> values = to_float(a);
    double sum = 0;
    for (const float v : values) {
        ASSERT_GE(v, -1.0f);
        ASSERT_LE(v, 1.0f);
        ASSERT_EQ(__bfloat162float(__float2bfloat16_rn(v)), v);
        sum += v;
    }
    EXPECT_LT(std::abs(sum / values.size()), 0.05);  // centred
    EXPECT_NE(to_float(random_matrix(64, 64, 8)), values);
    EXPECT_EQ(to_float(random_matrix(64, 64, 7)), values);
}

TEST(TensorCoreGemmReference, ToleranceCoversBf16RoundingAndGrowsWithK)
{
    // A correctly rounded bf16 result is within 2^-8 of its value; the tolerance allows twice that, plus fp32's sums.
    const Tolerance t = exact_tolerance(4096);
    EXPECT_DOUBLE_EQ(t.of_element, std::ldexp(1.0, -7));
    EXPECT_DOUBLE_EQ(t.of_max, 1e-5 * 64);
    EXPECT_GT(exact_tolerance(8192).of_max, t.of_max);
    EXPECT_DOUBLE_EQ(rounded_tolerance(4096).of_element, 2 * t.of_element);
    EXPECT_DOUBLE_EQ(rounded_tolerance(4096).of_max, 2 * t.of_max);

    const double exact = 1.0 + std::ldexp(1.0, -8);  // halfway between two bf16 values: rounds to 1 (even)
    const float rounded = __bfloat162float(__float2bfloat16_rn(static_cast<float>(exact)));
    const sgemm::Comparison c = sgemm::compare({rounded}, {exact}, 0.0, t.of_element);
    EXPECT_TRUE(c.within_tolerance()) << c.describe(1);
}

TEST(TensorCoreGemmReference, PerElementToleranceCatchesAnErrorOfOneElementThatMaxRelativeWouldHide)
{
    // Next to an element of 1000, an error of 0.1 on an element of 1 is within 2e-4 of max|ref| but not within one
    // bf16 unit of that element: the per-element term applies to each element alone.
    const std::vector<double> ref = {1000.0, 1.0};
    const sgemm::Comparison with_max_only = sgemm::compare({1000.f, 1.1f}, ref, 2e-4);
    EXPECT_TRUE(with_max_only.within_tolerance());
    const sgemm::Comparison per_element = sgemm::compare({1000.f, 1.1f}, ref, 1e-9, std::ldexp(1.0, -7));
    EXPECT_FALSE(per_element.within_tolerance());
    EXPECT_EQ(per_element.over_tolerance, 1u);
    EXPECT_NE(per_element.describe(2).find("of |ref|"), std::string::npos);
    const sgemm::Comparison nan_result = sgemm::compare({std::nanf(""), 1.f}, ref, 1.0, 1.0);
    EXPECT_FALSE(nan_result.within_tolerance());  // NaN never passes
}

}  // namespace
}  // namespace stepwise::tensor_core_gemm
