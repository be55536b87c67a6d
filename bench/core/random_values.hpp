// Random inputs, reproducible from a seed: what every chapter's reference draws its inputs from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace stepwise {

//! @brief `count` values uniform in [low, high) (integers: in [low, high]), drawn in order from std::mt19937_64
//!        seeded with `seed`.
template <class T>
std::vector<T> uniform_values(std::size_t count, T low, T high, std::uint64_t seed)
{
    std::mt19937_64 engine(seed);
    std::conditional_t<std::is_integral_v<T>, std::uniform_int_distribution<T>, std::uniform_real_distribution<T>>
        value(low, high);
    std::vector<T> out(count);
    for (T& x : out) {
        x = value(engine);
    }
    return out;
}

}  // namespace stepwise
