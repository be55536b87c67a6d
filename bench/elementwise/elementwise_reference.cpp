#include "elementwise/elementwise_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>

namespace stepwise::elementwise {
namespace {

std::size_t element_count(int dimx, int dimy)
{
    if (dimx <= 0 || dimy <= 0) {
        throw std::invalid_argument("element-wise: dimensions must be positive");
    }
    return static_cast<std::size_t>(dimx) * static_cast<std::size_t>(dimy);
}

double ulp_of(double reference)
{
    const float r = std::fabs(static_cast<float>(reference));
    return static_cast<double>(std::nextafter(r, std::numeric_limits<float>::infinity()) - r);
}

}  // namespace

std::vector<float> assignment_input(int dimx, int dimy, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> offset(0, 255);
    std::vector<float> data(element_count(dimx, dimy));
    for (float& v : data) {
        v = 10.f + static_cast<float>(offset(rng));
    }
    return data;
}

std::vector<float> uniform_input(int dimx, int dimy, float low, float high, std::uint64_t seed)
{
    return uniform_values(element_count(dimx, dimy), low, high, seed);
}

std::vector<double> reference_update(const std::vector<float>& input, int dimx, int dimy, int applications)
{
    if (input.size() != element_count(dimx, dimy)) {
        throw std::invalid_argument("reference_update: input size does not match dimx * dimy");
    }
    std::vector<double> values(input.begin(), input.end());
    for (int a = 0; a < applications; ++a) {
        for (std::size_t i = 0; i < values.size(); ++i) {
            const bool odd_column = (i % static_cast<std::size_t>(dimx)) % 2 == 1;
            const double v = values[i];
            values[i] = v + std::sqrt((odd_column ? std::log(v) : std::cos(v)) + 1.0);
        }
    }
    return values;
}

double propagated_error_bound(float input, bool odd_column, int inner_error_exponent)
{
    const double v = input;
    const double f = odd_column ? std::log(v) : std::cos(v);
    const double x = f + 1.0;
    const double delta = std::ldexp(std::max(std::fabs(f), 1.0), inner_error_exponent);
    const double at_most = std::sqrt(delta);
    return x > delta ? std::min(delta / (2.0 * std::sqrt(x)), at_most) : at_most;
}

Comparison compare(const std::vector<float>& input, const std::vector<float>& output,
                   const std::vector<double>& reference, int dimx, double tolerance_ulp,
                   int inner_error_exponent)
{
    if (output.size() != reference.size() || input.size() != reference.size() || dimx <= 0) {
        throw std::invalid_argument("compare: input, output and reference sizes differ");
    }
    Comparison c;
    for (std::size_t i = 0; i < output.size(); ++i) {
        const double out = output[i];
        const double ref = reference[i];
        if (!std::isfinite(out)) {
            if (c.not_finite++ == 0) {
                c.worst_index = i;
                c.worst_output = output[i];
                c.worst_reference = ref;
            }
            continue;
        }
        const bool odd_column = (i % static_cast<std::size_t>(dimx)) % 2 == 1;
        const double error = std::fabs(out - ref);
        const double tolerance = tolerance_ulp * ulp_of(ref) + propagated_error_bound(input[i], odd_column, inner_error_exponent);
        c.max_ulp = std::max(c.max_ulp, error / ulp_of(ref));
        c.max_rel = std::max(c.max_rel, ref != 0 ? error / std::fabs(ref) : error);
        if (error / tolerance > c.max_tolerance_used) {
            c.max_tolerance_used = error / tolerance;
            if (c.not_finite == 0) {
                c.worst_index = i;
                c.worst_output = output[i];
                c.worst_reference = ref;
            }
        }
    }
    if (c.not_finite > 0) {
        c.max_ulp = c.max_rel = c.max_tolerance_used = std::numeric_limits<double>::infinity();
    }
    return c;
}

double max_relative_error(const std::vector<float>& output, const std::vector<double>& reference)
{
    if (output.size() != reference.size()) {
        throw std::invalid_argument("max_relative_error: output and reference sizes differ");
    }
    double worst = 0;
    for (std::size_t i = 0; i < output.size(); ++i) {
        if (!std::isfinite(output[i])) {
            return std::numeric_limits<double>::infinity();
        }
        const double ref = reference[i];
        const double error = std::fabs(static_cast<double>(output[i]) - ref);
        worst = std::max(worst, ref != 0 ? error / std::fabs(ref) : error);
    }
    return worst;
}

std::string Comparison::describe(int dimx) const
{
    std::ostringstream text;
    text.precision(9);
    text << "max error " << max_ulp << " ulp (relative " << max_rel << ", " << max_tolerance_used
         << " of the tolerance), " << not_finite
         << " non-finite outputs; worst at row " << worst_index / static_cast<std::size_t>(dimx) << ", column "
         << worst_index % static_cast<std::size_t>(dimx) << ": got " << worst_output << ", reference "
         << worst_reference;
    return text.str();
}

}  // namespace stepwise::elementwise
