#include "normalization_backward/normalization_backward_reference.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace stepwise::normalization_backward {

namespace {

//! A value's distance from the row's center times its rstd, 0 where that distance is 0 and rstd infinite (the
//! forward's convention: a row of equal values with epsilon 0 gives beta, not 0 times infinity).
double times(double difference, double rstd)
{
    return difference == 0.0 && std::isinf(rstd) ? 0.0 : difference * rstd;
}

//! One row of either operation: `center` is the mean (LayerNorm) or 0 (RMSNorm), `dbeta` nullptr for RMSNorm.
RowTerms backward_row(const float* x, const float* dy, const float* gamma, double center, double rstd, int num_cols,
                      bool layer_norm, double* dx, double* dgamma, double* dbeta)
{
    double sum_g = 0, sum_g_xhat = 0;
    for (int j = 0; j < num_cols; ++j) {
        const double xhat = times(x[j] - center, rstd), g = static_cast<double>(dy[j]) * gamma[j];
        sum_g += g;
        sum_g_xhat += g * xhat;
        dgamma[j] += static_cast<double>(dy[j]) * xhat;
        if (dbeta != nullptr) {
            dbeta[j] += dy[j];
        }
    }
    const RowTerms t{layer_norm ? sum_g / num_cols : 0.0, sum_g_xhat / num_cols};
    for (int j = 0; j < num_cols; ++j) {
        const double xhat = times(x[j] - center, rstd), g = static_cast<double>(dy[j]) * gamma[j];
        dx[j] = rstd * (g - t.mean_g - xhat * t.mean_g_xhat);
    }
    return t;
}

//! Whether `got` is within `bound` of `expected`, NaN exactly where it is, non-finite where it is.
bool close(double got, double expected, double bound)
{
    if (!std::isfinite(expected)) {
        return std::isnan(expected) ? std::isnan(got) : !std::isfinite(got);
    }
    return std::abs(got - expected) <= bound;
}

//! Counts one compared value against `tolerance * scale`, noting the largest error and the first wrong value.
void count(Comparison& c, double got, double expected, double scale, double tolerance, const std::string& where)
{
    if (std::isfinite(expected) && std::isfinite(got) && std::isfinite(scale) && scale > 0) {
        c.max_relative = std::max(c.max_relative, std::abs(got - expected) / scale);
    }
    if (std::isnan(got) != std::isnan(expected)) {
        ++c.nan_mismatches;
    } else if (!close(got, expected, tolerance * scale)) {
        ++c.out_of_tolerance;
    } else {
        return;
    }
    if (c.first.empty()) {
        std::ostringstream out;
        out << where << ": " << got << " instead of " << expected;
        c.first = out.str();
    }
}

}  // namespace

void saved_statistics(const float* x, int num_rows, int num_cols, bool layer_norm, double epsilon, float* mean,
                      float* rstd)
{
    for (int i = 0; i < num_rows; ++i) {
        const float* row = x + static_cast<std::size_t>(i) * num_cols;
        double m = 0;
        for (int j = 0; j < num_cols; ++j) {
            m += row[j];
        }
        m = layer_norm ? m / num_cols : 0.0;
        double squares = 0;
        for (int j = 0; j < num_cols; ++j) {
            squares += (row[j] - m) * (row[j] - m);
        }
        mean[i] = static_cast<float>(m);
        rstd[i] = static_cast<float>(1.0 / std::sqrt(squares / num_cols + epsilon));
    }
}

RowTerms layer_norm_backward_row(const float* x, const float* dy, const float* gamma, float mean, float rstd,
                                 int num_cols, double* dx, double* dgamma, double* dbeta)
{
    return backward_row(x, dy, gamma, mean, rstd, num_cols, true, dx, dgamma, dbeta);
}

RowTerms rms_norm_backward_row(const float* x, const float* dy, const float* gamma, float rstd, int num_cols,
                               double* dx, double* dgamma)
{
    return backward_row(x, dy, gamma, 0.0, rstd, num_cols, false, dx, dgamma, nullptr);
}

double dx_tolerance(int num_cols, bool bf16_output)
{
    return 2e-5 + num_cols * std::ldexp(1.0, -24) + (bf16_output ? std::ldexp(1.0, -8) : 0.0);
}

double parameter_tolerance(int num_rows) { return 2e-5 + num_rows * std::ldexp(1.0, -24); }

void compare_dx_row(const float* x, const float* dy, const float* gamma, float mean, float rstd, bool layer_norm,
                    const float* got, const double* expected, int num_cols, std::int64_t row, double tolerance,
                    Comparison& c)
{
    const double center = layer_norm ? mean : 0.0;
    double mean_abs_g = 0, mean_abs_g_xhat = 0;
    for (int j = 0; j < num_cols; ++j) {
        const double g = std::abs(static_cast<double>(dy[j]) * gamma[j]);
        mean_abs_g += g;
        mean_abs_g_xhat += g * std::abs(times(x[j] - center, rstd));
    }
    mean_abs_g /= num_cols;
    mean_abs_g_xhat /= num_cols;
    for (int j = 0; j < num_cols; ++j) {
        ++c.values;
        const double g = std::abs(static_cast<double>(dy[j]) * gamma[j]);
        const double scale = std::abs(static_cast<double>(rstd)) *
                             (g + (layer_norm ? mean_abs_g : 0.0) + std::abs(times(x[j] - center, rstd)) * mean_abs_g_xhat);
        count(c, got[j], expected[j], scale, tolerance, "dx row " + std::to_string(row) + " col " + std::to_string(j));
    }
}

void compare_parameter_gradient(const char* what, const float* got, const double* expected, const double* magnitude,
                                int num_cols, double tolerance, Comparison& c)
{
    for (int j = 0; j < num_cols; ++j) {
        ++c.columns;
        count(c, got[j], expected[j], magnitude[j], tolerance, std::string(what) + " col " + std::to_string(j));
    }
}

void parameter_magnitudes(const float* x, const float* dy, const float* mean, const float* rstd, int num_rows,
                          int num_cols, double* dgamma_magnitude, double* dbeta_magnitude)
{
    std::fill(dgamma_magnitude, dgamma_magnitude + num_cols, 0.0);
    if (dbeta_magnitude != nullptr) {
        std::fill(dbeta_magnitude, dbeta_magnitude + num_cols, 0.0);
    }
    for (int i = 0; i < num_rows; ++i) {
        const std::size_t first = static_cast<std::size_t>(i) * num_cols;
        const double center = mean != nullptr ? mean[i] : 0.0;
        for (int j = 0; j < num_cols; ++j) {
            const double d = std::abs(static_cast<double>(dy[first + j]));
            dgamma_magnitude[j] += d * std::abs(times(x[first + j] - center, rstd[i]));
            if (dbeta_magnitude != nullptr) {
                dbeta_magnitude[j] += d;
            }
        }
    }
}

std::string Comparison::describe(double tolerance) const
{
    std::ostringstream out;
    if (values > 0) {
        out << values << " values of dx" << (columns > 0 ? " and " : "");
    }
    if (columns > 0 || values == 0) {
        out << columns << " columns of the parameters' gradients";
    }
    out << "; max error " << max_relative << " of the scale (tolerance " << tolerance << ")";
    if (!passed()) {
        out << "; " << out_of_tolerance << " beyond it, " << nan_mismatches << " NaN mismatches; first, " << first;
    }
    return out.str();
}

}  // namespace stepwise::normalization_backward
