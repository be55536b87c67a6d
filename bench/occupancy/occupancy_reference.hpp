// The occupancy chapter's inputs and CPU reference (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::occupancy {

//! @brief The source's matrix: 16384 x 16384 elements (1 GiB of floats per matrix).
constexpr int measured_side = 16384;

//! @brief `count` floats uniform in [-1, 1), from a fast generator (the chapter's matrices hold 2^28 of them).
std::vector<float> random_matrix(std::size_t count, std::uint64_t seed);

//! @brief How a GPU sum compares with the reference `a + b`, rounded once to float (computed in double, exact for
//!        two floats, then rounded: the correctly rounded float sum the GPU's add must give, bit for bit).
struct Comparison {
    std::size_t mismatches = 0;
    std::size_t first_mismatch = 0;
    float got = 0, expected = 0;

    bool exact() const { return mismatches == 0; }
    std::string describe() const;
};

//! @brief Compares `c` with `a + b` element by element: equal bits, or both NaN.
Comparison compare_sum(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c);

}  // namespace stepwise::occupancy
