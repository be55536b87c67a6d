// The normalization backward chapter's CPU reference and comparison (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::normalization_backward {

//! @brief The statistics a forward step saves for each of `num_rows` rows of `x` (fp32), taken in double from the
//!        values it read: LayerNorm's mean (RMSNorm: 0) and rstd = 1 / sqrt(mean((x - mean)^2) + epsilon).
void saved_statistics(const float* x, int num_rows, int num_cols, bool layer_norm, double epsilon, float* mean,
                      float* rstd);

//! @brief One row's part of the backward pass in double, from the forward's saved statistics (as the forward stored
//!        them, fp32; they are used, not recomputed). With xhat_j = (x_j - mean) rstd (RMSNorm: x_j rstd) and
//!        g_j = dy_j gamma_j:
//!        LayerNorm dx_j = rstd (g_j - mean(g) - xhat_j mean(g xhat)); RMSNorm dx_j = rstd (g_j - xhat_j mean(g xhat)).
//!        The row's terms of the parameters' gradients are added to `dgamma` (dy_j xhat_j) and, for LayerNorm, to
//!        `dbeta` (dy_j): each is a sum over the rows. An x_j equal to the mean where rstd is infinite (epsilon 0, a
//!        row of equal values) has xhat_j = 0, as the forward gives beta there; NaN and infinities otherwise follow
//!        IEEE arithmetic (a NaN in x makes its row's dx NaN, and its column's dgamma).
struct RowTerms {
    double mean_g;       //!< mean(g) (LayerNorm)
    double mean_g_xhat;  //!< mean(g xhat)
};
RowTerms layer_norm_backward_row(const float* x, const float* dy, const float* gamma, float mean, float rstd,
                                 int num_cols, double* dx, double* dgamma, double* dbeta);
RowTerms rms_norm_backward_row(const float* x, const float* dy, const float* gamma, float rstd, int num_cols,
                               double* dx, double* dgamma);

//! @brief The chapter's stated tolerance for dx, relative to each value's scale (see compare_dx_row()): fp32
//!        arithmetic over a row (up to num_cols * 2^-24 for sums taken value by value), plus one rounding to bf16
//!        (2^-8) for bf16 outputs.
double dx_tolerance(int num_cols, bool bf16_output);
//! @brief The tolerance of dgamma and dbeta (fp32 in every type), relative to the sum of their terms' magnitudes
//!        (see compare_parameter_gradient()): sums of `num_rows` terms in fp32, each term's own rounding from
//!        bf16 inputs already in the reference (it reads the inputs as the type holds them).
double parameter_tolerance(int num_rows);

//! @brief How far a result is from the reference: dx values, and dgamma/dbeta columns.
struct Comparison {
    std::size_t values = 0, columns = 0;
    std::size_t out_of_tolerance = 0;  //!< values or columns beyond the tolerance
    std::size_t nan_mismatches = 0;    //!< NaN in one of result and reference only
    double max_relative = 0;           //!< the largest |got - ref| / scale
    std::string first;                 //!< where the first wrong value is, and what it is

    bool passed() const { return out_of_tolerance == 0 && nan_mismatches == 0; }
    //! One line: what was compared, the largest error, and the first wrong value where there is one.
    std::string describe(double tolerance) const;
};

//! @brief Compares row `row` of dx with the reference. dx_j passes where |dx_j - ref_j| <= tolerance * scale_j,
//!        scale_j = rstd (|g_j| + mean|g| + |xhat_j| mean|g xhat|) (the size of the terms it is made of; RMSNorm
//!        without mean|g|), and is NaN exactly where the reference is, not finite where it is not.
void compare_dx_row(const float* x, const float* dy, const float* gamma, float mean, float rstd, bool layer_norm,
                    const float* got, const double* expected, int num_cols, std::int64_t row, double tolerance,
                    Comparison& c);

//! @brief Compares a parameter gradient (`what`: "dgamma" or "dbeta") with the reference: column j passes where
//!        |got_j - ref_j| <= tolerance * magnitude_j, magnitude_j the sum over rows of its terms' magnitudes
//!        (|dy xhat| or |dy|), and is NaN exactly where the reference is, not finite where it is not.
void compare_parameter_gradient(const char* what, const float* got, const double* expected, const double* magnitude,
                                int num_cols, double tolerance, Comparison& c);

//! @brief The magnitudes compare_parameter_gradient() takes, for every column: the sums over `num_rows` rows of
//!        |dy xhat| (`dgamma_magnitude`) and |dy| (`dbeta_magnitude`, LayerNorm; nullptr for RMSNorm). `mean`
//!        nullptr: RMSNorm.
void parameter_magnitudes(const float* x, const float* dy, const float* mean, const float* rstd, int num_rows,
                          int num_cols, double* dgamma_magnitude, double* dbeta_magnitude);

}  // namespace stepwise::normalization_backward
