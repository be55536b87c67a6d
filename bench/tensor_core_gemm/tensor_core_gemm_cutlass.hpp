// The tensor-core GEMM chapter's second library baseline: CUTLASS's Hopper GEMM (TMA loads, wgmma, warp-specialized
// kernels, clusters), a few configurations built with its CollectiveBuilder. Compiled in a translation unit of its
// own, for sm_90a machine code alone (bench/CMakeLists.txt, stepwise_cutlass); where the build has no CUTLASS headers
// or no sm_90a code it provides no configurations and says why.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace stepwise::tensor_core_gemm {

using bf16 = __nv_bfloat16;  //!< as in tensor_core_gemm_steps.hpp

//! @brief One CUTLASS configuration compiled into the timing program: the chapter's operation, C = A B with A M x K
//!        row-major, B K x N column-major (N rows of K), C M x N row-major, bf16 in and out, fp32 accumulation,
//!        alpha 1, beta 0 (C is only written).
struct CutlassGemm {
    std::string id;           //!< e.g. "cooperative_128x256x64_cluster2x1"
    std::string description;  //!< the kernel schedule, tile, cluster, tile scheduler and pipeline stages

    //! @brief Whether the configuration takes this shape (given 16-byte aligned buffers): M, N, K >= 1, N and K
    //!        multiples of 8 (TMA needs 16-byte row pitches; the epilogue stores C through TMA too).
    bool (*accepts)(int M, int N, int K);

    //! @brief The device workspace `gemm` needs for this shape on the current device (the stream-K scheduler's
    //!        partial tiles; 0 for most). Needs a current device: 0 when it cannot be queried (or the shape is
    //!        refused), and `gemm` then reports the error.
    std::size_t (*workspace_bytes)(int M, int N, int K);

    //! @brief C = A B on `stream`. Never prints, never aborts.
    //! @param d_workspace at least `workspace_bytes(M, N, K)` bytes of device memory (may be null where that is 0)
    //! @return `cudaErrorNotSupported` on a GPU of compute capability other than 9.0 (sm_90a code only),
    //!         `cudaErrorInvalidValue` for a shape `accepts` refuses, a null or not 16-byte aligned matrix, a
    //!         workspace smaller than needed or anything else CUTLASS's `can_implement` refuses, else the error of
    //!         the device query, the workspace's initialization or the launch (`cudaErrorUnknown` where CUTLASS
    //!         reports an internal error: it has cleared the CUDA error it saw)
    cudaError_t (*gemm)(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, void* d_workspace,
                        std::size_t workspace_bytes, cudaStream_t stream);
};

//! @brief The configurations compiled in, ids unique (empty where the build has no CUTLASS or no sm_90a code).
const std::vector<CutlassGemm>& cutlass_gemms();

//! @brief Why there are no configurations ("the build found no CUTLASS headers ..." or "the build has no sm_90a
//!        code ..."), or empty when there are.
std::string cutlass_unavailable_reason();

//! @brief The CUTLASS version compiled in ("4.2.0"), or empty where none is.
std::string cutlass_version();

}  // namespace stepwise::tensor_core_gemm
