// bf16 on the CPU: rounding floats to bf16 bits as the GPU does (__float2bfloat16_rn), widening them back, and the
// bytes of a buffer as the GPU holds it (shared by the chapters that take bf16: their checks and their tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stepwise {

//! @brief The bf16 nearest to `x` (ties to even; NaN stays NaN), as its 16 bits.
std::uint16_t to_bf16_bits(float x);
//! @brief The value of bf16 bits, exactly.
float from_bf16_bits(std::uint16_t bits);
//! @brief Every value rounded to bf16.
std::vector<std::uint16_t> to_bf16(const std::vector<float>& values);
//! @brief Every bf16 value widened to float, exactly.
std::vector<float> from_bf16(const std::vector<std::uint16_t>& values);
//! @brief Every value rounded to bf16 and widened back: what the GPU reads of `values` given as bf16.
std::vector<float> round_to_bf16(const std::vector<float>& values);

//! @brief The `count` values at `bytes` as the GPU holds them (fp32, or bf16 bits), widened to float exactly.
std::vector<float> widen(const unsigned char* bytes, std::size_t count, bool bf16);
//! @brief `values` as the GPU holds them: their fp32 bytes, or their bf16 bits (rounded to nearest even).
std::vector<unsigned char> narrow(const std::vector<float>& values, bool bf16);

}  // namespace stepwise
