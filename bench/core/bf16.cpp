#include "core/bf16.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace stepwise {

std::uint16_t to_bf16_bits(float x)
{
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    if (std::isnan(x)) {
        return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet, sign and payload's top kept
    }
    const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
    return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float from_bf16_bits(std::uint16_t bits)
{
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float x = 0;
    std::memcpy(&x, &wide, sizeof x);
    return x;
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& values)
{
    std::vector<std::uint16_t> out(values.size());
    std::transform(values.begin(), values.end(), out.begin(), to_bf16_bits);
    return out;
}

std::vector<float> from_bf16(const std::vector<std::uint16_t>& values)
{
    std::vector<float> out(values.size());
    std::transform(values.begin(), values.end(), out.begin(), from_bf16_bits);
    return out;
}

std::vector<float> widen(const unsigned char* bytes, std::size_t count, bool bf16)
{
    std::vector<float> out(count);
    for (std::size_t i = 0; i < count; ++i) {
        if (bf16) {
            std::uint16_t bits = 0;
            std::memcpy(&bits, bytes + 2 * i, 2);
            out[i] = from_bf16_bits(bits);
        } else {
            std::memcpy(&out[i], bytes + 4 * i, 4);
        }
    }
    return out;
}

std::vector<unsigned char> narrow(const std::vector<float>& values, bool bf16)
{
    std::vector<unsigned char> out(values.size() * (bf16 ? 2 : 4));
    if (bf16) {
        const std::vector<std::uint16_t> bits = to_bf16(values);
        std::memcpy(out.data(), bits.data(), out.size());
    } else {
        std::memcpy(out.data(), values.data(), out.size());
    }
    return out;
}

std::vector<float> round_to_bf16(const std::vector<float>& values) { return from_bf16(to_bf16(values)); }

}  // namespace stepwise
