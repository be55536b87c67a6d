// The normalization chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include "core/bf16.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::normalization {

//! @brief `count` random values, uniform in [low, high).
std::vector<float> random_values(std::size_t count, std::uint64_t seed, float low, float high);

//! @brief A row's statistics: LayerNorm's mean (0 for RMSNorm) and 1 / sqrt(var + epsilon) (RMSNorm:
//!        1 / sqrt(mean(x^2) + epsilon)).
struct RowStats {
    double mean, rstd;
};

//! @brief LayerNorm of one row in double: y = (x - mean) * rstd * gamma + beta, the variance taken around the mean
//!        (two passes). NaN and infinities follow IEEE arithmetic: a NaN makes the row NaN.
RowStats layer_norm_row(const float* x, const float* gamma, const float* beta, int num_cols, double epsilon,
                        double* y);
//! @brief RMSNorm of one row in double: y = x * rstd * gamma.
RowStats rms_norm_row(const float* x, const float* gamma, int num_cols, double epsilon, double* y);

//! @brief The chapter's stated tolerance, relative to each output's scale (see compare_row()): the fp32
//!        arithmetic's error (up to num_cols * 2^-24 for a sum taken value by value), plus one rounding to bf16
//!        (2^-8) for bf16 outputs.
double tolerance(int num_cols, bool bf16_output);

//! @brief How far some rows of a result are from the reference.
struct Comparison {
    std::size_t rows = 0, values = 0;
    std::size_t out_of_tolerance = 0;  //!< outputs beyond the tolerance (NaN where the reference is not among them)
    std::size_t nan_mismatches = 0;    //!< outputs NaN in one of result and reference only
    std::size_t wrong_statistics = 0;  //!< rows whose mean or rstd is beyond the tolerance (LayerNorm)
    double max_relative = 0;           //!< the largest |y - ref| / scale (see compare_row())
    double max_statistics_error = 0;   //!< the largest relative error of a mean or rstd
    std::int64_t first_row = -1, first_col = -1;  //!< where the first wrong value is (col -1: a statistic)
    double first_got = 0, first_expected = 0;

    bool passed() const { return out_of_tolerance == 0 && nan_mismatches == 0 && wrong_statistics == 0; }
    //! One line: values and rows compared, the largest errors, and the first wrong value where there is one.
    std::string describe(double tolerance) const;
};

//! @brief Compares row `row` of a result with the reference. An output y_j passes where
//!        |y_j - ref_j| <= tolerance * scale_j, scale_j = |gamma_j| * ((|x_j| + |mean|) * rstd + 1) + |beta_j| (the
//!        size of the terms it is made of; `beta` nullptr: 0), and is NaN exactly where the reference is. With
//!        `got_stats` (LayerNorm), the mean must be within b = tolerance * (|mean| + std), std = sqrt(1 / rstd^2 -
//!        epsilon), and rstd within tolerance * rstd + b^2 rstd^3 / 2 (a mean off by b adds b^2 to the variance
//!        taken around it); NaN where the reference's are NaN, not finite where they are not.
void compare_row(const float* x, const float* gamma, const float* beta, const float* got, const RowStats* got_stats,
                 const double* expected, RowStats expected_stats, int num_cols, double epsilon, std::int64_t row,
                 double tolerance, Comparison& c);

}  // namespace stepwise::normalization
