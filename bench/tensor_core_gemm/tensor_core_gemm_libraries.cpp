#include "tensor_core_gemm/tensor_core_gemm_libraries.hpp"

#include "core/cuda_check.hpp"
#include "core/sampler.hpp"
#include "core/statistics.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace stepwise::tensor_core_gemm {

namespace {

//! "algorithm 66: tile 18, stages 23, split-K 1, swizzle 0, cluster 2" (cublasLt.h's enum values).
std::string describe(const cublasLtMatmulAlgo_t& algo)
{
    std::int32_t id = 0, split_k = 1;
    std::uint32_t tile = 0, stages = 0, swizzle = 0;
    std::uint16_t cluster = 0;
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, nullptr),
                 "cublasLtMatmulAlgoConfigGetAttribute(ID)");
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile,
                                                      nullptr),
                 "cublasLtMatmulAlgoConfigGetAttribute(TILE_ID)");
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages,
                                                      nullptr),
                 "cublasLtMatmulAlgoConfigGetAttribute(STAGES_ID)");
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k,
                                                      sizeof split_k, nullptr),
                 "cublasLtMatmulAlgoConfigGetAttribute(SPLITK_NUM)");
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                                      sizeof swizzle, nullptr),
                 "cublasLtMatmulAlgoConfigGetAttribute(CTA_SWIZZLING)");
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                                      sizeof cluster, nullptr),
                 "cublasLtMatmulAlgoConfigGetAttribute(CLUSTER_SHAPE_ID)");
    return "algorithm " + std::to_string(id) + ": tile " + std::to_string(tile) + ", stages " +
           std::to_string(stages) + ", split-K " + std::to_string(split_k) + ", swizzle " + std::to_string(swizzle) +
           ", cluster " + std::to_string(cluster);
}

}  // namespace

//! Column-major, as cublasGemmEx in CublasGemmBf16: C^T (N x M, leading dimension N) = op(B) op(A) with B stored as
//! a K x N column-major matrix (leading dimension K, op = T) and A as K x M (op = N).
struct CublasLtGemmBf16Best::Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t b_layout = nullptr, a_layout = nullptr, c_layout = nullptr;
    std::vector<cublasLtMatmulAlgo_t> algorithms;  //!< the heuristic's, in its order
    std::size_t kept = 0;                          //!< the one pick() kept

    Plan(int M, int N, int K)
    {
        check_cublas(cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
        const cublasOperation_t transposed = CUBLAS_OP_T, as_is = CUBLAS_OP_N;
        check_cublas(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &transposed,
                                                    sizeof transposed),
                     "cublasLtMatmulDescSetAttribute(TRANSA)");
        check_cublas(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB, &as_is, sizeof as_is),
                     "cublasLtMatmulDescSetAttribute(TRANSB)");
        check_cublas(cublasLtMatrixLayoutCreate(&b_layout, CUDA_R_16BF, K, N, K), "cublasLtMatrixLayoutCreate(B)");
        check_cublas(cublasLtMatrixLayoutCreate(&a_layout, CUDA_R_16BF, K, M, K), "cublasLtMatrixLayoutCreate(A)");
        check_cublas(cublasLtMatrixLayoutCreate(&c_layout, CUDA_R_16BF, N, M, N), "cublasLtMatrixLayoutCreate(C)");
    }
    ~Plan()
    {
        cublasLtMatrixLayoutDestroy(c_layout);
        cublasLtMatrixLayoutDestroy(a_layout);
        cublasLtMatrixLayoutDestroy(b_layout);
        cublasLtMatmulDescDestroy(operation);
    }
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
};

CublasLtGemmBf16Best::CublasLtGemmBf16Best()
{
    check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
    if (const cudaError_t e = cudaMalloc(&d_workspace_, workspace_bytes); e != cudaSuccess) {
        cublasLtDestroy(handle_);
        STEPWISE_CUDA_CHECK(e);
    }
}

CublasLtGemmBf16Best::~CublasLtGemmBf16Best()
{
    plans_.clear();  // their descriptors before the handle
    cudaFree(d_workspace_);
    cublasLtDestroy(handle_);
}

cudaError_t CublasLtGemmBf16Best::run(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const bf16* d_A,
                                      const bf16* d_B, bf16* d_C, cudaStream_t stream) const
{
    const float one = 1.f, zero = 0.f;
    check_cublas(cublasLtMatmul(handle_, plan.operation, &one, d_B, plan.b_layout, d_A, plan.a_layout, &zero, d_C,
                                plan.c_layout, d_C, plan.c_layout, &algo, d_workspace_, workspace_bytes, stream),
                 "cublasLtMatmul");
    return cudaGetLastError();
}

std::pair<std::vector<PickedCandidate>, std::size_t> CublasLtGemmBf16Best::pick(
    int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, const PickRule& rule, void* d_flush,
    std::size_t flush_bytes, cudaStream_t stream)
{
    const auto key = std::make_tuple(M, N, K);
    if (plans_.count(key) == 0) {
        plans_[key] = std::make_unique<Plan>(M, N, K);
    }
    Plan& plan = *plans_[key];
    cublasLtMatmulPreference_t preference = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::size_t limit = workspace_bytes;
    cublasLtMatmulHeuristicResult_t results[max_candidates] = {};
    int returned = 0;
    const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit);
    const cublasStatus_t asked =
        set != CUBLAS_STATUS_SUCCESS
            ? set
            : cublasLtMatmulAlgoGetHeuristic(handle_, plan.operation, plan.b_layout, plan.a_layout, plan.c_layout,
                                             plan.c_layout, preference, max_candidates, results, &returned);
    cublasLtMatmulPreferenceDestroy(preference);
    check_cublas(asked, "cublasLtMatmulAlgoGetHeuristic");
    plan.algorithms.clear();
    for (int i = 0; i < returned; ++i) {
        if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= workspace_bytes) {
            plan.algorithms.push_back(results[i].algo);
        }
    }
    if (plan.algorithms.empty()) {
        throw std::runtime_error("cublasLtMatmulAlgoGetHeuristic: no algorithm for " + std::to_string(M) + " x " +
                                 std::to_string(N) + " x " + std::to_string(K));
    }
    std::vector<std::function<cudaError_t()>> launches;
    for (const cublasLtMatmulAlgo_t& algo : plan.algorithms) {
        launches.push_back([&, algo] { return run(plan, algo, d_A, d_B, d_C, stream); });
    }
    const PickTimes times = pick_fastest(launches, rule, d_flush, flush_bytes, stream);
    std::vector<PickedCandidate> candidates;
    for (std::size_t i = 0; i < launches.size(); ++i) {
        candidates.push_back({describe(plan.algorithms[i]), times.median_ms[i], times.final_median_ms[i]});
    }
    plan.kept = times.kept;
    return {candidates, plan.kept};
}

cudaError_t CublasLtGemmBf16Best::operator()(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                                             cudaStream_t stream) const
{
    const auto found = plans_.find(std::make_tuple(M, N, K));
    if (found == plans_.end() || found->second->algorithms.empty()) {
        return cudaErrorInvalidValue;
    }
    const Plan& plan = *found->second;
    return run(plan, plan.algorithms[plan.kept], d_A, d_B, d_C, stream);
}

}  // namespace stepwise::tensor_core_gemm
