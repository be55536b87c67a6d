// What every cuDNN baseline (the softmax, normalization and attention chapters') needs of the process's cuDNN: a
// handle on the current device and the calls around it, looked up in the library core/cudnn_library.hpp opened.
// Include it only where the build found cudnn.h (STEPWISE_CUDNN_HEADER).
#pragma once

#include "core/cudnn_library.hpp"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace stepwise {

//! @brief cuDNN's handle and the calls every baseline makes itself; a baseline's own calls go in a struct that
//!        derives from it (destroyed first: the handle outlives what was made with it).
struct CudnnCalls {
    cudnnHandle_t handle = nullptr;
    decltype(&cudnnGetErrorString) error_string = nullptr;
    decltype(&cudnnCreate) create = nullptr;
    decltype(&cudnnDestroy) destroy = nullptr;
    decltype(&cudnnSetStream) set_stream = nullptr;

    CudnnCalls() = default;
    CudnnCalls(const CudnnCalls&) = delete;
    CudnnCalls& operator=(const CudnnCalls&) = delete;
    ~CudnnCalls();

    //! @brief Looks the calls up in `library` and creates the handle on the current device.
    //! @return empty where it could, else why not in one line: the library's reason, "<path> has no <symbol>", or
    //!         "<version>: cudnnCreate failed: <status>"
    std::string open(const CudnnLibrary& library);
};

//! @brief The current device's compute capability as cudnn-frontend's graphs take it, major * 10 + minor. A graph
//!        given none asks a libcudart the frontend opens itself (this program links the runtime statically; a machine
//!        may have no shared one).
//! @return cudaSuccess, or cudaGetDevice's error, with `why` saying so in one line
cudaError_t graph_sm_version(int& sm_version, std::string& why);

//! @brief "<step>: <the message's first line>". cudnn-frontend's refusals go on with the engines it tried and each
//!        one's reasons, many lines of them (CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=stderr prints them).
std::string first_line(const char* step, const std::string& message);

}  // namespace stepwise
