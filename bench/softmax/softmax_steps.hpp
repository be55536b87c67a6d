// The softmax chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace stepwise::softmax {

//! @brief A step's `softmax` for one element type (every step's launcher has this signature).
template <typename T>
using SoftmaxFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,
                                       T* d_out, int num_rows, int num_cols, cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    SoftmaxFunction<float> fp32;
    SoftmaxFunction<__nv_bfloat16> bf16;  //!< nullptr: the step takes fp32 only
    std::vector<KernelEntry> kernels;     //!< what the step launches, with the launcher's usual block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

}  // namespace stepwise::softmax
