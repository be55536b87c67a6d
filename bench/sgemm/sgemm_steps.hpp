// The SGEMM chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace stepwise::sgemm {

//! @brief A step's launcher: row-major `C = alpha * A * B + beta * C`, A M x K, B K x N, C M x N; C is not read
//!        when `beta == 0`.
using SgemmFunction = cudaError_t (*)(int M, int N, int K, float alpha, const float* d_A, const float* d_B,
                                      float beta, float* d_C, cudaStream_t stream);

//! @brief How a step divides the work (0 where it does not apply). Shown on the page beside the SC'10 bounds.
struct Tiling {
    int block_m = 0, block_n = 0, block_k = 0;  //!< a block's tile of C, and of K per shared-memory stage
    int warp_m = 0, warp_n = 0;                 //!< a warp's tile of C (warp-tiled steps)
    int thread_m = 0, thread_n = 0;             //!< a thread's results (its register block)
    int threads = 0;                            //!< threads per block
    int stages = 0;                             //!< shared-memory buffers of A and B tiles (0: none)
};

//! @brief One step of the chapter.
struct Step : StepSource {
    bool beyond_article;     //!< not one of the source's three (naive, shared-memory blocking, register blocking)
    bool same_operation;     //!< false: not fp32 FMA arithmetic (the TF32 tensor-core step)
    int m_multiple, n_multiple, k_multiple;  //!< the launcher requires M, N, K to be multiples of these (1: any)
    bool needs_16_byte_alignment;            //!< A, B and C must be 16-byte aligned (cudaMalloc's are)
    int max_timed_n;                         //!< the largest M = N = K the timing program runs it at
    SgemmFunction sgemm;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
    Tiling tiling;
    const char* needs = "";           //!< what the GPU and the build must offer beyond sm_75 ("sm_80", "sm_90a"), or empty
    bool (*needs_met)() = nullptr;    //!< whether the code the driver loaded for the current GPU has it
    //! The ids the step had before the chapter's steps were split or renumbered (StepEntry::formerly); empty for most.
    std::vector<std::string> formerly = {};

    //! @brief Whether the launcher accepts this shape (given aligned buffers).
    bool accepts(int M, int N, int K) const
    {
        return M > 0 && N > 0 && K > 0 && M % m_multiple == 0 && N % n_multiple == 0 && K % k_multiple == 0;
    }
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief Why the current GPU cannot run `step` ("needs sm_80: ...", "needs sm_90a: ..."), or empty when it can.
//! @throws CudaError when the device cannot be queried
std::string unsupported_reason(const Step& step);

//! @brief The library baseline: cuBLAS on the same row-major problem (computed as the column-major
//!        `C^T = B^T A^T`), with its math mode set explicitly.
class CublasSgemm {
public:
    //! @param tf32 false: fp32 arithmetic (CUBLAS_COMPUTE_32F, CUBLAS_DEFAULT_MATH); true: TF32 tensor cores
    //!        (CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_TF32_TENSOR_OP_MATH)
    //! @throws std::runtime_error when cuBLAS cannot be initialized
    explicit CublasSgemm(bool tf32);
    ~CublasSgemm();
    CublasSgemm(const CublasSgemm&) = delete;
    CublasSgemm& operator=(const CublasSgemm&) = delete;

    //! @brief As a step's launcher; launches on `stream`.
    //! @throws std::runtime_error naming the cuBLAS status when the call fails
    cudaError_t operator()(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta,
                           float* d_C, cudaStream_t stream) const;

private:
    cublasHandle_t handle_ = nullptr;
    bool tf32_ = false;
};

}  // namespace stepwise::sgemm
