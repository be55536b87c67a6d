// The normalization backward chapter's library baseline: cuDNN 9's LayerNorm and RMSNorm backward, through its graph
// API (the header-only cudnn-frontend), with cuDNN opened at run time, so that a machine without it builds and runs
// everything else.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace stepwise::normalization_backward {

//! @brief cuDNN's LayerNorm and RMSNorm backward over each row of a num_rows x num_cols matrix (a tensor of
//!        num_rows x num_cols x 1 x 1), from the forward's saved statistics; one cudnn-frontend graph per problem,
//!        built once and kept. x, dy and dx are bf16 or fp32; gamma, its gradient, beta's, and the statistics fp32.
class CudnnNormBackward {
public:
    //! @brief Creates a handle on the current device, in the process's cuDNN (stepwise::cudnn_library(), opened on
    //!        first use); where it cannot, or where the build had no cudnn.h or no cudnn-frontend headers,
    //!        `available()` is false and `reason()` says why in one line.
    CudnnNormBackward();
    ~CudnnNormBackward();
    CudnnNormBackward(const CudnnNormBackward&) = delete;
    CudnnNormBackward& operator=(const CudnnNormBackward&) = delete;

    bool available() const { return reason_.empty(); }
    const std::string& reason() const { return reason_; }
    //! @brief "cuDNN 9.19.0 (/path/libcudnn.so.9)"; empty where no cuDNN opened.
    const std::string& version() const { return version_; }

    //! @brief Builds and keeps the graph, its execution plan and its workspace for one problem, so that a later call
    //!        times none of it; `layer_norm` false: RMSNorm.
    //! @return cudaSuccess; cudaErrorNotSupported where cuDNN refuses the problem (last_status() says why); a CUDA
    //!         error where the workspace cannot be allocated or the device queried
    cudaError_t prepare(bool layer_norm, int num_rows, int num_cols, bool bf16);

    //! @brief dx, dgamma and dbeta of LayerNorm from x, dy, gamma and each row's saved mean and 1 / sqrt(var +
    //!        epsilon) (num_rows floats each), on `stream`. Prepares the problem first where prepare() has not.
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t layer_norm_backward(const void* d_x, const void* d_dy, const float* d_gamma, const float* d_mean,
                                    const float* d_rstd, void* d_dx, float* d_dgamma, float* d_dbeta, int num_rows,
                                    int num_cols, bool bf16, cudaStream_t stream);
    //! @brief dx and dgamma of RMSNorm from x, dy, gamma and each row's saved 1 / sqrt(mean(x^2) + epsilon).
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t rms_norm_backward(const void* d_x, const void* d_dy, const float* d_gamma, const float* d_rstd,
                                  void* d_dx, float* d_dgamma, int num_rows, int num_cols, bool bf16,
                                  cudaStream_t stream);

    //! @brief What the last call came to, in one line: cuDNN's status, or where cuDNN refused, why.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    struct Plan;
    //! The kept plan of a problem, built where there is none; nullptr where it cannot be (`status` says why).
    Plan* plan(bool layer_norm, int num_rows, int num_cols, bool bf16, cudaError_t& status);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::normalization_backward
