//! @file 03_children_from_every_block.cuh
//! @brief Dynamic parallelism, step 2 (beyond the source): the cost of a device-side launch, one parent thread
//!        launching every child.
//!
//! Step 2's children all come from one thread, so they are issued one by
//! one and run in that block's stream, in order. Here the parent grid has
//! one block per child and thread 0 of each launches one: the launches are
//! issued by many SMs at once, and children of different blocks, in
//! different implicit streams, may run concurrently.
#pragma once

#include <cuda_runtime.h>

namespace stepwise::dynamic_parallelism::children_from_every_block {

constexpr int child_threads = 32;          //!< threads of each child grid (one block)
constexpr int max_children = 2048;         //!< the device runtime's default limit on pending launches
constexpr int parent_threads = 32;         //!< threads of each parent block (thread 0 launches)

//! @brief Child `child` writes `child + 1` to `d_out[child]`.
static __global__ void __launch_bounds__(child_threads) child_kernel(int* d_out, int child)
{
    if (threadIdx.x == 0) {
        d_out[child] = child + 1;
    }
}

//! @brief Thread 0 of block `b` launches child `b`, counting the launches that fail.
static __global__ void parent_kernel(int* d_out, unsigned int* d_failed_launches)
{
    if (threadIdx.x == 0) {
        child_kernel<<<1, child_threads>>>(d_out, static_cast<int>(blockIdx.x));
        if (cudaGetLastError() != cudaSuccess) {
            atomicAdd(d_failed_launches, 1u);
        }
    }
}

//! @brief Launches `num_children` parent blocks, each of which launches one child grid.
//! @param[out] d_out              `num_children` ints; child `c` writes `c + 1` to `d_out[c]`
//! @param[in]  num_children       1 to `max_children`
//! @param[out] d_failed_launches  device counter of device-side launches that failed (zero it before)
//! @param[in]  stream             stream to launch on
//! @pre pointers not null, `1 <= num_children <= max_children`
//! @return `cudaErrorInvalidValue` if a precondition fails, else the host launch's error
inline cudaError_t launch_children(int* d_out, int num_children, unsigned int* d_failed_launches,
                                   cudaStream_t stream = 0)
{
    if (d_out == nullptr || d_failed_launches == nullptr || num_children < 1 || num_children > max_children) {
        return cudaErrorInvalidValue;
    }
    parent_kernel<<<num_children, parent_threads, 0, stream>>>(d_out, d_failed_launches);
    return cudaGetLastError();
}

}  // namespace stepwise::dynamic_parallelism::children_from_every_block
