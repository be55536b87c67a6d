// The SGEMM chapter's autotuning sweep: configurations of step 11's kernel template, timed in the same run at the
// shapes where its launcher picks differently (small, large, not multiples of the tile, rectangular).
#pragma once

#include "core/resources.hpp"
#include "sgemm/sgemm_steps.hpp"

#include <optional>
#include <string>
#include <vector>

namespace stepwise::sgemm {

//! @brief One configuration of `autotuned::Config`, instantiated and ready to launch with any number of K splits.
struct AutotuneCandidate {
    std::string id;       //!< "bm128_bn128_bk32_wm64_wn32_tm8_tn8_s2_mb2_b3"
    Tiling tiling;        //!< its block, warp and thread tiles, threads and stages
    int min_blocks = 0;   //!< the kernel's __launch_bounds__ minimum blocks per SM
    int bursts = 0;       //!< the bursts a tile's copies go out in
    int launcher_config = -1;  //!< its index in `autotuned::Configs` where step 11's launcher uses it, else -1
    //! `autotuned::sgemm_with<Cfg>`: what step 11's launcher runs for a plan of this configuration
    cudaError_t (*sgemm)(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                         int splits, cudaStream_t stream);
    //! The instance of the kernel an M x N x K problem with these pointers runs: an index into `kernels`
    int (*path)(int M, int N, int K, int splits, const float* d_B, const float* d_C);
    std::vector<KernelEntry> kernels;  //!< the kernel's instances, in the order of `autotuned::Path`
};

//! @brief Every configuration the sweep times, the launcher's among them. To try another, add one line in
//!        sgemm_autotune.cu; a configuration its Config's static_asserts reject does not compile.
const std::vector<AutotuneCandidate>& autotune_candidates();

//! @brief The K splits the sweep times a candidate with at M x N x K on a GPU of `sm_count` SMs: 1, the fewest that
//!        fill the GPU by the launcher's rule (`autotuned::fill_percent`, at least 128 of K each, at most 16), and the
//!        launcher's own where it picks this configuration; ascending, without repeats.
std::vector<int> autotune_splits(const AutotuneCandidate& candidate, int M, int N, int K, int sm_count);

//! @brief Whether step 11's launcher runs `candidate` with `splits`, and nothing else, at M x N x K on a GPU of
//!        `sm_count` SMs.
bool launcher_runs(const AutotuneCandidate& candidate, int splits, int M, int N, int K, int sm_count);

//! @brief Where the launcher runs the rows of whole waves in one configuration and plans the rest anew
//!        (`autotuned::Plan::rows`): that configuration and those rows. No candidate alone is that run, so the sweep
//!        times the launcher itself in a row of its own.
struct WholeWaves {
    const AutotuneCandidate* candidate;  //!< the configuration of the whole waves
    int rows;                            //!< the rows of C they cover, from the top
};

//! @brief The whole waves the launcher splits M x N x K into on `sm_count` SMs; none where it runs one plan.
std::optional<WholeWaves> launcher_whole_waves(int M, int N, int K, int sm_count);

//! @brief Step 11's launcher, `autotuned::sgemm`.
cudaError_t launcher_sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                           cudaStream_t stream);

}  // namespace stepwise::sgemm
