// The tensor-core GEMM chapter's CPU reference, inputs and tolerances (shared by tests and timing program).
// The operation: C = A B with A (M x K, row-major) and B (K x N, column-major, that is N rows of K) in bf16, the
// products accumulated in fp32 by the GPU, C (M x N, row-major) rounded to bf16.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stepwise::tensor_core_gemm {

using bf16 = __nv_bfloat16;

//! @brief `rows * cols` random values uniform in [-1, 1), rounded to bf16 (row-major).
std::vector<bf16> random_matrix(int rows, int cols, std::uint64_t seed);

//! @brief C = A B in double precision from the bf16 inputs (exact products, exact sums up to double's rounding),
//!        row-major M x N; A is M x K row-major, B is N x K (B's columns, K-contiguous).
//! @throws std::invalid_argument when the sizes do not match
std::vector<double> reference_gemm(int M, int N, int K, const std::vector<bf16>& A, const std::vector<bf16>& B);

//! @brief The reference at a few elements only (row-major indices into C), for sizes where the whole product would
//!        take the CPU minutes.
//! @throws std::invalid_argument when the sizes do not match; std::out_of_range for an index outside C
std::vector<double> reference_elements(int M, int N, int K, const std::vector<bf16>& A, const std::vector<bf16>& B,
                                       const std::vector<std::size_t>& indices);

//! @brief Every element as a float (what the comparison takes).
std::vector<float> to_float(const std::vector<bf16>& values);

//! @brief How far a bf16 result may be from its reference: `|C - ref| <= of_max * max|ref| + of_element * |ref|`.
struct Tolerance {
    double of_max = 0;      //!< fp32 accumulation: rounding errors of K-term sums grow like sqrt(K)
    double of_element = 0;  //!< the final rounding to bf16, relative to the element itself
};

//! @brief Against the double product: one bf16 unit in the last place of the element (2^-7 of it: twice the
//!        largest rounding error, 2^-8), plus 1e-5 sqrt(K) of max|ref| for the fp32 sums (as the SGEMM chapter's).
Tolerance exact_tolerance(int K);

//! @brief Against another bf16 result of the same product (cuBLAS's): both are rounded, so twice each term.
Tolerance rounded_tolerance(int K);

}  // namespace stepwise::tensor_core_gemm
