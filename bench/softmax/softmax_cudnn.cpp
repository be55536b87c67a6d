#include "softmax/softmax_cudnn.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#if STEPWISE_CUDNN_HEADER
#include <cudnn.h>
#endif

namespace stepwise::softmax {

#if STEPWISE_CUDNN_HEADER

//! The cuDNN functions the baseline calls, looked up in the opened library.
struct CudnnSoftmax::Api {
    void* library = nullptr;
    std::string path;
    cudnnHandle_t handle = nullptr;
    cudnnTensorDescriptor_t tensor = nullptr;
    decltype(&cudnnGetVersion) get_version = nullptr;
    decltype(&cudnnGetErrorString) error_string = nullptr;
    decltype(&cudnnCreate) create = nullptr;
    decltype(&cudnnDestroy) destroy = nullptr;
    decltype(&cudnnSetStream) set_stream = nullptr;
    decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
    decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
    decltype(&cudnnSetTensor4dDescriptor) set_tensor = nullptr;
    decltype(&cudnnSoftmaxForward) softmax_forward = nullptr;

    ~Api()
    {
        if (tensor != nullptr) {
            destroy_tensor(tensor);
        }
        if (handle != nullptr) {
            destroy(handle);
        }
        // The library stays loaded: cuDNN's own threads and atexit handlers may still refer to it.
    }
};

namespace {

template <typename F>
bool find_symbol(void* library, const char* name, F& out, std::string& missing)
{
    out = reinterpret_cast<F>(dlsym(library, name));
    if (out == nullptr && missing.empty()) {
        missing = name;
    }
    return out != nullptr;
}

//! Where cuDNN may be, in the order tried.
std::vector<std::string> candidates()
{
    std::vector<std::string> out;
    if (const char* path = std::getenv("STEPWISE_CUDNN_LIBRARY"); path != nullptr && *path != '\0') {
        out.emplace_back(path);
    }
    out.emplace_back("libcudnn.so.9");
#ifdef STEPWISE_CUDNN_LIBRARY_HINT
    out.emplace_back(STEPWISE_CUDNN_LIBRARY_HINT);
#endif
    return out;
}

}  // namespace

CudnnSoftmax::CudnnSoftmax() : api_(std::make_unique<Api>())
{
    std::string tried;
    for (const std::string& path : candidates()) {
        api_->library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (api_->library != nullptr) {
            api_->path = path;
            break;
        }
        tried += (tried.empty() ? "" : ", ") + path;
    }
    if (api_->library == nullptr) {
        reason_ = "cuDNN 9 not found (tried " + tried + "; set STEPWISE_CUDNN_LIBRARY to libcudnn.so.9)";
        return;
    }
    std::string missing;
    Api& a = *api_;
    const bool found = find_symbol(a.library, "cudnnGetVersion", a.get_version, missing) &
                       find_symbol(a.library, "cudnnGetErrorString", a.error_string, missing) &
                       find_symbol(a.library, "cudnnCreate", a.create, missing) &
                       find_symbol(a.library, "cudnnDestroy", a.destroy, missing) &
                       find_symbol(a.library, "cudnnSetStream", a.set_stream, missing) &
                       find_symbol(a.library, "cudnnCreateTensorDescriptor", a.create_tensor, missing) &
                       find_symbol(a.library, "cudnnDestroyTensorDescriptor", a.destroy_tensor, missing) &
                       find_symbol(a.library, "cudnnSetTensor4dDescriptor", a.set_tensor, missing) &
                       find_symbol(a.library, "cudnnSoftmaxForward", a.softmax_forward, missing);
    if (!found) {
        reason_ = a.path + " has no " + missing;
        return;
    }
    const std::size_t v = a.get_version();
    version_ = "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100) + " (" + a.path + ")";
    if (v / 10000 != CUDNN_MAJOR) {
        reason_ = version_ + ": built against cuDNN " + std::to_string(CUDNN_MAJOR);
        return;
    }
    if (const cudnnStatus_t s = a.create(&a.handle); s != CUDNN_STATUS_SUCCESS) {
        a.handle = nullptr;
        reason_ = version_ + ": cudnnCreate failed: " + a.error_string(s);
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
