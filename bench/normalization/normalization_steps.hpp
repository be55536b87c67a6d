// The normalization chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace stepwise::normalization {

//! @brief A step's `layer_norm` for one element type (every step's launcher has this signature).
template <typename T>
using LayerNormFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,
                                          const T* d_gamma, const T* d_beta, T* d_out, float* d_mean, float* d_rstd,
                                          int num_rows, int num_cols, float epsilon, cudaStream_t stream);
//! @brief A step's `rms_norm` for one element type.
template <typename T>
using RmsNormFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const T* d_in,
                                        const T* d_gamma, T* d_out, int num_rows, int num_cols, float epsilon,
                                        cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    LayerNormFunction<float> layer_norm_fp32;
    RmsNormFunction<float> rms_norm_fp32;
    LayerNormFunction<__nv_bfloat16> layer_norm_bf16;  //!< nullptr: the step takes fp32 only
    RmsNormFunction<__nv_bfloat16> rms_norm_bf16;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's usual block shapes
    //! Whether the step takes every finite input: its sums of squares are scaled, so rows of 1e30 work; the earlier
    //! steps need squares below fp32's largest.
    bool full_range;
    //! The ids the step had before the chapter's steps were split or renumbered (StepEntry::formerly); empty for most.
    std::vector<std::string> formerly = {};
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

}  // namespace stepwise::normalization
