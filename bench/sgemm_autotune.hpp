// The SGEMM chapter's autotuning sweep: configurations of step 10's kernel template, timed in the same run.
#pragma once

#include "resources.hpp"
#include "sgemm_steps.hpp"

#include <string>
#include <vector>

namespace stepwise::sgemm {

//! @brief One configuration of `autotuned::Config`, instantiated and ready to launch.
struct AutotuneCandidate {
    std::string id;       //!< "bm128_bn128_bk16_wm64_wn32_tm8_tn8_s3_mb2"
    Tiling tiling;        //!< its block, warp and thread tiles, threads and stages
    int min_blocks = 0;   //!< the kernel's __launch_bounds__ minimum blocks per SM
    bool chosen = false;  //!< the configuration step 10 uses
    int multiple_m = 1, multiple_n = 1, multiple_k = 1;  //!< what it needs M, N and K to be multiples of
    SgemmFunction sgemm;
    KernelEntry kernel;
};

//! @brief Every configuration the sweep times, the chosen one among them. To try another, add one line in
//!        sgemm_autotune.cu; a configuration its Config's static_asserts reject does not compile.
const std::vector<AutotuneCandidate>& autotune_candidates();

}  // namespace stepwise::sgemm
