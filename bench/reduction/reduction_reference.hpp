// The reduction chapter's CPU references, inputs and float tolerance (shared by tests and timing program).
#pragma once

#include <cstdint>
#include <vector>

namespace stepwise::reduction {

//! @brief `num_items` random integers in [low, high].
std::vector<int> random_ints(std::size_t num_items, int low, int high, std::uint64_t seed);

//! @brief `num_items` random floats in [low, high).
std::vector<float> random_floats(std::size_t num_items, float low, float high, std::uint64_t seed);

//! @brief The exact sum, in 64 bits.
std::int64_t exact_sum(const std::vector<int>& values);

//! @brief The sum in double precision.
double reference_sum(const std::vector<float>& values);

//! @brief How far any float summation order may land from the exact sum: gamma(n - 1) * sum |x|,
//!        with gamma(k) = k u / (1 - k u) and u = 2^-24 (Higham, Accuracy and Stability, 4.2).
//! @throws std::domain_error when (n - 1) u >= 1, where the bound says nothing
double float_sum_tolerance(const std::vector<float>& values);

}  // namespace stepwise::reduction
