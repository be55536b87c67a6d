//! @file 01_serial.cuh
//! @brief Transpose step 1: one GPU thread transposes the whole matrix.
//!
//! The source's starting point: the CPU loop moved to the GPU unchanged and
//! launched as a single thread. It is correct and uses one of the GPU's
//! thousands of lanes; every load waits for the memory system alone. The
//! other steps start from here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::transpose::serial {

//! @brief What every launcher checks: buffers given and not overlapping (the transpose is not in place),
//!        both dimensions positive.
inline bool valid_arguments(const float* d_in, const float* d_out, int num_rows, int num_cols)
{
    if (d_in == nullptr || d_out == nullptr || num_rows <= 0 || num_cols <= 0) {
        return false;
    }
    const std::size_t bytes = static_cast<std::size_t>(num_rows) * num_cols * sizeof(float);
    const auto in = reinterpret_cast<std::uintptr_t>(d_in);
    const auto out = reinterpret_cast<std::uintptr_t>(d_out);
    return in + bytes <= out || out + bytes <= in;
}

//! @brief The only thread walks the input row by row and writes each element to its transposed place.
static __global__ void transpose_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    for (int row = 0; row < num_rows; ++row) {
        for (int col = 0; col < num_cols; ++col) {
            d_out[static_cast<std::size_t>(col) * num_rows + row] = d_in[static_cast<std::size_t>(row) * num_cols + col];
        }
    }
}

//! @brief Writes the transpose of `d_in` to `d_out`.
//! @param[in]  d_in     `num_rows` x `num_cols` floats, row-major
//! @param[out] d_out    `num_cols` x `num_rows` floats, row-major: `d_out[c][r] = d_in[r][c]`
//! @param[in]  num_rows rows of `d_in`
//! @param[in]  num_cols columns of `d_in`
//! @param[in]  stream   stream to launch on
//! @pre `num_rows > 0`, `num_cols > 0`; `d_in` and `d_out` do not overlap
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
inline cudaError_t transpose(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream = 0)
{
    if (!valid_arguments(d_in, d_out, num_rows, num_cols)) {
        return cudaErrorInvalidValue;
    }
    transpose_kernel<<<1, 1, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::transpose::serial
