// The attention chapter's library baseline: cuDNN 9's scaled dot-product attention forward (SDPA), through its graph
// API (the header-only cudnn-frontend), with cuDNN opened at run time, as the normalization chapter's baseline. Its
// fastest engine configuration per problem: every plan its heuristics offer is built and timed in turn (core/pick.hpp),
// as cuBLASLt's algorithms are, so that a rerun does not hand back another engine than the one recorded.
#pragma once

#include "attention/attention_reference.hpp"
#include "core/pick.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::attention {

//! @brief cuDNN's SDPA forward: O = softmax(scale Q K^T (+ causal mask)) V and each row's log-sum-exp, bf16 Q, K, V,
//!        O in [batch, heads, seq, head_dim] (K and V with kv_heads heads), fp32 log-sum-exp [batch, heads, seq];
//!        one cudnn-frontend graph per problem, built once and kept.
class CudnnSdpa {
public:
    //! @brief Creates a handle on the current device in the process's cuDNN; where it cannot, or where the build
    //!        had no cudnn.h or cudnn-frontend headers, `available()` is false and `reason()` says why in one line.
    CudnnSdpa();
    ~CudnnSdpa();
    CudnnSdpa(const CudnnSdpa&) = delete;
    CudnnSdpa& operator=(const CudnnSdpa&) = delete;

    bool available() const { return reason_.empty(); }
    const std::string& reason() const { return reason_; }
    const std::string& version() const { return version_; }

    //! @brief Builds and keeps the graph of one problem, every execution plan that the heuristics (A, then the
    //!        fallback list) offer and that builds, and a workspace for the largest, so that no timed call does; then
    //!        times the plans that run in turn on these buffers as `rule` says (L2 flushed by writing `d_flush` before
    //!        each sample) and keeps the fastest for run().
    //! @return every plan (its engine's name) with its medians, in the heuristics' order, and the index of the one
    //!         kept; no candidate where cuDNN refuses the problem (last_status() says why)
    //! @throws CudaError when a CUDA call fails
    std::pair<std::vector<PickedCandidate>, std::size_t> pick(const void* d_q, const void* d_k, const void* d_v,
                                                              void* d_o, float* d_lse, const Problem& p, float scale,
                                                              const PickRule& rule, void* d_flush,
                                                              std::size_t flush_bytes, cudaStream_t stream);

    //! @brief Runs the problem on `stream` with the plan pick() kept, else the heuristics' first plan (building the
    //!        problem's graph first where pick() has not).
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t run(const void* d_q, const void* d_k, const void* d_v, void* d_o, float* d_lse, const Problem& p,
                    float scale, cudaStream_t stream);

    //! @brief What the last call came to, in one line: cuDNN's status, or where cuDNN refused, why.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    struct Plan;
    Plan* plan(const Problem& p, float scale, cudaError_t& status);
    cudaError_t execute(Plan& plan, std::int64_t plan_index, const void* d_q, const void* d_k, const void* d_v,
                        void* d_o, float* d_lse, cudaStream_t stream);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::attention
