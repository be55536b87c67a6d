//! @file 02_children_from_one_thread.cuh
//! @brief Dynamic parallelism, step 2 (beyond the source): the cost of a device-side launch, one parent thread
//!        launching every child.
//!
//! The source shows that a kernel can launch a kernel, not what it costs.
//! Here one thread launches `num_children` small grids in a loop; each
//! child marks its slot of `d_out`. The chapter times this against the
//! same children launched from the host. Launches from one block go into
//! that block's implicit stream and run one after another, in order.
#pragma once

#include <cuda_runtime.h>

namespace stepwise::dynamic_parallelism::children_from_one_thread {

constexpr int child_threads = 32;          //!< threads of each child grid (one block)
constexpr int max_children = 2048;         //!< the device runtime's default limit on pending launches

//! @brief Child `child` writes `child + 1` to `d_out[child]`.
static __global__ void __launch_bounds__(child_threads) child_kernel(int* d_out, int child)
{
    if (threadIdx.x == 0) {
        d_out[child] = child + 1;
    }
}

//! @brief One thread launches `num_children` children, counting the launches that fail.
static __global__ void parent_kernel(int* d_out, int num_children, unsigned int* d_failed_launches)
{
    for (int child = 0; child < num_children; ++child) {
        child_kernel<<<1, child_threads>>>(d_out, child);
        if (cudaGetLastError() != cudaSuccess) {
            atomicAdd(d_failed_launches, 1u);
        }
    }
}

//! @brief Launches one parent thread that launches `num_children` child grids.
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
    parent_kernel<<<1, 1, 0, stream>>>(d_out, num_children, d_failed_launches);
    return cudaGetLastError();
}

}  // namespace stepwise::dynamic_parallelism::children_from_one_thread
