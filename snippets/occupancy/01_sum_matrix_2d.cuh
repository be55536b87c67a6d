//! @file 01_sum_matrix_2d.cuh
//! @brief Occupancy: the source's 2-D matrix add (sumMatrixOnGPU2D), its block shape a template parameter.
//!
//! One thread per element, a 2-D grid of 2-D blocks: thread (x, y) of block
//! (bx, by) adds element (row, col) = (by * BlockY + y, bx * BlockX + x).
//! The chapter launches the same kernel with eight block shapes; only the
//! shape changes, and with it how many blocks and warps an SM holds and how
//! many bytes of a row one warp touches.
#pragma once

#include <cstddef>
#include <cuda_runtime.h>

namespace stepwise::occupancy::sum_matrix_2d {

//! @brief Thread (x, y) of block (bx, by) writes `d_c = d_a + d_b` at row `by * BlockY + y`, column `bx * BlockX + x`.
template <int BlockX, int BlockY>
static __global__ void __launch_bounds__(BlockX * BlockY)
    sum_matrix_kernel(const float* __restrict__ d_a, const float* __restrict__ d_b, float* __restrict__ d_c,
                      int num_cols, int num_rows)
{
    const int col = blockIdx.x * BlockX + threadIdx.x;
    const int row = blockIdx.y * BlockY + threadIdx.y;
    if (col < num_cols && row < num_rows) {
        const std::size_t i = static_cast<std::size_t>(row) * static_cast<std::size_t>(num_cols) + col;
        d_c[i] = d_a[i] + d_b[i];
    }
}

//! @brief Adds two row-major `num_rows` x `num_cols` float matrices with blocks of `BlockX` x `BlockY` threads.
//! @tparam BlockX threads of a block along a row (x, the contiguous dimension)
//! @tparam BlockY threads of a block along a column (y)
//! @param[in]  d_a      first matrix
//! @param[in]  d_b      second matrix
//! @param[out] d_c      `d_a + d_b` (must not overlap `d_a` or `d_b`)
//! @param[in]  num_cols columns, any positive count
//! @param[in]  num_rows rows, positive and at most 65535 * `BlockY` (the grid's y limit)
//! @param[in]  stream   stream to launch on
//! @pre pointers not null, sizes as above
//! @return `cudaErrorInvalidValue` if a precondition fails, else the launch's error
template <int BlockX, int BlockY>
cudaError_t sum_matrix(const float* d_a, const float* d_b, float* d_c, int num_cols, int num_rows,
                       cudaStream_t stream = 0)
{
    static_assert(BlockX > 0 && BlockY > 0 && BlockX * BlockY <= 1024, "a block holds 1 to 1024 threads");
    constexpr long long max_grid_y = 65535;
    if (d_a == nullptr || d_b == nullptr || d_c == nullptr || num_cols <= 0 || num_rows <= 0 ||
        (num_rows + BlockY - 1) / BlockY > max_grid_y) {
        return cudaErrorInvalidValue;
    }
    const dim3 block(BlockX, BlockY);
    const dim3 grid((num_cols + BlockX - 1) / BlockX, (num_rows + BlockY - 1) / BlockY);
    sum_matrix_kernel<BlockX, BlockY><<<grid, block, 0, stream>>>(d_a, d_b, d_c, num_cols, num_rows);
    return cudaGetLastError();
}

}  // namespace stepwise::occupancy::sum_matrix_2d
