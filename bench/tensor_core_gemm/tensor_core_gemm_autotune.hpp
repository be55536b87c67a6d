// The tensor-core GEMM chapter's autotuning sweep: configurations of the final step's kernel template, timed in the
// same run, at the main size, at a small one and at a transformer's shape (where the launcher picks others).
#pragma once

#include "core/resources.hpp"
#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepwise::tensor_core_gemm {

//! @brief One configuration of the final step's `three_consumer_tiles::Config`, instantiated and ready to launch.
struct AutotuneCandidate {
    std::string id;        //!< "pingpong_bm128_bn176_s5_c2x1_g8"
    nlohmann::json config; //!< block, warpgroup tiles, threads, stages, cluster and group (the page's columns)
    GemmFunction gemm;     //!< three_consumer_tiles::gemm_with<Config>
    KernelEntry kernel;
    //! @brief Whether the final step's launcher runs this configuration for an M x N problem on this device.
    bool (*chosen_for)(int M, int N);
};

//! @brief Every configuration the sweep times, the launcher's six among them. To try another, add one line in
//!        tensor_core_gemm_autotune.cu; a configuration its Config's static_asserts reject does not compile.
const std::vector<AutotuneCandidate>& autotune_candidates();

}  // namespace stepwise::tensor_core_gemm
