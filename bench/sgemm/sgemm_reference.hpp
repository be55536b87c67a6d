// The SGEMM chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::sgemm {

//! @brief `rows * cols` random floats uniform in [-1, 1), row-major.
std::vector<float> random_matrix(int rows, int cols, std::uint64_t seed);

//! @brief `alpha * A * B + beta * C` in double precision, row-major (A M x K, B K x N, C M x N). With
//!        `beta == 0` C is not read (its NaNs do not propagate), as BLAS defines it.
std::vector<double> reference_gemm(int M, int N, int K, double alpha, const std::vector<float>& A,
                                   const std::vector<float>& B, double beta, const std::vector<float>& C);

//! @brief The reference at a few elements only (row-major indices into C), for sizes where the whole product
//!        would take the CPU minutes: the timing program checks cuBLAS's result at these, then every step
//!        against cuBLAS.
std::vector<double> reference_elements(int M, int N, int K, double alpha, const std::vector<float>& A,
                                       const std::vector<float>& B, double beta, const std::vector<float>& C,
                                       const std::vector<std::size_t>& indices);

//! @brief `count` distinct random indices into an M x N matrix, always including its four corners.
std::vector<std::size_t> sample_indices(int M, int N, std::size_t count, std::uint64_t seed);

//! @brief The tolerance of an fp32 result: `|C - ref| <= fp32_tolerance(K) * max|ref|` for every element.
//!        Rounding errors of K-term float sums grow like sqrt(K) u for random signs; 1e-5 * sqrt(K) leaves a
//!        margin of about 100x over what correct fp32 kernels show, while one missing or doubled term is
//!        ten times above it.
double fp32_tolerance(int K);

//! @brief The tolerance of a TF32 result (10-bit mantissas in the products): `max(2e-4 * sqrt(K), 4e-3)`.
double tf32_tolerance(int K);

//! @brief How far a result is from the reference.
struct Comparison {
    double max_abs = 0;              //!< max |C - ref| over finite references
    double max_ref = 0;              //!< max |ref|
    double max_rel = 0;              //!< max_abs / max_ref
    std::size_t over_tolerance = 0;  //!< elements with |C - ref| > tolerance * max_ref
    std::size_t special_mismatches = 0;  //!< NaN or infinite references not matched (NaN for NaN, same infinity)
    std::size_t nan_outputs = 0;     //!< NaNs where the reference is finite: never within tolerance
    std::size_t worst_index = 0;     //!< the element farthest from its reference (a NaN or infinity mismatch first)
    double worst_abs = 0;            //!< its |C - ref| (infinite for a NaN or infinity mismatch)
    double worst_got = 0;            //!< its value in the result
    double worst_expected = 0;       //!< and in the reference
    double tolerance = 0;
    double element_tolerance = 0;    //!< the part of the allowed error relative to the element's own reference

    bool within_tolerance() const { return over_tolerance == 0 && special_mismatches == 0 && nan_outputs == 0; }
    //! One line: the worst element as (row, column), its value and reference, and the error relative to max|ref|.
    std::string describe(int N) const;

private:
    std::string element_note() const;
};

//! @brief Compares every element of `got` with `ref` within `tolerance * max|ref| + element_tolerance * |ref|` (the
//!        second term for results rounded to a narrow type, whose rounding error is relative to each element).
Comparison compare(const std::vector<float>& got, const std::vector<double>& ref, double tolerance,
                   double element_tolerance = 0);

}  // namespace stepwise::sgemm
