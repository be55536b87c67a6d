// The softmax chapter's library baseline: cuDNN's cudnnSoftmaxForward (CUDNN_SOFTMAX_ACCURATE), with cuDNN opened at
// run time, so that a machine without it builds and runs everything else.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace stepwise::softmax {

//! @brief cuDNN's softmax over each row (a tensor of num_rows x num_cols x 1 x 1, CUDNN_SOFTMAX_MODE_INSTANCE).
class CudnnSoftmax {
public:
    //! @brief Creates a handle on the current device, in the process's cuDNN (stepwise::cudnn_library(), opened on
    //!        first use: from STEPWISE_CUDNN_LIBRARY (a path), then libcudnn.so.9 on the loader's path, then the
    //!        library the build found beside the CUDA toolkit); where it cannot, `available()` is false and `reason()`
    //!        says why in one line.
    CudnnSoftmax();
    ~CudnnSoftmax();
    CudnnSoftmax(const CudnnSoftmax&) = delete;
    CudnnSoftmax& operator=(const CudnnSoftmax&) = delete;

    bool available() const { return reason_.empty(); }
    const std::string& reason() const { return reason_; }
    //! @brief "cuDNN 9.19.0 (/path/libcudnn.so.9)"; empty where no cuDNN opened.
    const std::string& version() const { return version_; }

    //! @brief y = softmax(x) along each row, on `stream`.
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t operator()(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream);
    cudaError_t operator()(const __nv_bfloat16* d_in, __nv_bfloat16* d_out, int num_rows, int num_cols,
                           cudaStream_t stream);
    //! @brief cuDNN's message for the last call's status.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    cudaError_t run(const void* d_in, void* d_out, int num_rows, int num_cols, bool bf16, cudaStream_t stream);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::softmax
