// The transpose chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <vector>

namespace stepwise::transpose {

//! @brief A step's launcher: `d_out` (num_cols x num_rows) = transpose of `d_in` (num_rows x num_cols).
using TransposeFunction = cudaError_t (*)(const float* d_in, float* d_out, int num_rows, int num_cols,
                                          cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    bool beyond_article;     //!< not one of the source's six steps
    bool one_thread;         //!< all the work in a single thread: timed and tested at small sizes only
    int dim_multiple;        //!< the launcher requires both dimensions to be multiples of this (1: any size)
    TransposeFunction transpose;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief The library baseline: cublasSgeam in transpose mode (C = alpha op(A) + beta B with op = transpose,
//!        alpha = 1, beta = 0), on row-major matrices seen as column-major ones.
class CublasTranspose {
public:
    //! @throws std::runtime_error when cuBLAS cannot be initialized
    CublasTranspose();
    ~CublasTranspose();
    CublasTranspose(const CublasTranspose&) = delete;
    CublasTranspose& operator=(const CublasTranspose&) = delete;

    //! @brief `d_out` = transpose of `d_in`, as a step's launcher; launches on `stream`.
    //! @throws std::runtime_error naming the cuBLAS status when the call fails
    cudaError_t operator()(const float* d_in, float* d_out, int num_rows, int num_cols, cudaStream_t stream) const;

private:
    cublasHandle_t handle_ = nullptr;
};

}  // namespace stepwise::transpose
