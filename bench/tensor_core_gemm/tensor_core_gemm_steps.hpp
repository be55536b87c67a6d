// The tensor-core GEMM chapter's step registry, its library baseline and its compute ceiling. Compiled for sm_90a
// beside the project's architectures (bench/CMakeLists.txt): wgmma exists only there.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepwise::tensor_core_gemm {

using bf16 = __nv_bfloat16;

//! @brief A step's launcher: C = A B, A M x K row-major, B K x N column-major (N rows of K), C M x N row-major.
using GemmFunction = cudaError_t (*)(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                                     cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    const char* needs;       //!< what the GPU and the build must offer: "sm_80", "sm_90" or "sm_90a"
    bool (*needs_met)();     //!< whether the code the driver loaded for the current GPU has it
    int m_multiple, n_multiple, k_multiple;  //!< the launcher requires M, N, K to be multiples of these (1: any)
    GemmFunction gemm;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
    //! The ids the step had before the chapter's steps were split or renumbered (StepEntry::formerly); empty for most.
    std::vector<std::string> formerly = {};

    //! @brief Whether the launcher accepts this shape (given 16-byte aligned buffers).
    bool accepts(int M, int N, int K) const
    {
        return M > 0 && N > 0 && K > 0 && M % m_multiple == 0 && N % n_multiple == 0 && K % k_multiple == 0;
    }
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief Why the current GPU cannot run `step` ("needs sm_90a: ..."), or empty when it can.
//! @throws CudaError when the device cannot be queried
std::string unsupported_reason(const Step& step);

//! @brief Why the current GPU cannot run the tensor-core peak (tensor_peak(): the final step's instructions), also
//!        listed in `unsupported` as the row "tensor_peak"; empty where it can.
//! @throws CudaError when the device cannot be queried
std::string tensor_peak_unsupported(nlohmann::json& unsupported);

//! @brief The library baseline: cuBLAS on the same operation, `cublasGemmEx` with bf16 A, B and C, compute type
//!        32F (fp32 accumulation), default algorithm. Row-major C is column-major C^T = B^T A^T: B is passed
//!        transposed (its columns are K-contiguous), A as it is.
class CublasGemmBf16 {
public:
    //! @throws std::runtime_error when cuBLAS cannot be initialized
    CublasGemmBf16();
    ~CublasGemmBf16();
    CublasGemmBf16(const CublasGemmBf16&) = delete;
    CublasGemmBf16& operator=(const CublasGemmBf16&) = delete;

    //! @brief As a step's launcher; launches on `stream`.
    //! @throws std::runtime_error naming the cuBLAS status when the call fails
    cudaError_t operator()(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                           cudaStream_t stream) const;

private:
    cublasHandle_t handle_ = nullptr;
};

//! @brief The tensor cores' measured ceiling: `num_fmas` bf16 multiply-adds (rounded up to whole instructions) by
//!        `wgmma` m64n256k16 from random bf16 values in shared memory into fp32 registers, two warpgroups on every
//!        SM, no global memory but one float per thread into `d_sink`.
//! @param d_sink `tensor_peak_threads()` floats
//! @return `cudaErrorNotSupported` without sm_90a code for this GPU, `cudaErrorInvalidValue` for a null sink or no
//!         FMAs, else the launch's error
cudaError_t tensor_peak(double num_fmas, float* d_sink, cudaStream_t stream);

//! @brief The threads tensor_peak launches on the current device (its sink's size).
//! @throws CudaError when the device cannot be queried
std::size_t tensor_peak_threads();

}  // namespace stepwise::tensor_core_gemm
