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

std::string first_line(const char* step, const std::string& message)
{
    return std::string(step) + ": " + message.substr(0, message.find('\n'));
}

}  // namespace stepwise
#endif
