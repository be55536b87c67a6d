// The cross-entropy chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace stepwise::cross_entropy {

//! @brief A step's `cross_entropy` for one logit type (every step's launcher has this signature).
template <typename T>
using CrossEntropyFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_logits,
                                            const int* d_labels, T* d_grad, float* d_loss, int num_rows,
                                            int num_cols, int ignore_index, float dloss, cudaStream_t stream);

//! @brief One step of the chapter: every step takes fp32 and bf16 logits.
struct Step : StepSource {
    CrossEntropyFunction<float> fp32;
    CrossEntropyFunction<__nv_bfloat16> bf16;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's usual block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

}  // namespace stepwise::cross_entropy
