// The reduction chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace stepwise::reduction {

//! @brief A step's `sum` for one value type, with a writable input (steps that reduce in place overwrite it).
template <typename T>
using SumFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, T* d_in, T* d_out,
                                   int num_items, cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    const char* source;        //!< where the step comes from: "003", "Harris 1".."Harris 7", or "beyond"
    bool destroys_input;       //!< reduces in place in global memory, as the 003 article's kernels
    SumFunction<int> sum_int;
    SumFunction<float> sum_float;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief The library baseline: cub::DeviceReduce::Sum, with the same two-phase interface.
cudaError_t cub_sum(void* d_temp_storage, std::size_t& temp_storage_bytes, int* d_in, int* d_out, int num_items,
                    cudaStream_t stream);
cudaError_t cub_sum(void* d_temp_storage, std::size_t& temp_storage_bytes, float* d_in, float* d_out,
                    int num_items, cudaStream_t stream);

}  // namespace stepwise::reduction
