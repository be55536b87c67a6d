// The attention chapter's library baseline: cuDNN 9's scaled dot-product attention forward (SDPA), through its graph
// API (the header-only cudnn-frontend), with cuDNN opened at run time, as the normalization chapter's baseline.
#pragma once

#include "attention/attention_reference.hpp"

#include <cuda_runtime.h>

#include <memory>
#include <string>

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

    //! @brief Builds and keeps the graph, its plan and its workspace for one problem, so that no timed call does.
    //! @return cudaSuccess; cudaErrorNotSupported where cuDNN refuses the problem (last_status() says why); a CUDA
    //!         error where the workspace cannot be allocated or the device queried
    cudaError_t prepare(const Problem& p, float scale);
    //! @brief Runs the problem on `stream` (preparing it first where prepare() has not).
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t run(const void* d_q, const void* d_k, const void* d_v, void* d_o, float* d_lse, const Problem& p,
                    float scale, cudaStream_t stream);

    //! @brief What the last call came to, in one line: cuDNN's status, or where cuDNN refused, why.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    struct Plan;
    Plan* plan(const Problem& p, float scale, cudaError_t& status);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::attention
