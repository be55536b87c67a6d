#include "divergence/divergence_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace stepwise::divergence {

std::vector<float> random_angles(std::size_t count, std::uint64_t seed)
{
    return uniform_values(count, -3.0f, 3.0f, seed);
}

std::vector<double> reference_sums(const std::vector<float>& input, BranchRule rule)
{
    std::vector<double> out(input.size());
    for (std::size_t index = 0; index < input.size(); ++index) {
        const bool sine = rule == BranchRule::by_index ? index % 2 == 0 : (index / 32) % 2 == 0;
        double sum = 0.0;
        for (int k = 0; k < work_iterations; ++k) {
            // The angle as the kernel forms it: float(x + float(k) * angle_step), one multiply-add (nvcc contracts
            // it), then sin or cos of that float in double.
            const float angle = std::fma(static_cast<float>(k), angle_step, input[index]);
            sum += sine ? std::sin(static_cast<double>(angle)) : std::cos(static_cast<double>(angle));
        }
        out[index] = sum;
    }
    return out;
}

std::string Comparison::describe() const
{
    std::ostringstream os;
    os << "max |error| " << max_abs_error << " at item " << worst_index << " (got " << worst_output << ", expected "
       << worst_reference << "), " << over_tolerance << " over tolerance, " << nan_mismatches << " NaN mismatches";
    return os.str();
}

Comparison compare(const std::vector<float>& output, const std::vector<double>& reference, double tolerance)
{
    if (output.size() != reference.size()) {
        throw std::invalid_argument("divergence::compare: " + std::to_string(output.size()) + " outputs for " +
                                    std::to_string(reference.size()) + " references");
    }
    Comparison c;
    for (std::size_t i = 0; i < output.size(); ++i) {
        const double got = output[i];
        const double want = reference[i];
        if (std::isnan(got) || std::isnan(want)) {
            if (std::isnan(got) != std::isnan(want)) {
                ++c.nan_mismatches;
            }
            continue;
        }
        const double error = std::fabs(got - want);
        c.max_rel = std::max(c.max_rel, error / std::max(std::fabs(want), 1.0));
        if (!(error <= tolerance)) {
            ++c.over_tolerance;
        }
        if (error > c.max_abs_error || (std::isinf(error) && !std::isinf(c.max_abs_error))) {
            c.max_abs_error = error;
            c.worst_index = i;
            c.worst_output = got;
            c.worst_reference = want;
        }
    }
    return c;
}

}  // namespace stepwise::divergence
