#include "transpose/transpose_steps.hpp"
#include "core/cuda_check.hpp"

#include "../../snippets/transpose/01_serial.cuh"
#include "../../snippets/transpose/02_thread_per_row.cuh"
#include "../../snippets/transpose/03_thread_per_element.cuh"
#include "../../snippets/transpose/04_shared_tile.cuh"
#include "../../snippets/transpose/05_tile_16x16.cuh"
#include "../../snippets/transpose/06_padded_tile.cuh"
#include "../../snippets/transpose/07_tile_32x8.cuh"
#include "../../snippets/transpose/08_float4_tile_64.cuh"
#include "../../snippets/transpose/09_eight_loads_in_flight.cuh"
#include "../../snippets/transpose/10_output_order.cuh"

namespace stepwise::transpose {

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_serial", "One thread transposes the whole matrix", "snippets/transpose/01_serial.cuh",
         "stepwise::transpose::serial", false, true, 1, serial::transpose,
         {kernel_entry("transpose_kernel", serial::transpose_kernel, dim3(1))}},
        {"02_thread_per_row", "One thread per row of the output", "snippets/transpose/02_thread_per_row.cuh",
         "stepwise::transpose::thread_per_row", false, false, 1, thread_per_row::transpose,
         {kernel_entry("transpose_kernel", thread_per_row::transpose_kernel, dim3(thread_per_row::block_threads))}},
        {"03_thread_per_element", "One thread per element, 32 x 32 blocks",
         "snippets/transpose/03_thread_per_element.cuh", "stepwise::transpose::thread_per_element", false, false, 1,
         thread_per_element::transpose,
         {kernel_entry("transpose_kernel", thread_per_element::transpose_kernel,
                       dim3(thread_per_element::tile_dim, thread_per_element::tile_dim))}},
        {"04_shared_tile", "A 32 x 32 tile in shared memory", "snippets/transpose/04_shared_tile.cuh",
         "stepwise::transpose::shared_tile", false, false, 1, shared_tile::transpose,
         {kernel_entry("transpose_kernel", shared_tile::transpose_kernel,
                       dim3(shared_tile::tile_dim, shared_tile::tile_dim))}},
        {"05_tile_16x16", "16 x 16 tiles", "snippets/transpose/05_tile_16x16.cuh", "stepwise::transpose::tile_16x16",
         false, false, 1, tile_16x16::transpose,
         {kernel_entry("transpose_kernel", tile_16x16::transpose_kernel,
                       dim3(tile_16x16::tile_dim, tile_16x16::tile_dim))}},
        {"06_padded_tile", "The 16 x 16 tile padded by one column", "snippets/transpose/06_padded_tile.cuh",
         "stepwise::transpose::padded_tile", false, false, 1, padded_tile::transpose,
         {kernel_entry("transpose_kernel", padded_tile::transpose_kernel,
                       dim3(padded_tile::tile_dim, padded_tile::tile_dim))}},
        {"07_tile_32x8", "A padded 32 x 32 tile, 32 x 8 threads", "snippets/transpose/07_tile_32x8.cuh",
         "stepwise::transpose::tile_32x8", true, false, 1, tile_32x8::transpose,
         {kernel_entry("transpose_kernel", tile_32x8::transpose_kernel,
                       dim3(tile_32x8::tile_dim, tile_32x8::block_rows))}},
        {"08_float4_tile_64", "float4 accesses, a 64 x 64 tile", "snippets/transpose/08_float4_tile_64.cuh",
         "stepwise::transpose::float4_tile_64", true, false, 4, float4_tile_64::transpose,
         {kernel_entry("transpose_kernel", float4_tile_64::transpose_kernel, dim3(float4_tile_64::block_threads))}},
        {"09_eight_loads_in_flight", "128 threads, eight 16-byte loads in flight each",
         "snippets/transpose/09_eight_loads_in_flight.cuh", "stepwise::transpose::eight_loads_in_flight", true, false,
         4, eight_loads_in_flight::transpose,
         {kernel_entry("transpose_kernel", eight_loads_in_flight::transpose_kernel,
                       dim3(eight_loads_in_flight::block_threads))}},
        {"10_output_order", "Blocks ordered along the output's rows", "snippets/transpose/10_output_order.cuh",
         "stepwise::transpose::output_order", true, false, 1, output_order::transpose,
         {kernel_entry("transpose_kernel", output_order::transpose_kernel, dim3(output_order::block_threads)),
          kernel_entry("transpose_scalar_kernel", output_order::transpose_scalar_kernel,
                       dim3(output_order::scalar_threads))}},
    };
    return all;
}

CublasTranspose::CublasTranspose() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }

CublasTranspose::~CublasTranspose() { cublasDestroy(handle_); }

cudaError_t CublasTranspose::operator()(const float* d_in, float* d_out, int num_rows, int num_cols,
                                        cudaStream_t stream) const
{
    // Row-major d_in (num_rows x num_cols) is the column-major num_cols x num_rows matrix A (lda = num_cols); the
    // row-major output is the column-major num_rows x num_cols matrix C = A^T (ldc = num_rows). With beta = 0, B is
    // not read; cuBLAS allows B = C (its in-place mode).
    const float one = 1.f;
    const float zero = 0.f;
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cublas(cublasSgeam(handle_, CUBLAS_OP_T, CUBLAS_OP_N, num_rows, num_cols, &one, d_in, num_cols, &zero,
                             d_out, num_rows, d_out, num_rows),
                 "cublasSgeam");
    return cudaGetLastError();
}

}  // namespace stepwise::transpose
