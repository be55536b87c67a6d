// The warp-divergence chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "divergence/divergence_reference.hpp"
#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_runtime.h>

#include <vector>

namespace stepwise::divergence {

//! @brief A step's launcher: `d_out[i]` = the sum of sines or cosines of `d_in[i] + k * angle_step`.
using BranchFunction = cudaError_t (*)(const float* d_in, float* d_out, int num_items, cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    bool beyond_article;     //!< not one of the source's kernels
    BranchRule rule;         //!< which items take the sine branch
    BranchFunction branch;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief The chapter's ceiling: every thread sums sines, no branch at all; the same work per thread as a step.
cudaError_t uniform_work(const float* d_in, float* d_out, int num_items, cudaStream_t stream);

}  // namespace stepwise::divergence
