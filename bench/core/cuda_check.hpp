// Error handling for the harness (tests and timing program). Never compiled out.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace stepwise {

//! @brief A failed CUDA call, with the call's text and where it was made.
class CudaError : public std::runtime_error {
public:
    CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
    cudaError_t code() const noexcept { return code_; }

private:
    cudaError_t code_;
};

//! @brief Throws CudaError unless `code` is cudaSuccess.
void check_cuda(cudaError_t code, const char* expression, const char* file, int line);

//! @brief Throws std::runtime_error naming `what` unless `status` is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* what);

//! @brief Empty when a CUDA device can be used, else one line saying why not.
std::string cuda_unavailable_reason();

//! @brief Why the current GPU cannot run a step that needs `needs` ("sm_80", "sm_90", "sm_90a": a snippet's
//!        `requirement`), "needs sm_80: compute capability 8.0 or higher and this code built for it (this GPU: 7.5)";
//!        empty when it needs nothing or `needs_met` (the snippet's `requirement_met()`).
//! @throws CudaError when the device cannot be queried
std::string unsupported_reason(const std::string& needs, bool needs_met);

//! @brief What unsupported_reason says on a GPU of compute capability `major`.`minor`.
//! @pre `needs` is "sm_" and at least two digits, then perhaps "a"
std::string unsupported_text(const std::string& needs, int major, int minor);

}  // namespace stepwise

//! Checks a CUDA return code; throws stepwise::CudaError naming the call on failure.
#define STEPWISE_CUDA_CHECK(expression) ::stepwise::check_cuda((expression), #expression, __FILE__, __LINE__)
