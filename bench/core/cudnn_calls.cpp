#if STEPWISE_CUDNN_HEADER
#include "core/cudnn_calls.hpp"

namespace stepwise {

CudnnCalls::~CudnnCalls()
{
    if (handle != nullptr) {
        destroy(handle);
    }
}

std::string CudnnCalls::open(const CudnnLibrary& library)
{
    if (!library.available()) {
        return library.reason;
    }
    std::string missing;
    const bool found = library.find_symbol("cudnnGetErrorString", error_string, missing) &
                       library.find_symbol("cudnnCreate", create, missing) &
                       library.find_symbol("cudnnDestroy", destroy, missing) &
                       library.find_symbol("cudnnSetStream", set_stream, missing);
    if (!found) {
        return library.path + " has no " + missing;
    }
    if (const cudnnStatus_t s = create(&handle); s != CUDNN_STATUS_SUCCESS) {
        handle = nullptr;
        return library.version + ": cudnnCreate failed: " + error_string(s);
    }
    return "";
}

cudaError_t graph_sm_version(int& sm_version, std::string& why)
{
    int device = 0, major = 0, minor = 0;
    if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
        why = std::string("cudaGetDevice: ") + cudaGetErrorString(e);
        return e;
    }
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    sm_version = major * 10 + minor;
    return cudaSuccess;
}

std::string first_line(const char* step, const std::string& message)
{
    return std::string(step) + ": " + message.substr(0, message.find('\n'));
}

}  // namespace stepwise

#if STEPWISE_CUDNN_FRONTEND
// cudnn-frontend's dynamic loading looks every cuDNN function up in this handle (cudnn_frontend_shim.h declares it):
// open_for_graphs() (core/cudnn_graph.hpp) sets it to the process's cuDNN before a baseline's first call into the
// frontend.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif
#endif
