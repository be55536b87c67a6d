// The shapes of the row-wise chapters (an operation on each row of a rows x cols matrix: softmax, LayerNorm and
// RMSNorm, cross-entropy): one definition, which their timing and, through the registry, PyTorch's rows read; and
// the registry's key of a rows x cols problem in one type.
#pragma once

#include "core/chapter.hpp"

#include <cstdint>
#include <string>

namespace stepwise::row_shapes {

//! @brief A rows x cols problem.
struct RowsCols {
    int rows, cols;
};

//! The main shapes: rows of 128 to 131072 values, 16 MiB to 512 MiB of fp32 (from the PyTorch figures the row-wise
//! chapters start from). Every step is measured at them in fp32, the final step and the libraries in bf16 too.
inline constexpr RowsCols main_shapes[] = {{65536, 128},  {32768, 1024}, {8192, 4096},
                                           {16384, 8192}, {4096, 32768}, {1024, 131072}};
//! Shapes that are multiples of nothing, a single value, and rows of three values or of 100000: the final step and
//! the libraries, in both types.
inline constexpr RowsCols odd_shapes[] = {{1000, 1000}, {4097, 4095}, {3, 100000}, {100000, 3}, {1, 1}};
//! Rows as wide as a language model's vocabulary (GPT-2's 50257, a multiple of nothing; Llama 3's 128256, no power
//! of two): the final step and the libraries, in both types, in softmax and normalization.
inline constexpr RowsCols vocabulary_shapes[] = {{8192, 50257}, {2048, 128256}};
//! The sweep: bf16 rows of every power of two from 2^5 = 32 to 2^17 = 131072 values, 256 MiB in all.
inline constexpr int sweep_min_log2 = 5;
inline constexpr int sweep_max_log2 = 17;
inline constexpr std::int64_t sweep_bytes = std::int64_t{256} << 20;
//! The rows compared with the double reference at one size: all of them up to this many values, else evenly spaced
//! rows (the first and last among them) of about this many values.
inline constexpr std::int64_t checked_values = std::int64_t{1} << 22;

//! @brief A rows x cols problem in fp32 (4-byte elements) or bf16 (2-byte).
struct TypedShape {
    int rows, cols, element_bytes;
};

//! The registry's n of a shape: element bytes * 10^15 + rows * 10^7 + cols (a key; the size's `shape` gives rows
//! and cols, its problem text the type).
inline std::int64_t size_key(TypedShape s)
{
    return s.element_bytes * std::int64_t{1000000000000000} + s.rows * std::int64_t{10000000} + s.cols;
}

//! The shape whose key is `key` (the inverse of size_key).
inline TypedShape shape_of(std::int64_t key)
{
    return {static_cast<int>(key % 1000000000000000 / 10000000), static_cast<int>(key % 10000000),
            static_cast<int>(key / 1000000000000000)};
}

//! "rows x cols fp32" or "... bf16": the problem text of the registry and the pages.
inline std::string size_text(TypedShape s)
{
    return std::to_string(s.rows) + " x " + std::to_string(s.cols) + (s.element_bytes == 2 ? " bf16" : " fp32");
}

inline ProblemSize problem_size(TypedShape s) { return {size_key(s), size_text(s), {s.rows, s.cols}}; }

inline std::int64_t values_of(TypedShape s) { return std::int64_t{s.rows} * s.cols; }

}  // namespace stepwise::row_shapes
