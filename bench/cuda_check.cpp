#include "cuda_check.hpp"

namespace stepwise {

void check_cuda(cudaError_t code, const char* expression, const char* file, int line)
{
    if (code != cudaSuccess) {
        throw CudaError(code, std::string(file) + ":" + std::to_string(line) + ": " + expression + " failed: " +
                                  cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")");
    }
}

}  // namespace stepwise
