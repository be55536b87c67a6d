// The softmax chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include "core/bf16.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::softmax {

//! @brief `count` random logits, uniform in [-10, 10).
std::vector<float> random_logits(std::size_t count, std::uint64_t seed);

//! @brief The softmax of one row in double: y_i = exp(x_i - max) / sum_j exp(x_j - max). A row with a NaN or +inf,
//!        or of -inf values only, is NaN; -inf elements of other rows are 0.
void reference_row(const float* x, int num_cols, double* y);

//! @brief What a result may differ from the reference by: |y - ref| <= relative * ref + absolute.
struct Tolerance {
    double relative;
    double absolute;
};

//! @brief The chapter's stated tolerance for rows of `num_cols` values, fp32 or bf16 outputs: the fp32 arithmetic's
//!        error (exp to a few ulp, and up to num_cols * 2^-24 for a sum taken value by value), plus one rounding to
//!        bf16 (2^-8) for bf16 outputs, relative; 1e-37 absolute (results below fp32's normal range).
Tolerance tolerance(int num_cols, bool bf16_output);

//! @brief How far some rows of a result are from the reference.
struct Comparison {
    std::size_t rows = 0, values = 0;
    std::size_t out_of_tolerance = 0;  //!< values beyond the tolerance, NaN where the reference is not among them
    std::size_t nan_mismatches = 0;    //!< values NaN in one of result and reference only
    double max_relative = 0;           //!< over the values whose reference is at least 1e-30
    double max_row_sum_error = 0;      //!< |sum of a row - 1| over rows the reference does not make NaN
    std::int64_t first_row = -1, first_col = -1;  //!< where the first wrong value is
    double first_got = 0, first_expected = 0;

    bool passed(const Tolerance& t) const { return out_of_tolerance == 0 && nan_mismatches == 0 && max_row_sum_error <= t.relative; }
    //! One line: values and rows compared, the largest errors, and the first wrong value where there is one.
    std::string describe(const Tolerance& t) const;
};

//! @brief Compares row `row` of a result (`got`, `num_cols` values as floats) with the reference row.
void compare_row(const float* got, const double* expected, int num_cols, std::int64_t row, const Tolerance& t,
                 Comparison& c);

}  // namespace stepwise::softmax
