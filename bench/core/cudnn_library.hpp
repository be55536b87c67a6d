// cuDNN 9, opened at run time (dlopen), once per process, for the chapters' cuDNN baselines (softmax, attention,
// normalization): nothing links it, so that a build or a machine without it runs everything else, those baselines
// left out with the reason.
#pragma once

#include <string>
#include <vector>

namespace stepwise {

//! @brief An opened cuDNN library, or why there is none.
struct CudnnLibrary {
    //! dlopen's handle (never closed: cuDNN's own threads and atexit handlers may still refer to it), or nullptr
    //! where no candidate opened.
    void* handle = nullptr;
    //! The candidate that opened.
    std::string path;
    //! "cuDNN 9.19.0 (/path/libcudnn.so.9)"; empty where the library gave no version.
    std::string version;
    //! Empty where the library can be used, else why not, in one line.
    std::string reason;

    bool available() const { return reason.empty(); }

    //! @brief dlsym in the library: the address of `name`, or nullptr.
    //! @pre `handle` is not nullptr
    void* symbol(const char* name) const;

    //! @brief Looks `name` up into `out`; where it is missing and `missing` is still empty, names it there, so that
    //!        a chain of look-ups joined with `&` reports the first one missing.
    //! @return whether it was found
    template <typename Function>
    bool find_symbol(const char* name, Function& out, std::string& missing) const
    {
        out = reinterpret_cast<Function>(symbol(name));
        if (out == nullptr && missing.empty()) {
            missing = name;
        }
        return out != nullptr;
    }
};

//! @brief Where cuDNN may be, in the order tried: STEPWISE_CUDNN_LIBRARY (a path, where set and not empty), then
//!        libcudnn.so.9 on the loader's path, then the library the build found beside the CUDA toolkit (where it
//!        found one).
std::vector<std::string> cudnn_library_candidates();

//! @brief Opens the first of `candidates` that dlopen accepts (the others are not tried) and checks that it is
//!        cuDNN `major`.
//! @return the library; its `reason`, where it cannot be used: "cuDNN 9 not found (tried a, b; set
//!         STEPWISE_CUDNN_LIBRARY to libcudnn.so.9)" where none opens, "<path> has no cudnnGetVersion" where the one
//!         that opens is not cuDNN, "<version>: built against cuDNN <major>" where it is another major version
CudnnLibrary open_cudnn_library(const std::vector<std::string>& candidates, int major);

//! @brief The process's cuDNN: open_cudnn_library(cudnn_library_candidates(), CUDNN_MAJOR), on the first call
//!        only (STEPWISE_CUDNN_LIBRARY is read then); in a build without cudnn.h, none, with that reason.
const CudnnLibrary& cudnn_library();

}  // namespace stepwise
