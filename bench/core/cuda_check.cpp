#include "core/cuda_check.hpp"

namespace stepwise {

void check_cuda(cudaError_t code, const char* expression, const char* file, int line)
{
    if (code != cudaSuccess) {
        throw CudaError(code, std::string(file) + ":" + std::to_string(line) + ": " + expression + " failed: " +
                                  cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")");
    }
}

void check_cublas(cublasStatus_t status, const char* what)
{
    if (status != CUBLAS_STATUS_SUCCESS) {
        throw std::runtime_error(std::string(what) + " failed: " + cublasGetStatusName(status) + " (" +
                                 cublasGetStatusString(status) + ")");
    }
}

std::string cuda_unavailable_reason()
{
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error == cudaErrorInsufficientDriver) {
        return "no NVIDIA driver, or one older than CUDA runtime " + std::to_string(CUDART_VERSION / 1000) + "." +
               std::to_string(CUDART_VERSION % 1000 / 10) + " (cudaErrorInsufficientDriver)";
    }
    if (error != cudaSuccess) {
        return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
    }
    return count == 0 ? "no CUDA device" : "";
}

std::string unsupported_reason(const std::string& needs, bool needs_met)
{
    if (needs.empty() || needs_met) {
        return "";
    }
    int device = 0;
    int major = 0;
    int minor = 0;
    STEPWISE_CUDA_CHECK(cudaGetDevice(&device));
    STEPWISE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    STEPWISE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return unsupported_text(needs, major, minor);
}

std::string unsupported_text(const std::string& needs, int major, int minor)
{
    const bool specific = !needs.empty() && needs.back() == 'a';  // "sm_90a": that compute capability exactly
    const std::string digits = needs.substr(needs.find('_') + 1, needs.size() - needs.find('_') - 1 - specific);
    const std::string capability = digits.substr(0, digits.size() - 1) + "." + digits.substr(digits.size() - 1);
    return "needs " + needs + (specific ? ": a GPU of compute capability " + capability
                                        : ": compute capability " + capability + " or higher") +
           " and this code built for it (this GPU: " + std::to_string(major) + "." + std::to_string(minor) + ")";
}

}  // namespace stepwise
