#include "normalization/normalization_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace stepwise::normalization {

std::vector<float> random_values(std::size_t count, std::uint64_t seed, float low, float high)
{
    return uniform_values(count, low, high, seed);
}

namespace {

//! A value's distance from the row's center times its rstd, 0 where that distance is 0 and rstd infinite (epsilon 0 and
//! a row of equal values, or of zeros: the contract gives beta, not 0 times infinity). A NaN rstd stays NaN.
double times(double difference, double rstd)
{
    return difference == 0.0 && std::isinf(rstd) ? 0.0 : difference * rstd;
}

}  // namespace

RowStats layer_norm_row(const float* x, const float* gamma, const float* beta, int num_cols, double epsilon,
                        double* y)
{
    double sum = 0;
    for (int j = 0; j < num_cols; ++j) {
        sum += x[j];
    }
    const double mean = sum / num_cols;
    double squares = 0;
    for (int j = 0; j < num_cols; ++j) {
        squares += (x[j] - mean) * (x[j] - mean);
    }
    const double rstd = 1.0 / std::sqrt(squares / num_cols + epsilon);
    for (int j = 0; j < num_cols; ++j) {
        y[j] = times(x[j] - mean, rstd) * gamma[j] + beta[j];
    }
    return {mean, rstd};
}

RowStats rms_norm_row(const float* x, const float* gamma, int num_cols, double epsilon, double* y)
{
    double squares = 0;
    for (int j = 0; j < num_cols; ++j) {
        squares += static_cast<double>(x[j]) * x[j];
    }
    const double rstd = 1.0 / std::sqrt(squares / num_cols + epsilon);
    for (int j = 0; j < num_cols; ++j) {
        y[j] = times(x[j], rstd) * gamma[j];
    }
    return {0.0, rstd};
}

double tolerance(int num_cols, bool bf16_output)
{
    return 2e-5 + num_cols * std::ldexp(1.0, -24) + (bf16_output ? std::ldexp(1.0, -8) : 0.0);
}

namespace {

//! Whether `got` is within `bound` of `expected`, NaN exactly where it is, non-finite where it is.
bool close(double got, double expected, double bound)
{
    if (!std::isfinite(expected)) {
        return std::isnan(expected) ? std::isnan(got) : !std::isfinite(got);
    }
    return std::abs(got - expected) <= bound;
}

}  // namespace

void compare_row(const float* x, const float* gamma, const float* beta, const float* got, const RowStats* got_stats,
                 const double* expected, RowStats expected_stats, int num_cols, double epsilon, std::int64_t row,
                 double tolerance, Comparison& c)
{
    ++c.rows;
    const double mean = expected_stats.mean, rstd = expected_stats.rstd;
    const auto note_first = [&](std::int64_t col, double g, double e) {
        if (c.first_row < 0) {
            c.first_row = row;
            c.first_col = col;
            c.first_got = g;
            c.first_expected = e;
        }
    };
    for (int j = 0; j < num_cols; ++j) {
        ++c.values;
        const double y = got[j], e = expected[j];
        if (std::isnan(y) != std::isnan(e)) {
            ++c.nan_mismatches;
            note_first(j, y, e);
            continue;
        }
        if (std::isnan(e)) {
            continue;
        }
        const double scale = std::abs(gamma[j]) * ((std::abs(x[j]) + std::abs(mean)) * rstd + 1.0) +
                             (beta != nullptr ? std::abs(beta[j]) : 0.0);
        const double error = std::abs(y - e);
        if (std::isfinite(scale) && scale > 0) {
            c.max_relative = std::max(c.max_relative, error / scale);
        }
        if (!(error <= tolerance * scale)) {
            ++c.out_of_tolerance;
            note_first(j, y, e);
        }
    }
    if (got_stats != nullptr) {
        const double std_dev = std::sqrt(std::max(0.0, 1.0 / (rstd * rstd) - epsilon));
        const double mean_error = std::abs(got_stats->mean - mean) / (std::abs(mean) + std_dev);
        const double rstd_error = std::abs(got_stats->rstd - rstd) / rstd;
        for (const double e : {mean_error, rstd_error}) {
            if (std::isfinite(e)) {
                c.max_statistics_error = std::max(c.max_statistics_error, e);
            }
        }
        const bool mean_ok = close(got_stats->mean, mean, tolerance * (std::abs(mean) + std_dev));
        // A mean off by d (up to the bound above) adds d^2 to the variance: rstd moves by up to d^2 rstd^3 / 2.
        const double mean_bound = tolerance * (std::abs(mean) + std_dev);
        const bool rstd_ok = close(got_stats->rstd, rstd, tolerance * rstd + 0.5 * mean_bound * mean_bound * rstd * rstd * rstd);
        if (!mean_ok || !rstd_ok) {
            ++c.wrong_statistics;
            note_first(-1, mean_ok ? got_stats->rstd : got_stats->mean, mean_ok ? rstd : mean);
        }
    }
}

std::string Comparison::describe(double tolerance) const
{
    std::ostringstream out;
    out << values << " values of " << rows << " rows; max error " << max_relative << " of the output's scale";
    if (max_statistics_error > 0) {
        out << ", mean/rstd " << max_statistics_error;
    }
    out << " (tolerance " << tolerance << ")";
    if (!passed()) {
        out << "; " << out_of_tolerance << " beyond it, " << nan_mismatches << " NaN mismatches, " << wrong_statistics
            << " wrong mean/rstd; first at row " << first_row;
        if (first_col >= 0) {
            out << " col " << first_col;
        } else {
            out << " (its mean or rstd)";
        }
        out << ": " << first_got << " instead of " << first_expected;
    }
    return out.str();
}

}  // namespace stepwise::normalization
