#include "softmax/softmax_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace stepwise::softmax {

std::vector<float> random_logits(std::size_t count, std::uint64_t seed)
{
    return uniform_values(count, -10.0f, 10.0f, seed);
}

void reference_row(const float* x, int num_cols, double* y)
{
    double max = -std::numeric_limits<double>::infinity();
    bool nan_row = false;
    for (int j = 0; j < num_cols; ++j) {
        nan_row = nan_row || std::isnan(x[j]) || x[j] == std::numeric_limits<float>::infinity();
        max = std::max(max, static_cast<double>(x[j]));
    }
    if (nan_row || max == -std::numeric_limits<double>::infinity()) {
        std::fill(y, y + num_cols, std::numeric_limits<double>::quiet_NaN());
        return;
    }
    double sum = 0;
    for (int j = 0; j < num_cols; ++j) {
        y[j] = std::exp(static_cast<double>(x[j]) - max);
        sum += y[j];
    }
    for (int j = 0; j < num_cols; ++j) {
        y[j] /= sum;
    }
}

Tolerance tolerance(int num_cols, bool bf16_output)
{
    const double fp32 = 2e-5 + num_cols * std::ldexp(1.0, -24);
    return {fp32 + (bf16_output ? std::ldexp(1.0, -8) : 0.0), 1e-37};
}

void compare_row(const float* got, const double* expected, int num_cols, std::int64_t row, const Tolerance& t,
                 Comparison& c)
{
    ++c.rows;
    double sum = 0;
    bool nan_row = false;
    for (int j = 0; j < num_cols; ++j) {
        ++c.values;
        const double y = got[j];
        const double e = expected[j];
        nan_row = nan_row || std::isnan(e);
        sum += y;
        bool wrong = false;
        if (std::isnan(y) || std::isnan(e)) {
            if (std::isnan(y) != std::isnan(e)) {
                ++c.nan_mismatches;
                wrong = true;
            }
        } else {
            const double error = std::abs(y - e);
            if (e >= 1e-30) {
                c.max_relative = std::max(c.max_relative, error / e);
            }
            if (!(error <= t.relative * e + t.absolute)) {
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
    if (!nan_row) {
        c.max_row_sum_error = std::max(c.max_row_sum_error, std::isnan(sum) ? std::numeric_limits<double>::infinity()
                                                                            : std::abs(sum - 1.0));
    }
}

std::string Comparison::describe(const Tolerance& t) const
{
    std::ostringstream out;
    out << values << " values of " << rows << " rows against double: max relative error " << max_relative
        << ", max |row sum - 1| " << max_row_sum_error << " (tolerance " << t.relative << " relative)";
    if (out_of_tolerance + nan_mismatches > 0) {
        out << "; " << out_of_tolerance << " beyond tolerance, " << nan_mismatches << " NaN where the reference is not"
            << " (or not where it is); first at row " << first_row << ", column " << first_col << ": " << first_got
            << ", expected " << first_expected;
    }
    return out.str();
}

}  // namespace stepwise::softmax
