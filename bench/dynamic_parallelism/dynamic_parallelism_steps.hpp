// The dynamic-parallelism chapter's step registry. Its steps launch kernels from kernels, so they are compiled
// with relocatable device code in a library of their own (bench/CMakeLists.txt); this header needs none.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace stepwise::dynamic_parallelism {

//! @brief Step 1's launcher: the nested hello world to `max_depth` levels.
using HelloFunction = cudaError_t (*)(int max_depth, unsigned int* d_failed_launches, cudaStream_t stream);
//! @brief Steps 2 and 3: `num_children` child grids, child `c` writing `c + 1` to `d_out[c]`.
using ChildrenFunction = cudaError_t (*)(int* d_out, int num_children, unsigned int* d_failed_launches,
                                         cudaStream_t stream);
//! @brief Steps 4 and 5: the adaptive integral of `Peaks` (see dynamic_parallelism_reference.hpp) over [a, b].
using IntegrateFunction = cudaError_t (*)(double a, double b, int initial_intervals, double tolerance,
                                          double* d_result, unsigned int* d_status, void* d_workspace, int capacity,
                                          cudaStream_t stream);

//! @brief One step of the chapter; exactly one of its launchers is set.
struct Step : StepSource {
    const char* launcher;
    bool beyond_article;
    HelloFunction hello;
    ChildrenFunction children;
    IntegrateFunction integrate;
    std::vector<KernelEntry> kernels;
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief The most children steps 2 and 3 (and the host baseline) launch in one call.
int max_children();

//! @brief The baseline of steps 2 and 3: the same child kernel launched `num_children` times from the host.
cudaError_t host_launch_children(int* d_out, int num_children, cudaStream_t stream);

//! @brief Bytes of workspace steps 4 and 5 need for lists of `capacity` intervals.
std::size_t integrate_workspace_bytes(int capacity);

//! @brief What the bits of the adaptive steps' status mean, for messages ("list overflow, too deep").
std::string describe_integrate_status(unsigned int status);

}  // namespace stepwise::dynamic_parallelism
