// The attention backward chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "attention_backward/attention_backward_reference.hpp"
#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace stepwise::attention_backward {

using bf16 = __nv_bfloat16;

//! @brief A step's `attention_backward` on the chapter's Problem (each step's launcher takes its own `Shape`, with the
//!        same fields): two phases, as CUB (with `d_temp_storage == nullptr` it only sets `temp_storage_bytes`).
using BackwardFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                                         const bf16* d_k, const bf16* d_v, const bf16* d_o, const float* d_lse,
                                         const bf16* d_do, bf16* d_dq, bf16* d_dk, bf16* d_dv, const Problem& p,
                                         float scale, cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    const char* needs;    //!< what the GPU and the build must offer ("sm_80", "sm_90a")
    bool (*needs_met)();  //!< whether the code the driver loaded for the current GPU has it
    BackwardFunction backward;
    bool dq_same_bits;                 //!< whether dQ has the same bits on every run (no atomics add into it)
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief Why the current GPU cannot run `step` ("needs sm_80: ..."), or empty when it can.
//! @throws CudaError when the device cannot be queried
std::string unsupported_reason(const Step& step);

}  // namespace stepwise::attention_backward
