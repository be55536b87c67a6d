// The tensor-core GEMM chapter's tuned library baselines: cuBLASLt's fastest algorithm of its heuristic's list and
// CUTLASS's fastest configuration (tensor_core_gemm_cutlass.hpp), each picked per shape by timing the candidates in
// turn, then timed as every row is.
#pragma once

#include "core/pick.hpp"
#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace stepwise::tensor_core_gemm {

//! @brief cuBLASLt on the chapter's operation with a workspace, its fastest algorithm per shape: up to
//!        `max_candidates` from `cublasLtMatmulAlgoGetHeuristic`, timed in turn (PickRule), the fastest kept.
class CublasLtGemmBf16Best {
public:
    static constexpr int max_candidates = 16;
    static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;  //!< what cuBLAS advises on Hopper

    //! @throws std::runtime_error when cuBLASLt cannot be initialized; CudaError when the workspace cannot be had
    CublasLtGemmBf16Best();
    ~CublasLtGemmBf16Best();
    CublasLtGemmBf16Best(const CublasLtGemmBf16Best&) = delete;
    CublasLtGemmBf16Best& operator=(const CublasLtGemmBf16Best&) = delete;

    //! @brief Asks the heuristic for this shape's candidates, times them in turn on these buffers and keeps the
    //!        fastest for operator().
    //! @return every candidate with its median, in the heuristic's order; the index of the one kept
    //! @throws std::runtime_error naming the cuBLASLt status; CudaError when a launch fails
    std::pair<std::vector<PickedCandidate>, std::size_t> pick(int M, int N, int K, const bf16* d_A, const bf16* d_B,
                                                              bf16* d_C, const PickRule& rule, void* d_flush,
                                                              std::size_t flush_bytes, cudaStream_t stream);

    //! @brief C = A B with the algorithm pick() kept for this shape.
    //! @return cudaErrorInvalidValue when none was picked for it, else the launch's error
    //! @throws std::runtime_error naming the cuBLASLt status when the call fails
    cudaError_t operator()(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                           cudaStream_t stream) const;

private:
    struct Plan;  //!< the descriptors of one shape, and its algorithms
    cudaError_t run(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const bf16* d_A, const bf16* d_B, bf16* d_C,
                    cudaStream_t stream) const;

    cublasLtHandle_t handle_ = nullptr;
    void* d_workspace_ = nullptr;
    std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> plans_;
};

}  // namespace stepwise::tensor_core_gemm
