// CPU tests of the bf16 helpers: rounding as the GPU rounds, and buffers as the GPU holds them.
#include "core/bf16.hpp"
#include "core/random_values.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace stepwise {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

std::vector<float> random_values(std::size_t count, std::uint64_t seed)
{
    return uniform_values(count, -10.0f, 10.0f, seed);
}

TEST(Bf16, RoundsToNearestEven)
{
    EXPECT_EQ(to_bf16_bits(1.0f), 0x3f80);
    EXPECT_EQ(from_bf16_bits(0x3f80), 1.0f);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1); 1 + 3 * 2^-8 ties up to 1 + 2^-6.
    EXPECT_EQ(from_bf16_bits(to_bf16_bits(1.0f + std::ldexp(1.0f, -8))), 1.0f);
    EXPECT_EQ(from_bf16_bits(to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
    EXPECT_EQ(from_bf16_bits(to_bf16_bits(-inf)), -inf);
    EXPECT_TRUE(std::isnan(from_bf16_bits(to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_EQ(from_bf16_bits(to_bf16_bits(std::numeric_limits<float>::max())), inf);  // rounds past bf16's largest
    for (const float x : random_values(1000, 3)) {
        EXPECT_LE(std::abs(from_bf16_bits(to_bf16_bits(x)) - x), std::ldexp(std::abs(x), -8));
    }
}

TEST(Bf16, NarrowAndWidenAsTheGpuHoldsValues)
{
    const std::vector<float> values = random_values(100, 5);
    EXPECT_EQ(widen(narrow(values, false).data(), values.size(), false), values);
    const std::vector<unsigned char> bf16 = narrow(values, true);
    ASSERT_EQ(bf16.size(), 2 * values.size());
    EXPECT_EQ(widen(bf16.data(), values.size(), true), from_bf16(to_bf16(values)));
}

TEST(Bf16, RoundToBf16IsWhatTheGpuReads)
{
    const std::vector<float> values = random_values(100, 7);
    const std::vector<float> rounded = round_to_bf16(values);
    ASSERT_EQ(rounded.size(), values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(rounded[i], from_bf16_bits(to_bf16_bits(values[i])));
    }
}

}  // namespace
}  // namespace stepwise
