#include "reduction/reduction_reference.hpp"

#include <cmath>
#include <random>
#include <stdexcept>

namespace stepwise::reduction {

std::vector<int> random_ints(std::size_t num_items, int low, int high, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> value(low, high);
    std::vector<int> values(num_items);
    for (int& v : values) {
        v = value(rng);
    }
    return values;
}

std::vector<float> random_floats(std::size_t num_items, float low, float high, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> value(low, high);
    std::vector<float> values(num_items);
    for (float& v : values) {
        v = value(rng);
    }
    return values;
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
