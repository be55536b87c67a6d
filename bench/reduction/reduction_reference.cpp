#include "reduction/reduction_reference.hpp"

#include "core/random_values.hpp"

#include <cmath>
#include <stdexcept>

namespace stepwise::reduction {

std::vector<int> random_ints(std::size_t num_items, int low, int high, std::uint64_t seed)
{
    return uniform_values(num_items, low, high, seed);
}

std::vector<float> random_floats(std::size_t num_items, float low, float high, std::uint64_t seed)
{
    return uniform_values(num_items, low, high, seed);
}

std::int64_t exact_sum(const std::vector<int>& values)
{
    std::int64_t sum = 0;
    for (const int v : values) {
        sum += v;
    }
    return sum;
}

double reference_sum(const std::vector<float>& values)
{
    double sum = 0;
    for (const float v : values) {
        sum += v;
    }
    return sum;
}

double float_sum_tolerance(const std::vector<float>& values)
{
    const double ku = static_cast<double>(values.empty() ? 0 : values.size() - 1) * std::ldexp(1.0, -24);
    if (ku >= 1) {
        throw std::domain_error("float_sum_tolerance: too many values for the bound");
    }
    double magnitude = 0;
    for (const float v : values) {
        magnitude += std::fabs(v);
    }
    return ku / (1 - ku) * magnitude;
}

}  // namespace stepwise::reduction
