// The transpose chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::transpose {

//! @brief `num_rows * num_cols` random floats in [-1, 1), row-major.
std::vector<float> random_matrix(int num_rows, int num_cols, std::uint64_t seed);

//! @brief `count` floats with random bit patterns: NaNs with payloads, infinities, subnormals, signed zeros and
//!        ordinary numbers alike. A transpose must move every one of them unchanged.
std::vector<float> random_bit_patterns(std::size_t count, std::uint64_t seed);

//! @brief The transpose of a `num_rows` x `num_cols` row-major matrix: `out[c * num_rows + r] = in[r * num_cols + c]`.
std::vector<float> reference_transpose(const std::vector<float>& in, int num_rows, int num_cols);

//! @brief Compares a transpose with the reference bit for bit (a transpose computes nothing: every bit moves).
struct BitComparison {
    std::size_t mismatches = 0;
    std::size_t first_index = 0;   //!< where the first mismatch is (row-major index of the output)
    std::uint32_t first_got = 0;   //!< its bits
    std::uint32_t first_expected = 0;

    bool identical() const { return mismatches == 0; }
    //! One line: how many elements differ and the first of them, as output (row, column) and bits.
    std::string describe(int out_cols) const;
};

//! @brief Element by element: `got` and `expected` are both `num_rows * num_cols` floats.
BitComparison compare_bits(const std::vector<float>& got, const std::vector<float>& expected);

}  // namespace stepwise::transpose
