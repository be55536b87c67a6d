#include "sgemm/sgemm_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <stdexcept>

namespace stepwise::sgemm {
namespace {

void check_shapes(int M, int N, int K, const std::vector<float>& A, const std::vector<float>& B, double beta,
                  const std::vector<float>& C, const char* who)
{
    const auto size = [](int rows, int cols) { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); };
    if (M <= 0 || N <= 0 || K <= 0 || A.size() != size(M, K) || B.size() != size(K, N) ||
        (beta != 0.0 && C.size() != size(M, N))) {
        throw std::invalid_argument(std::string(who) + ": sizes do not match M, N, K (C is needed when beta != 0)");
    }
}

}  // namespace

std::vector<float> random_matrix(int rows, int cols, std::uint64_t seed)
{
    return uniform_values(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), -1.f, 1.f, seed);
}

std::vector<double> reference_gemm(int M, int N, int K, double alpha, const std::vector<float>& A,
                                   const std::vector<float>& B, double beta, const std::vector<float>& C)
{
    check_shapes(M, N, K, A, B, beta, C, "reference_gemm");
    std::vector<double> out(static_cast<std::size_t>(M) * N);
    std::vector<double> row(static_cast<std::size_t>(N));
    for (int i = 0; i < M; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int k = 0; k < K; ++k) {  // i-k-j: the inner loop runs along rows of B and C
            const double a = A[static_cast<std::size_t>(i) * K + k];
            const float* b = &B[static_cast<std::size_t>(k) * N];
            for (int j = 0; j < N; ++j) {
                row[j] += a * b[j];
            }
        }
        for (int j = 0; j < N; ++j) {
            const std::size_t at = static_cast<std::size_t>(i) * N + j;
            out[at] = beta == 0.0 ? alpha * row[j] : alpha * row[j] + beta * C[at];
        }
    }
    return out;
}

std::vector<double> reference_elements(int M, int N, int K, double alpha, const std::vector<float>& A,
                                       const std::vector<float>& B, double beta, const std::vector<float>& C,
                                       const std::vector<std::size_t>& indices)
{
    check_shapes(M, N, K, A, B, beta, C, "reference_elements");
    std::vector<double> out;
    out.reserve(indices.size());
    for (const std::size_t at : indices) {
        if (at >= static_cast<std::size_t>(M) * N) {
            throw std::out_of_range("reference_elements: index outside C");
        }
        const std::size_t i = at / N;
        const std::size_t j = at % N;
        double sum = 0.0;
        for (int k = 0; k < K; ++k) {
            sum += static_cast<double>(A[i * K + k]) * B[static_cast<std::size_t>(k) * N + j];
        }
        out.push_back(beta == 0.0 ? alpha * sum : alpha * sum + beta * C[at]);
    }
    return out;
}

std::vector<std::size_t> sample_indices(int M, int N, std::size_t count, std::uint64_t seed)
{
    const std::size_t total = static_cast<std::size_t>(M) * N;
    std::set<std::size_t> chosen = {0, static_cast<std::size_t>(N) - 1, total - N, total - 1};
    count = std::min(std::max(count, chosen.size()), total);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> any(0, total - 1);
    while (chosen.size() < count) {
        chosen.insert(any(rng));
    }
    return {chosen.begin(), chosen.end()};
}

double fp32_tolerance(int K) { return 1e-5 * std::sqrt(static_cast<double>(K)); }

double tf32_tolerance(int K) { return std::max(2e-4 * std::sqrt(static_cast<double>(K)), 4e-3); }

std::string Comparison::element_note() const
{
    if (element_tolerance == 0) {
        return "";
    }
    char text[64];
    std::snprintf(text, sizeof text, " + %.2g of |ref|", element_tolerance);
    return text;
}

std::string Comparison::describe(int N) const
{
    const std::size_t row = worst_index / static_cast<std::size_t>(N);
    const std::size_t col = worst_index % static_cast<std::size_t>(N);
    char text[400];
    std::snprintf(text, sizeof text,
                  "element (%zu, %zu): got %.9g, expected %.9g, |got - expected| = %.3g = %.3g of max|ref| = %.4g "
                  "(tolerance %.2g of max|ref|%s); %zu over tolerance, %zu NaN where finite, %zu NaN/Inf not matched",
                  row, col, worst_got, worst_expected, worst_abs, max_ref > 0 ? worst_abs / max_ref : worst_abs,
                  max_ref, tolerance, element_note().c_str(), over_tolerance, nan_outputs, special_mismatches);
    return text;
}

Comparison compare(const std::vector<float>& got, const std::vector<double>& ref, double tolerance,
                   double element_tolerance)
{
    if (got.size() != ref.size()) {
        throw std::invalid_argument("compare: result and reference differ in size");
    }
    Comparison c;
    c.tolerance = tolerance;
    c.element_tolerance = element_tolerance;
    for (const double r : ref) {
        if (std::isfinite(r)) {
            c.max_ref = std::max(c.max_ref, std::abs(r));
        }
    }
    const double allowed = tolerance * c.max_ref;
    bool first_problem = true;
    const auto note = [&](std::size_t i, double abs_error) {
        if (first_problem || abs_error > c.worst_abs) {
            c.worst_index = i;
            c.worst_abs = abs_error;
            c.worst_got = got[i];
            c.worst_expected = ref[i];
            first_problem = false;
        }
    };
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = got[i];
        const double r = ref[i];
        if (std::isnan(r)) {
            if (!std::isnan(g)) {
                ++c.special_mismatches;
                note(i, INFINITY);
            }
        } else if (std::isinf(r)) {
            if (g != r) {
                ++c.special_mismatches;
                note(i, INFINITY);
            }
        } else if (std::isnan(g)) {
            ++c.nan_outputs;
            note(i, INFINITY);
        } else {
            const double error = std::abs(g - r);
            c.max_abs = std::max(c.max_abs, error);
            if (!(error <= allowed + element_tolerance * std::abs(r))) {
                ++c.over_tolerance;
            }
            note(i, error);
        }
    }
    c.max_rel = c.max_ref > 0 ? c.max_abs / c.max_ref : c.max_abs;
    return c;
}

}  // namespace stepwise::sgemm
