#include "cross_entropy/cross_entropy_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace stepwise::cross_entropy {

std::vector<float> random_logits(std::size_t count, std::uint64_t seed)
{
    return uniform_values(count, -10.0f, 10.0f, seed);
}

std::vector<int> random_labels(std::size_t count, int num_cols, int ignore_index, int ignored_one_in,
                               std::uint64_t seed)
{
    std::vector<int> labels = uniform_values(count, 0, num_cols - 1, seed);
    if (ignored_one_in > 0) {
        const std::vector<int> draw = uniform_values(count, 0, ignored_one_in - 1, seed + 1);
        for (std::size_t i = 0; i < count; ++i) {
            if (draw[i] == 0) {
                labels[i] = ignore_index;
            }
        }
    }
    return labels;
}

bool is_ignored(int label, int num_cols, int ignore_index)
{
    return label == ignore_index || label < 0 || label >= num_cols;
}

std::int64_t count_not_ignored(const int* labels, int num_rows, int num_cols, int ignore_index)
{
    std::int64_t n = 0;
    for (int i = 0; i < num_rows; ++i) {
        n += is_ignored(labels[i], num_cols, ignore_index) ? 0 : 1;
    }
    return n;
}

namespace {

//! A row's maximum and sum of exp(x - max) in double; a NaN maximum for a row with a NaN or +inf, or of -inf only.
struct Stats {
    double max, sum;
};

Stats stats_of(const float* x, int num_cols)
{
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    double max = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < num_cols; ++j) {
        if (std::isnan(x[j]) || x[j] == std::numeric_limits<float>::infinity()) {
            return {nan, nan};
        }
        max = std::max(max, static_cast<double>(x[j]));
    }
    if (max == -std::numeric_limits<double>::infinity()) {
        return {nan, nan};
    }
    double sum = 0;
    for (int j = 0; j < num_cols; ++j) {
        sum += std::exp(static_cast<double>(x[j]) - max);
    }
    return {max, sum};
}

}  // namespace

// (max - x[label]) + log(sum) rather than (max + log(sum)) - x[label]: the latter loses log(sum) beside a huge max.
double row_loss(const float* x, int num_cols, int label)
{
    const Stats s = stats_of(x, num_cols);
    return (s.max - x[label]) + std::log(s.sum);
}

void row_gradient(const float* x, int num_cols, int label, bool ignored, double scale, double* d)
{
    if (ignored) {
        std::fill(d, d + num_cols, 0.0);
        return;
    }
    const Stats s = stats_of(x, num_cols);
    for (int j = 0; j < num_cols; ++j) {
        d[j] = (std::exp(static_cast<double>(x[j]) - s.max) / s.sum - (j == label ? 1.0 : 0.0)) * scale;
    }
}

double gradient_scale(double dloss, std::int64_t not_ignored) { return dloss / static_cast<double>(not_ignored); }

double mean_loss(const float* x, const int* labels, int num_rows, int num_cols, int ignore_index)
{
    double sum = 0;
    std::int64_t n = 0;
    for (int i = 0; i < num_rows; ++i) {
        if (!is_ignored(labels[i], num_cols, ignore_index)) {
            sum += row_loss(x + static_cast<std::size_t>(i) * num_cols, num_cols, labels[i]);
            ++n;
        }
    }
    return sum / static_cast<double>(n);  // 0 / 0: NaN
}

Tolerance loss_tolerance(int num_rows, int num_cols)
{
    return {2e-5 + (static_cast<double>(num_cols) + num_rows) * std::ldexp(1.0, -24), 0.0};
}

Tolerance gradient_tolerance(int num_cols, bool bf16_output)
{
    return {2e-5 + num_cols * std::ldexp(1.0, -24) + (bf16_output ? std::ldexp(1.0, -8) : 0.0), 1e-37};
}

bool loss_matches(double got, double expected, const Tolerance& t)
{
    if (std::isnan(got) || std::isnan(expected)) {
        return std::isnan(got) && std::isnan(expected);
    }
    if (std::isinf(expected)) {
        return got == expected;
    }
    return std::abs(got - expected) <= t.relative * (std::abs(expected) + 1.0) + t.absolute;
}

void compare_gradient_row(const float* got, const double* expected, int num_cols, int label, double scale,
                          std::int64_t row, const Tolerance& t, Comparison& c)
{
    ++c.rows;
    for (int j = 0; j < num_cols; ++j) {
        ++c.values;
        const double y = got[j];
        const double e = expected[j];
        bool wrong = false;
        if (std::isnan(y) || std::isnan(e)) {
            if (std::isnan(y) != std::isnan(e)) {
                ++c.nan_mismatches;
                wrong = true;
            }
        } else {
            const double error = std::abs(y - e);
            const double s = std::abs(scale);
            if (s > 0 && std::isfinite(s)) {
                c.max_error_over_scale = std::max(c.max_error_over_scale, error / s);
            }
            const double allowed = t.relative * (std::abs(e) + (j == label ? s : 0.0)) + t.absolute * s;
            if (!(error <= allowed)) {
                ++c.out_of_tolerance;
                wrong = true;
            }
        }
        if (wrong && c.first_row < 0) {
            c.first_row = row;
            c.first_col = j;
            c.first_got = y;
            c.first_expected = e;
        }
    }
}

std::string Comparison::describe(const Tolerance& t) const
{
    std::ostringstream out;
    out << values << " gradient values of " << rows << " rows against double: max |error| / scale "
        << max_error_over_scale << " (tolerance " << t.relative << " relative)";
    if (out_of_tolerance + nan_mismatches > 0) {
        out << "; " << out_of_tolerance << " beyond tolerance, " << nan_mismatches << " NaN where the reference is not"
            << " (or not where it is); first at row " << first_row << ", column " << first_col << ": " << first_got
            << ", expected " << first_expected;
    }
    return out.str();
}

}  // namespace stepwise::cross_entropy
