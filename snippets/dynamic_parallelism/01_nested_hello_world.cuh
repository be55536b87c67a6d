//! @file 01_nested_hello_world.cuh
//! @brief Dynamic parallelism, step 1 (the source's nestedHelloWorld): a kernel that launches itself.
//!
//! Thread 0 of every block launches a new grid of the same shape one level
//! deeper, then prints its depth and block, until `max_depth`. Build with
//! relocatable device code and link the device runtime (`nvcc -rdc=true ...
//! -lcudadevrt`). On CUDA 12 and later (CDP2, the only kind on sm_90) there
//! is no device-side `cudaDeviceSynchronize`: a parent cannot wait for its
//! children, it only knows that its grid completes after all of them have.
//! Unlike the source, a failed device-side launch is counted, not ignored.
#pragma once

#include <cstdio>
#include <cuda_runtime.h>

namespace stepwise::dynamic_parallelism::nested_hello_world {

constexpr int grid_blocks = 2;    //!< blocks of every grid, the host's and each child's
constexpr int block_threads = 3;  //!< threads per block
constexpr int max_nesting = 24;   //!< CUDA's limit on the depth of device-side launches

//! @brief Thread 0 of each block launches the next level, then prints "current_depth=... blockIdx.x=...".
static __global__ void nested_hello_kernel(int current_depth, int max_depth, unsigned int* d_failed_launches)
{
    if (current_depth == max_depth) {
        return;
    }
    if (threadIdx.x == 0) {
        nested_hello_kernel<<<grid_blocks, block_threads>>>(current_depth + 1, max_depth, d_failed_launches);
        if (cudaGetLastError() != cudaSuccess) {
            atomicAdd(d_failed_launches, 1u);
        }
        printf("current_depth=%d blockIdx.x=%d threadIdx.x=%d\n", current_depth, blockIdx.x, threadIdx.x);
    }
}

//! @brief Launches the nested grids: depth d prints 2^(d+1) lines, 2^(max_depth+1) - 2 lines in all.
//! @param[in]  max_depth          levels to print, 1 to `max_nesting`
//! @param[out] d_failed_launches  device counter, incremented for each device-side launch that failed
//!                                (zero it before; read it after the stream has finished)
//! @param[in]  stream             stream to launch on
//! @pre `d_failed_launches` not null, `1 <= max_depth <= max_nesting`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the host launch's error
inline cudaError_t nested_hello(int max_depth, unsigned int* d_failed_launches, cudaStream_t stream = 0)
{
    if (d_failed_launches == nullptr || max_depth < 1 || max_depth > max_nesting) {
        return cudaErrorInvalidValue;
    }
    nested_hello_kernel<<<grid_blocks, block_threads, 0, stream>>>(0, max_depth, d_failed_launches);
    return cudaGetLastError();
}

}  // namespace stepwise::dynamic_parallelism::nested_hello_world
