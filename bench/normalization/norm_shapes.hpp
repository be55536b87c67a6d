// The problems of the normalization chapters (forward and backward): LayerNorm or RMSNorm over rows x cols in fp32 or
// bf16, and the registry's key and text of each.
#pragma once

#include "core/chapter.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::norm_shapes {

enum class Norm { layer = 1, rms = 2 };

//! A rows x cols problem of one operation, its matrices in fp32 (4-byte elements) or bf16 (2-byte).
struct Shape {
    Norm norm;
    int rows, cols, element_bytes;
};

//! The registry's n of a shape: operation (1 LayerNorm, 2 RMSNorm) * 10^16 + element bytes * 10^15 + rows * 10^7 +
//! cols (a key; the size's `shape` gives rows and cols, its problem text the operation and the type).
inline std::int64_t size_key(Shape s)
{
    return static_cast<int>(s.norm) * std::int64_t{10000000000000000} +
           s.element_bytes * std::int64_t{1000000000000000} + s.rows * std::int64_t{10000000} + s.cols;
}

inline Shape shape_of(std::int64_t key)
{
    return {static_cast<Norm>(key / 10000000000000000), static_cast<int>(key % 1000000000000000 / 10000000),
            static_cast<int>(key % 10000000), static_cast<int>(key % 10000000000000000 / 1000000000000000)};
}

inline std::string size_text(Shape s)
{
    return std::to_string(s.rows) + " x " + std::to_string(s.cols) + (s.norm == Norm::layer ? " LayerNorm" : " RMSNorm") +
           (s.element_bytes == 2 ? " bf16" : " fp32");
}

inline ProblemSize problem_size(Shape s) { return {size_key(s), size_text(s), {s.rows, s.cols}}; }

inline std::int64_t values_of(Shape s) { return std::int64_t{s.rows} * s.cols; }

//! The most values, rows and columns of any of the shapes of `keys`: what buffers shared by every size must hold.
struct Largest {
    std::int64_t values = 0, rows = 0, cols = 0;
};

inline Largest largest_of(const std::vector<std::int64_t>& keys)
{
    Largest most;
    for (const std::int64_t key : keys) {
        const Shape s = shape_of(key);
        most.values = std::max(most.values, values_of(s));
        most.rows = std::max<std::int64_t>(most.rows, s.rows);
        most.cols = std::max<std::int64_t>(most.cols, s.cols);
    }
    return most;
}

}  // namespace stepwise::norm_shapes
