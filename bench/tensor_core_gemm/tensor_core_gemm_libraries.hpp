// The tensor-core GEMM chapter's tuned library baselines: cuBLASLt's fastest algorithm of its heuristic's list and
// CUTLASS's fastest configuration (tensor_core_gemm_cutlass.hpp), each picked per shape by timing the candidates in
// turn, then timed as every row is.
#pragma once

#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace stepwise::tensor_core_gemm {

//! @brief How the candidates of one shape are timed before one is picked: every candidate over `samples` rounds,
//!        then the `finalists` fastest of them over `final_samples` more, and the fastest of those kept (ten cold
//!        launches alone do not always tell apart candidates within a few percent).
struct PickRule {
    int warmup_launches = 2;    //!< each candidate's, untimed
    int samples = 10;           //!< rounds; in each, every candidate once, L2 flushed before it, events around it
    std::size_t finalists = 3;  //!< timed again
    int final_samples = 30;     //!< their rounds
};

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

//! @brief cuBLASLt on the chapter's operation with a workspace, its fastest algorithm per shape: up to
//!        `max_candidates` from `cublasLtMatmulAlgoGetHeuristic`, timed in turn (PickRule), the fastest kept.
class CublasLtGemmBf16Best {
public:
    static constexpr int max_candidates = 16;
    static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;  //!< what cuBLAS advises on Hopper

    //! @throws std::runtime_error when cuBLASLt cannot be initialized; CudaError when the workspace cannot be had
    CublasLtGemmBf16Best();
    ~CublasLtGemmBf16Best();
    CublasLtGemmBf16Best(const CublasLtGemmBf16Best&) = delete;
    CublasLtGemmBf16Best& operator=(const CublasLtGemmBf16Best&) = delete;

    //! @brief Asks the heuristic for this shape's candidates, times them in turn on these buffers and keeps the
    //!        fastest for operator().
    //! @return every candidate with its median, in the heuristic's order; the index of the one kept
    //! @throws std::runtime_error naming the cuBLASLt status; CudaError when a launch fails
    std::pair<std::vector<PickedCandidate>, std::size_t> pick(int M, int N, int K, const bf16* d_A, const bf16* d_B,
                                                              bf16* d_C, const PickRule& rule, void* d_flush,
                                                              std::size_t flush_bytes, cudaStream_t stream);

    //! @brief C = A B with the algorithm pick() kept for this shape.
    //! @return cudaErrorInvalidValue when none was picked for it, else the launch's error
    //! @throws std::runtime_error naming the cuBLASLt status when the call fails
    cudaError_t operator()(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                           cudaStream_t stream) const;

private:
    struct Plan;  //!< the descriptors of one shape, and its algorithms
    cudaError_t run(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const bf16* d_A, const bf16* d_B, bf16* d_C,
                    cudaStream_t stream) const;

    cublasLtHandle_t handle_ = nullptr;
    void* d_workspace_ = nullptr;
    std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> plans_;
};

}  // namespace stepwise::tensor_core_gemm
