#include "core/cudnn_library.hpp"

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>

#if STEPWISE_CUDNN_HEADER
#include <cudnn.h>
#endif

namespace stepwise {

void* CudnnLibrary::symbol(const char* name) const { return dlsym(handle, name); }

std::vector<std::string> cudnn_library_candidates()
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

CudnnLibrary open_cudnn_library(const std::vector<std::string>& candidates, int major)
{
    CudnnLibrary library;
    std::string tried;
    for (const std::string& path : candidates) {
        library.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (library.handle != nullptr) {
            library.path = path;
            break;
        }
        tried += (tried.empty() ? "" : ", ") + path;
    }
    if (library.handle == nullptr) {
        library.reason = "cuDNN " + std::to_string(major) + " not found (tried " + tried +
                         "; set STEPWISE_CUDNN_LIBRARY to libcudnn.so.9)";
        return library;
    }
    std::size_t (*get_version)() = nullptr;
    if (std::string missing; !library.find_symbol("cudnnGetVersion", get_version, missing)) {
        library.reason = library.path + " has no " + missing;
        return library;
    }
    const std::size_t v = get_version();
    library.version = "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                      std::to_string(v % 100) + " (" + library.path + ")";
    if (v / 10000 != static_cast<std::size_t>(major)) {
        library.reason = library.version + ": built against cuDNN " + std::to_string(major);
    }
    return library;
}

const CudnnLibrary& cudnn_library()
{
#if STEPWISE_CUDNN_HEADER
    static const CudnnLibrary library = open_cudnn_library(cudnn_library_candidates(), CUDNN_MAJOR);
#else
    static const CudnnLibrary library{nullptr, "", "",
                                      "the build found no cudnn.h (cuDNN 9's header) beside the CUDA toolkit"};
#endif
    return library;
}

}  // namespace stepwise
