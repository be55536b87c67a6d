// The attention backward chapter's library baseline: cuDNN 9's scaled dot-product attention backward (SDPA), through
// its graph API (the header-only cudnn-frontend), with cuDNN opened at run time, as the forward chapter's baseline. Its
// fastest engine configuration per problem: every plan its heuristics offer is built and timed in turn (core/pick.hpp).
#pragma once

#include "attention_backward/attention_backward_reference.hpp"
#include "core/pick.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::attention_backward {

//! @brief The device tensors of one backward call: the forward's inputs and outputs, dO, and the gradients.
struct BackwardTensors {
    const void *q, *k, *v, *o;
    const float* lse;  //!< the forward's log-sum-exp (natural log), cuDNN's "stats"
    const void* d_o;
    void *dq, *dk, *dv;
};

//! @brief cuDNN's SDPA backward: dQ, dK and dV from Q, K, V, the forward's O and log-sum-exp, and dO; bf16 tensors in
//!        [batch, heads, seq, head_dim] (K, V, dK and dV with kv_heads heads), fp32 log-sum-exp [batch, heads, seq];
//!        one cudnn-frontend graph per problem, built once and kept.
class CudnnSdpaBackward {
public:
    //! @brief Creates a handle on the current device in the process's cuDNN; where it cannot, or where the build
    //!        had no cudnn.h or cudnn-frontend headers, `available()` is false and `reason()` says why in one line.
    CudnnSdpaBackward();
    ~CudnnSdpaBackward();
    CudnnSdpaBackward(const CudnnSdpaBackward&) = delete;
    CudnnSdpaBackward& operator=(const CudnnSdpaBackward&) = delete;

    bool available() const { return reason_.empty(); }
    const std::string& reason() const { return reason_; }
    const std::string& version() const { return version_; }

    //! @brief Builds and keeps the graph of one problem and every execution plan that the heuristics offer and that
    //!        builds, then times the plans that run in turn as `rule` says (L2 flushed by writing `d_flush` before
    //!        each sample) and keeps the fastest for run().
    //! @return every plan (its engine's name) with its medians, and the index of the one kept; no candidate where
    //!         cuDNN refuses the problem (last_status() says why)
    //! @throws CudaError when a CUDA call fails
    std::pair<std::vector<PickedCandidate>, std::size_t> pick(const BackwardTensors& t, const Problem& p, float scale,
                                                              const PickRule& rule, void* d_flush,
                                                              std::size_t flush_bytes, cudaStream_t stream);

    //! @brief Runs the problem on `stream` with the plan pick() kept, else the heuristics' first plan.
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t run(const BackwardTensors& t, const Problem& p, float scale, cudaStream_t stream);

    //! @brief What the last call came to, in one line: cuDNN's status, or where cuDNN refused, why.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    struct Plan;
    Plan* plan(const Problem& p, float scale, cudaError_t& status);
    cudaError_t execute(Plan& plan, std::int64_t plan_index, const BackwardTensors& t, cudaStream_t stream);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::attention_backward
