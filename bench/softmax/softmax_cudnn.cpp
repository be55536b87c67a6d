#include "softmax/softmax_cudnn.hpp"

#include "core/cudnn_library.hpp"

#include <string>

#if STEPWISE_CUDNN_HEADER
#include "core/cudnn_calls.hpp"
#endif

namespace stepwise::softmax {

#if STEPWISE_CUDNN_HEADER

//! The handle and the cuDNN functions every baseline calls (core/cudnn_calls.hpp), and this one's own: its tensor
//! descriptor is destroyed before the handle.
struct CudnnSoftmax::Api : CudnnCalls {
    cudnnTensorDescriptor_t tensor = nullptr;
    decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
    decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
    decltype(&cudnnSetTensor4dDescriptor) set_tensor = nullptr;
    decltype(&cudnnSoftmaxForward) softmax_forward = nullptr;

    ~Api()
    {
        if (tensor != nullptr) {
            destroy_tensor(tensor);
        }
    }
};

CudnnSoftmax::CudnnSoftmax() : api_(std::make_unique<Api>())
{
    const CudnnLibrary& library = cudnn_library();
    version_ = library.version;
    if (reason_ = api_->open(library); !reason_.empty()) {
        return;
    }
    std::string missing;
    Api& a = *api_;
    const bool found = library.find_symbol("cudnnCreateTensorDescriptor", a.create_tensor, missing) &
                       library.find_symbol("cudnnDestroyTensorDescriptor", a.destroy_tensor, missing) &
                       library.find_symbol("cudnnSetTensor4dDescriptor", a.set_tensor, missing) &
                       library.find_symbol("cudnnSoftmaxForward", a.softmax_forward, missing);
    if (!found) {
        reason_ = library.path + " has no " + missing;
        return;
    }
    if (const cudnnStatus_t s = a.create_tensor(&a.tensor); s != CUDNN_STATUS_SUCCESS) {
        a.tensor = nullptr;
        reason_ = version_ + ": cudnnCreateTensorDescriptor failed: " + a.error_string(s);
    }
}

CudnnSoftmax::~CudnnSoftmax() = default;

cudaError_t CudnnSoftmax::run(const void* d_in, void* d_out, int num_rows, int num_cols, bool bf16,
                              cudaStream_t stream)
{
    if (!available()) {
        last_status_ = reason_;
        return cudaErrorNotSupported;
    }
    Api& a = *api_;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s = a.set_stream(a.handle, stream);
    if (s == CUDNN_STATUS_SUCCESS) {
        s = a.set_tensor(a.tensor, CUDNN_TENSOR_NCHW, bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT, num_rows, num_cols,
                         1, 1);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        s = a.softmax_forward(a.handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &one, a.tensor, d_in, &zero,
                              a.tensor, d_out);
    }
    last_status_ = a.error_string(s);
    return s == CUDNN_STATUS_SUCCESS ? cudaSuccess : cudaErrorNotSupported;
}

#else  // built without cuDNN's header

struct CudnnSoftmax::Api {};

CudnnSoftmax::CudnnSoftmax() : reason_("the build found no cudnn.h (cuDNN 9's header) beside the CUDA toolkit") {}
CudnnSoftmax::~CudnnSoftmax() = default;

cudaError_t CudnnSoftmax::run(const void*, void*, int, int, bool, cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

#endif

cudaError_t CudnnSoftmax::operator()(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream)
{
    return run(d_in, d_out, num_rows, num_cols, false, stream);
}

cudaError_t CudnnSoftmax::operator()(const __nv_bfloat16* d_in, __nv_bfloat16* d_out, int num_rows, int num_cols,
                                     cudaStream_t stream)
{
    return run(d_in, d_out, num_rows, num_cols, true, stream);
}

}  // namespace stepwise::softmax
