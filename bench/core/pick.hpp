// A library's fastest configuration at one problem: its candidates (cuBLASLt's algorithms, CUTLASS's configurations,
// cuDNN's engine configurations) timed in turn with the L2 flushed, the fastest few timed again, the fastest of those
// kept; and how a library's row records what was picked. Every tuned baseline picks this way, so that a rerun keeps
// the same plan where one is clearly fastest.
#pragma once

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace stepwise {

//! @brief How the candidates of one problem are timed before one is picked: every candidate over `samples` rounds,
//!        then the `finalists` fastest of them over `final_samples` more, and the fastest of those kept (ten cold
//!        launches alone do not always tell apart candidates within a few percent).
struct PickRule {
    int warmup_launches = 2;    //!< each candidate's, untimed
    int samples = 10;           //!< rounds; in each, every candidate once, L2 flushed before it, events around it
    std::size_t finalists = 3;  //!< timed again
    int final_samples = 30;     //!< their rounds
};

//! @brief The rule every tuned library baseline of the timing program picks with.
inline constexpr PickRule library_pick_rule{2, 10, 3, 30};

//! @brief One candidate of a pick: what it is, its median over the first rounds and, for a finalist, over the final
//!        ones (else negative).
struct PickedCandidate {
    std::string config;
    double median_ms = 0;
    double final_median_ms = -1;
};

//! @brief What a pick measured: each candidate's medians (PickedCandidate's), and the index of the one kept.
struct PickTimes {
    std::vector<double> median_ms, final_median_ms;
    std::size_t kept = 0;
};

//! @brief The median time of each launch, sampled in turn (`rule.samples` rounds of one cold launch of each, L2
//!        flushed by writing `d_flush` before every sample), so that every candidate sees the same clock history.
//! @throws CudaError when a launch or a CUDA call fails; std::invalid_argument for no rounds
std::vector<double> median_ms_in_turn(const std::vector<std::function<cudaError_t()>>& launches, const PickRule& rule,
                                      void* d_flush, std::size_t flush_bytes, cudaStream_t stream);

//! @brief The index of the smallest time (the first of equal ones).
//! @throws std::invalid_argument for no times
std::size_t index_of_fastest(const std::vector<double>& median_ms);

//! @brief The indices of the `count` smallest times (all where fewer), fastest first, the earlier of equal ones first.
std::vector<std::size_t> fastest_indices(const std::vector<double>& median_ms, std::size_t count);

//! @brief Times `launches` as `rule` says (median_ms_in_turn over all, then again over the finalists) and keeps the
//!        finalist of the smallest final median.
//! @throws std::invalid_argument for no launches; CudaError when a launch or a CUDA call fails
PickTimes pick_fastest(const std::vector<std::function<cudaError_t()>>& launches, const PickRule& rule, void* d_flush,
                       std::size_t flush_bytes, cudaStream_t stream);

//! @brief The candidates of a pick, each named by `names[i]`, with the medians `times` measured for them.
//! @throws std::invalid_argument where the names and the times differ in number
std::vector<PickedCandidate> picked_candidates(const std::vector<std::string>& names, const PickTimes& times);

//! @brief `rule` in words, as a library's row states it ("each candidate 2 warm-up launches, then 10 rounds ...").
std::string describe(const PickRule& rule);

//! @brief Records a pick on a library's row: `config` (the kept candidate's name), `pick_candidates` (each
//!        candidate's name and medians) and `pick_rule` (describe(rule)).
//! @throws std::out_of_range where `kept` is not a candidate's index
void add_pick(nlohmann::json& row, const std::vector<PickedCandidate>& candidates, std::size_t kept,
              const PickRule& rule);

}  // namespace stepwise
