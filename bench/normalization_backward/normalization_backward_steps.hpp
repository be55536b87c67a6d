// The normalization backward chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace stepwise::normalization_backward {

//! @brief A step's `layer_norm_backward` for one element type of x, dy and dx (every step's launcher has this
//!        signature; parameters, their gradients and the statistics are fp32).
template <typename T>
using LayerNormBackward = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x,
                                          const T* d_dy, const float* d_gamma, const float* d_mean,
                                          const float* d_rstd, T* d_dx, float* d_dgamma, float* d_dbeta, int num_rows,
                                          int num_cols, cudaStream_t stream);
//! @brief A step's `rms_norm_backward` for one element type.
template <typename T>
using RmsNormBackward = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_x,
                                        const T* d_dy, const float* d_gamma, const float* d_rstd, T* d_dx,
                                        float* d_dgamma, int num_rows, int num_cols, cudaStream_t stream);

//! @brief One step of the chapter: both operations in fp32 and bf16.
struct Step : StepSource {
    LayerNormBackward<float> layer_norm_fp32;
    RmsNormBackward<float> rms_norm_fp32;
    LayerNormBackward<__nv_bfloat16> layer_norm_bf16;
    RmsNormBackward<__nv_bfloat16> rms_norm_bf16;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's usual block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

}  // namespace stepwise::normalization_backward
