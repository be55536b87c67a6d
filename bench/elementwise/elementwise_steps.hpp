// The element-wise chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace stepwise::elementwise {

//! @brief One step of the chapter, with a uniform launcher around the snippet's own.
struct Step : StepSource {
    bool same_operation;    //!< computes the assignment's function for every valid input
    bool beyond_article;    //!< not one of the article's steps
    bool lookup_domain_only;//!< exact only for the first update of integers 10..265
    int dimx_multiple;      //!< the launcher requires dimx % dimx_multiple == 0
    double tolerance_ulp;   //!< allowed error against the double reference, one update (see compare())
    int inner_error_exponent; //!< accuracy of its log and cos (see propagated_error_bound())
    std::size_t workspace_bytes;                               //!< device workspace the step needs
    cudaError_t (*prepare)(void* d_workspace, cudaStream_t);   //!< fills the workspace (null: nothing to do)
    cudaError_t (*update)(float* d_data, int dimx, int dimy, const void* d_workspace, cudaStream_t);
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

}  // namespace stepwise::elementwise
