//! @file 02_thread_per_row.cuh
//! @brief Transpose step 2: one thread per row of the output.
//!
//! Parallelizes step 1's outer loop: thread `c` writes output row `c`, which
//! is input column `c`. A warp's 32 threads read 32 neighbouring floats of an
//! input row, one 128-byte line, but write 32 floats that lie a whole output
//! row apart: every store is its own memory transaction. And with one thread
//! per row there are only `num_cols` threads, a few thousand at most.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

namespace stepwise::transpose::thread_per_row {

constexpr int block_threads = 256;  //!< threads per block; thread `c` of the grid handles input column `c`

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

//! @brief Thread `c` copies input column `c` into output row `c`.
static __global__ void transpose_kernel(const float* d_in, float* d_out, int num_rows, int num_cols)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= num_cols) {
        return;
    }
    for (int row = 0; row < num_rows; ++row) {
        d_out[static_cast<std::size_t>(col) * num_rows + row] = d_in[static_cast<std::size_t>(row) * num_cols + col];
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
    const int blocks = (num_cols + block_threads - 1) / block_threads;
    transpose_kernel<<<blocks, block_threads, 0, stream>>>(d_in, d_out, num_rows, num_cols);
    return cudaGetLastError();
}

}  // namespace stepwise::transpose::thread_per_row
