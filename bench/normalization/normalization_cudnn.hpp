// The normalization chapter's library baseline: cuDNN 9's LayerNorm and RMSNorm forward, through its graph API (the
// header-only cudnn-frontend), with cuDNN opened at run time, so that a machine without it builds and runs everything
// else.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace stepwise::normalization {

//! @brief cuDNN's LayerNorm and RMSNorm forward over each row of a num_rows x num_cols matrix (a tensor of
//!        num_rows x num_cols x 1 x 1), one cudnn-frontend graph per problem, built once and kept.
class CudnnNorm {
public:
    //! @brief Creates a handle on the current device, in the process's cuDNN (stepwise::cudnn_library(), opened on
    //!        first use); where it cannot, or where the build had no cudnn.h or no cudnn-frontend headers,
    //!        `available()` is false and `reason()` says why in one line.
    CudnnNorm();
    ~CudnnNorm();
    CudnnNorm(const CudnnNorm&) = delete;
    CudnnNorm& operator=(const CudnnNorm&) = delete;

    bool available() const { return reason_.empty(); }
    const std::string& reason() const { return reason_; }
    //! @brief "cuDNN 9.19.0 (/path/libcudnn.so.9)"; empty where no cuDNN opened.
    const std::string& version() const { return version_; }

    //! @brief Builds and keeps the graph, its execution plan and its workspace (device memory this object owns) for
    //!        one problem, so that a later call times none of it; nothing where they are already kept.
    //! @return cudaSuccess; cudaErrorNotSupported where cuDNN refuses the problem (last_status() says why); a CUDA
    //!         error where the workspace cannot be allocated or the device queried
    cudaError_t prepare_layer_norm(int num_rows, int num_cols, bool bf16);
    //! @brief As prepare_layer_norm(), for rms_norm().
    cudaError_t prepare_rms_norm(int num_rows, int num_cols, bool bf16);

    //! @brief y = (x - mean) / sqrt(var + epsilon) * gamma + beta along each row (cuDNN's TRAINING phase), with each
    //!        row's mean and 1 / sqrt(var + epsilon) written to `d_mean` and `d_rstd` (num_rows floats each), on
    //!        `stream`. x, y, gamma and beta are bf16 where `bf16`, else fp32; gamma and beta hold num_cols values.
    //!        Prepares the problem first where prepare_layer_norm() has not.
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t layer_norm(const void* d_in, const void* d_gamma, const void* d_beta, void* d_out, float* d_mean,
                           float* d_rstd, int num_rows, int num_cols, float epsilon, bool bf16, cudaStream_t stream);
    //! @brief y = x / sqrt(mean(x^2) + epsilon) * gamma along each row (cuDNN's INFERENCE phase: no statistics
    //!        written), on `stream`; types and preparation as for layer_norm().
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t rms_norm(const void* d_in, const void* d_gamma, void* d_out, int num_rows, int num_cols,
                         float epsilon, bool bf16, cudaStream_t stream);

    //! @brief What the last call came to, in one line: cuDNN's status, or where cuDNN refused, why.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    struct Plan;
    enum class Kind { layer_norm, rms_norm };
    //! The kept plan of a problem, built where there is none; nullptr where it cannot be (`status` says why).
    Plan* plan(Kind kind, int num_rows, int num_cols, bool bf16, cudaError_t& status);
    //! Runs `p` with these pointers (nullptr where the kind has no such tensor) on `stream`.
    cudaError_t execute(Plan& p, const void* d_in, const void* d_gamma, const void* d_beta, void* d_out,
                        float* d_mean, float* d_rstd, float epsilon, cudaStream_t stream);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::normalization
