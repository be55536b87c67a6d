#include "cuda_check.hpp"

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

}  // namespace stepwise
