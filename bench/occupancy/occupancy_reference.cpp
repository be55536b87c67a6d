#include "occupancy/occupancy_reference.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace stepwise::occupancy {

std::vector<float> random_matrix(std::size_t count, std::uint64_t seed)
{
    std::vector<float> out(count);
    std::uint64_t state = seed;
    for (float& x : out) {
        // splitmix64, then the top 24 bits as a fraction in [0, 1)
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x = static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;
    }
    return out;
}

std::string Comparison::describe() const
{
    std::ostringstream os;
    if (mismatches == 0) {
        os << "every element equals the correctly rounded a + b";
    } else {
        os << mismatches << " elements differ from a + b; the first, element " << first_mismatch << ", is " << got
           << " instead of " << expected;
    }
    return os.str();
}

Comparison compare_sum(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c)
{
    if (a.size() != b.size() || a.size() != c.size()) {
        throw std::invalid_argument("occupancy::compare_sum: matrices of different sizes");
    }
    Comparison result;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const float expected = static_cast<float>(static_cast<double>(a[i]) + static_cast<double>(b[i]));
        const bool same = std::isnan(expected) ? std::isnan(c[i]) : std::memcmp(&expected, &c[i], sizeof(float)) == 0;
        if (!same) {
            if (result.mismatches++ == 0) {
                result.first_mismatch = i;
                result.got = c[i];
                result.expected = expected;
            }
        }
    }
    return result;
}

}  // namespace stepwise::occupancy
