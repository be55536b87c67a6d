#include "tensor_core_gemm/tensor_core_gemm_reference.hpp"

#include "core/random_values.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace stepwise::tensor_core_gemm {
namespace {

void check_shapes(int M, int N, int K, const std::vector<bf16>& A, const std::vector<bf16>& B, const char* who)
{
    const auto size = [](int rows, int cols) {
        return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    };
    if (M <= 0 || N <= 0 || K <= 0 || A.size() != size(M, K) || B.size() != size(N, K)) {
        throw std::invalid_argument(std::string(who) + ": sizes do not match M, N, K (A is M x K, B is N x K)");
    }
}

double dot(const bf16* a, const bf16* b, int K)
{
    double sum = 0.0;
    for (int k = 0; k < K; ++k) {
        sum += static_cast<double>(__bfloat162float(a[k])) * static_cast<double>(__bfloat162float(b[k]));
    }
    return sum;
}

}  // namespace

std::vector<bf16> random_matrix(int rows, int cols, std::uint64_t seed)
{
    std::vector<bf16> out;
    for (const float v : uniform_values(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), -1.f, 1.f,
                                        seed)) {
        out.push_back(__float2bfloat16_rn(v));
    }
    return out;
}

std::vector<double> reference_gemm(int M, int N, int K, const std::vector<bf16>& A, const std::vector<bf16>& B)
{
    check_shapes(M, N, K, A, B, "reference_gemm");
    std::vector<double> out(static_cast<std::size_t>(M) * N);
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {  // both operands K-contiguous: each element is one dot product
            out[static_cast<std::size_t>(i) * N + j] =
                dot(&A[static_cast<std::size_t>(i) * K], &B[static_cast<std::size_t>(j) * K], K);
        }
    }
    return out;
}

std::vector<double> reference_elements(int M, int N, int K, const std::vector<bf16>& A, const std::vector<bf16>& B,
                                       const std::vector<std::size_t>& indices)
{
    check_shapes(M, N, K, A, B, "reference_elements");
    std::vector<double> out;
    out.reserve(indices.size());
    for (const std::size_t at : indices) {
        if (at >= static_cast<std::size_t>(M) * N) {
            throw std::out_of_range("reference_elements: index outside C");
        }
        out.push_back(dot(&A[at / N * K], &B[at % N * K], K));
    }
    return out;
}

std::vector<float> to_float(const std::vector<bf16>& values)
{
    std::vector<float> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        out[i] = __bfloat162float(values[i]);
    }
    return out;
}

Tolerance exact_tolerance(int K) { return {1e-5 * std::sqrt(static_cast<double>(K)), std::ldexp(1.0, -7)}; }

Tolerance rounded_tolerance(int K)
{
    const Tolerance one = exact_tolerance(K);
    return {2 * one.of_max, 2 * one.of_element};
}

}  // namespace stepwise::tensor_core_gemm
