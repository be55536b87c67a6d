#include "transpose/transpose_reference.hpp"

#include "core/random_values.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>

namespace stepwise::transpose {

std::vector<float> random_matrix(int num_rows, int num_cols, std::uint64_t seed)
{
    return uniform_values(static_cast<std::size_t>(num_rows) * num_cols, -1.f, 1.f, seed);
}

std::vector<float> random_bit_patterns(std::size_t count, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::vector<float> out(count);
    for (float& v : out) {
        const auto bits = static_cast<std::uint32_t>(rng());
        std::memcpy(&v, &bits, sizeof v);
    }
    return out;
}

std::vector<float> reference_transpose(const std::vector<float>& in, int num_rows, int num_cols)
{
    if (in.size() != static_cast<std::size_t>(num_rows) * num_cols) {
        throw std::invalid_argument("reference_transpose: the matrix does not have num_rows * num_cols elements");
    }
    std::vector<float> out(in.size());
    constexpr int block = 64;  // 64 x 64 blocks: the rows read and the columns written stay in cache
    for (int r0 = 0; r0 < num_rows; r0 += block) {
        for (int c0 = 0; c0 < num_cols; c0 += block) {
            for (int r = r0; r < std::min(r0 + block, num_rows); ++r) {
                for (int c = c0; c < std::min(c0 + block, num_cols); ++c) {
                    out[static_cast<std::size_t>(c) * num_rows + r] = in[static_cast<std::size_t>(r) * num_cols + c];
                }
            }
        }
    }
    return out;
}

std::string BitComparison::describe(int out_cols) const
{
    if (identical()) {
        return "bit for bit identical to the CPU transpose";
    }
    char text[200];
    std::snprintf(text, sizeof text, "%zu elements differ; the first at output (%zu, %zu): bits %08x, expected %08x",
                  mismatches, first_index / static_cast<std::size_t>(out_cols),
                  first_index % static_cast<std::size_t>(out_cols), first_got, first_expected);
    return text;
}

BitComparison compare_bits(const std::vector<float>& got, const std::vector<float>& expected)
{
    if (got.size() != expected.size()) {
        throw std::invalid_argument("compare_bits: the two matrices differ in size");
    }
    BitComparison result;
    for (std::size_t i = 0; i < got.size(); ++i) {
        std::uint32_t a = 0;
        std::uint32_t b = 0;
        std::memcpy(&a, &got[i], sizeof a);
        std::memcpy(&b, &expected[i], sizeof b);
        if (a != b) {
            if (result.mismatches++ == 0) {
                result.first_index = i;
                result.first_got = a;
                result.first_expected = b;
            }
        }
    }
    return result;
}

}  // namespace stepwise::transpose
