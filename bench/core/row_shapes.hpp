// The shapes of the row-wise chapters (an operation on each row of a rows x cols matrix: softmax, LayerNorm and
// RMSNorm): one definition, which their timing and, through the registry, PyTorch's rows read.
#pragma once

#include <cstdint>

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

}  // namespace stepwise::row_shapes
