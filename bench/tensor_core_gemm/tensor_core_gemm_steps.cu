#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"
#include "core/cuda_check.hpp"

#include "../../snippets/tensor_core_gemm/01_wmma.cuh"
#include "../../snippets/tensor_core_gemm/02_mma_ldmatrix.cuh"
#include "../../snippets/tensor_core_gemm/03_cp_async_pipeline.cuh"
#include "../../snippets/tensor_core_gemm/04_tma_mbarrier.cuh"
#include "../../snippets/tensor_core_gemm/05_wgmma.cuh"
#include "../../snippets/tensor_core_gemm/06_warp_specialized.cuh"
#include "../../snippets/tensor_core_gemm/07_cluster_multicast.cuh"
#include "../../snippets/tensor_core_gemm/08_persistent_tile_scheduler.cuh"
#include "../../snippets/tensor_core_gemm/09_any_shape.cuh"
#include "../../snippets/tensor_core_gemm/10_ping_pong_consumers.cuh"
#include "../../snippets/tensor_core_gemm/11_split_columns.cuh"
#include "../../snippets/tensor_core_gemm/12_two_loaders.cuh"
#include "../../snippets/tensor_core_gemm/13_tile_choice_by_rounds.cuh"
#include "../../snippets/tensor_core_gemm/14_three_consumer_tiles.cuh"

#include <cmath>
#include <string>

namespace stepwise::tensor_core_gemm {
namespace {

//! Every block of a step of one kernel: `threads` threads and `smem` bytes of dynamic shared memory.
template <typename Kernel>
std::vector<KernelEntry> one_kernel(const char* name, Kernel kernel, int threads, std::size_t smem = 0)
{
    return {kernel_entry(name, kernel, dim3(threads), smem)};
}

//! `ns::gemm_kernel<ns::Cfg>` of steps 10 to 14, under the name the compiler's report gives it (`args`: the
//! Config's template arguments), with the block and shared memory its launcher gives it.
#define STEPWISE_CONFIG_KERNEL(ns, Cfg, args)                                                                        \
    kernel_entry("gemm_kernel<stepwise::tensor_core_gemm::" #ns "::Config<" args "> >", ns::gemm_kernel<ns::Cfg>,   \
                 dim3(ns::Cfg::threads), ns::Cfg::smem_bytes)

//! Steps 10 to 14's configurations of step 10, ping-pong's and the cooperative ones (`more`: the Config's template
//! arguments after those given, spelled out as the compiler's report does); with them, steps 11 to 14 run the
//! 64 x 128 tile that step 11 splits between two consumers (step 10 computes it with one, OneConsumer128); and the
//! three that step 13, the tile choice by rounds, adds.
#define STEPWISE_LARGE_TILE_KERNELS(ns, more)                                                                         \
    STEPWISE_CONFIG_KERNEL(ns, PingPong176, "128, 176, 5, 2, 1, 8, true" more),                                       \
        STEPWISE_CONFIG_KERNEL(ns, PingPong192, "128, 192, 5, 2, 1, 8, true" more),                                   \
        STEPWISE_CONFIG_KERNEL(ns, Cooperative256, "128, 256, 4, 2, 1, 8, false" more),                               \
        STEPWISE_CONFIG_KERNEL(ns, Cooperative128, "128, 128, 6, 2, 1, 8, false" more)
#define STEPWISE_PING_PONG_KERNELS(ns, more)                                                                          \
    STEPWISE_LARGE_TILE_KERNELS(ns, more),                                                                            \
        STEPWISE_CONFIG_KERNEL(ns, SplitColumns128, "64, 128, 8, 2, 1, 8, false" more)
#define STEPWISE_ROUNDS_KERNELS(ns, more)                                                                             \
    STEPWISE_CONFIG_KERNEL(ns, SplitColumns64, "64, 64, 8, 1, 1, 8, false" more),                                     \
        STEPWISE_CONFIG_KERNEL(ns, SplitColumns96, "64, 96, 8, 2, 1, 8, false" more),                                 \
        STEPWISE_CONFIG_KERNEL(ns, Cooperative144, "128, 144, 5, 2, 1, 8, false" more)

template <class Cfg>
KernelEntry any_shape_kernel(const char* name)
{
    return kernel_entry(name, persistent::gemm_kernel<Cfg>, dim3(Cfg::threads), Cfg::smem_bytes);
}

// ---- the tensor cores' ceiling: wgmma from shared memory, nothing else ----

constexpr int peak_warpgroups = 2;
constexpr int peak_threads = peak_warpgroups * 128;
constexpr int peak_n = 256;  // m64n256k16, the widest wgmma
constexpr double peak_fmas_per_trip = 4.0 * 64 * peak_n * 16;  // a trip: four k-slices of 16, one 64-deep tile
constexpr std::size_t peak_smem_bytes = (peak_warpgroups * 64 + peak_n) * 64 * sizeof(bf16) + 1024;

//! `total_trips` trips of four m64n256k16 wgmma, shared by every warpgroup of the grid as evenly as they divide.
__global__ void __launch_bounds__(peak_threads, 1) tensor_peak_kernel(long long total_trips, float* d_sink)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    namespace p = persistent;
    extern __shared__ unsigned char smem_raw[];
    bf16* tiles = reinterpret_cast<bf16*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
    constexpr int elems = (peak_warpgroups * 64 + peak_n) * 64;
    for (int i = threadIdx.x; i < elems; i += blockDim.x) {  // random bits: the tensor cores' power depends on them
        const unsigned h = (static_cast<unsigned>(i) + 0x9E3779B9u * (blockIdx.x + 1)) * 2654435761u;
        tiles[i] = __float2bfloat16_rn(static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
    p::fence_proxy_async();  // written by threads, read by the tensor cores
    __syncthreads();
    const int group = threadIdx.x / 128;
    const long long warpgroup = static_cast<long long>(blockIdx.x) * peak_warpgroups + group;
    const long long warpgroups = static_cast<long long>(gridDim.x) * peak_warpgroups;
    const long long trips = total_trips / warpgroups + (warpgroup < total_trips % warpgroups ? 1 : 0);
    const bf16* A = tiles + group * 64 * 64;
    const bf16* B = tiles + peak_warpgroups * 64 * 64;
    float acc[peak_n / 2] = {};
    for (long long trip = 0; trip < trips; ++trip) {
        p::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            p::wgmma_64xNx16(acc, p::smem_descriptor(A + kk * 16), p::smem_descriptor(B + kk * 16), 1);
        }
        p::wgmma_commit();
        p::wgmma_wait<1>();
        p::fence_accumulators(acc);
    }
    p::wgmma_wait<0>();
    p::fence_accumulators(acc);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < peak_n / 2; ++i) {
        sum += acc[i];
    }
    d_sink[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = sum;
#else
    (void)total_trips;
    (void)d_sink;
#endif
}

unsigned tensor_peak_blocks()
{
    int device = 0;
    int sms = 0;
    STEPWISE_CUDA_CHECK(cudaGetDevice(&device));
    STEPWISE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return static_cast<unsigned>(sms);
}

}  // namespace

const std::vector<Step>& steps()
{
    namespace p = persistent;
    namespace ts = persistent_tile_scheduler;
    static const std::vector<Step> all = {
        {"01_wmma", "WMMA on bf16 tiles in shared memory", "snippets/tensor_core_gemm/01_wmma.cuh",
         "stepwise::tensor_core_gemm::wmma_tiles", wmma_tiles::requirement, wmma_tiles::requirement_met,
         wmma_tiles::BM, wmma_tiles::BN, wmma_tiles::BK, wmma_tiles::gemm,
         one_kernel("gemm_kernel", wmma_tiles::gemm_kernel, wmma_tiles::threads)},
        {"02_mma_ldmatrix", "mma.sync and ldmatrix, a swizzled shared layout",
         "snippets/tensor_core_gemm/02_mma_ldmatrix.cuh", "stepwise::tensor_core_gemm::mma_ldmatrix",
         mma_ldmatrix::requirement, mma_ldmatrix::requirement_met, mma_ldmatrix::BM, mma_ldmatrix::BN,
         mma_ldmatrix::BK, mma_ldmatrix::gemm,
         one_kernel("gemm_kernel", mma_ldmatrix::gemm_kernel, mma_ldmatrix::threads)},
        {"03_cp_async_pipeline", "A four-stage cp.async pipeline", "snippets/tensor_core_gemm/03_cp_async_pipeline.cuh",
         "stepwise::tensor_core_gemm::cp_async_pipeline", cp_async_pipeline::requirement,
         cp_async_pipeline::requirement_met, cp_async_pipeline::BM, cp_async_pipeline::BN, cp_async_pipeline::BK,
         cp_async_pipeline::gemm,
         one_kernel("gemm_kernel", cp_async_pipeline::gemm_kernel, cp_async_pipeline::threads,
                    cp_async_pipeline::smem_bytes)},
        {"04_tma_mbarrier", "TMA loads and mbarriers, one thread issuing",
         "snippets/tensor_core_gemm/04_tma_mbarrier.cuh", "stepwise::tensor_core_gemm::tma_mbarrier",
         tma_mbarrier::requirement, tma_mbarrier::requirement_met, tma_mbarrier::BM, tma_mbarrier::BN,
         tma_mbarrier::BK, tma_mbarrier::gemm,
         one_kernel("gemm_kernel", tma_mbarrier::gemm_kernel, tma_mbarrier::threads, tma_mbarrier::smem_bytes)},
        {"05_wgmma", "wgmma: a warpgroup multiplies from shared memory", "snippets/tensor_core_gemm/05_wgmma.cuh",
         "stepwise::tensor_core_gemm::wgmma_tiles", wgmma_tiles::requirement, wgmma_tiles::requirement_met,
         wgmma_tiles::BM, wgmma_tiles::BN, wgmma_tiles::BK, wgmma_tiles::gemm,
         one_kernel("gemm_kernel", wgmma_tiles::gemm_kernel, wgmma_tiles::threads, wgmma_tiles::smem_bytes)},
        {"06_warp_specialized", "A producer warpgroup, two consumers, 128 x 256 tiles",
         "snippets/tensor_core_gemm/06_warp_specialized.cuh", "stepwise::tensor_core_gemm::warp_specialized",
         warp_specialized::requirement, warp_specialized::requirement_met, warp_specialized::BM,
         warp_specialized::BN, warp_specialized::BK, warp_specialized::gemm,
         one_kernel("gemm_kernel", warp_specialized::gemm_kernel, warp_specialized::threads,
                    warp_specialized::smem_bytes)},
        {"07_cluster_multicast", "Clusters of two blocks sharing B through TMA multicast",
         "snippets/tensor_core_gemm/07_cluster_multicast.cuh", "stepwise::tensor_core_gemm::cluster_multicast",
         cluster_multicast::requirement, cluster_multicast::requirement_met,
         cluster_multicast::BM * cluster_multicast::cluster_m, cluster_multicast::BN, cluster_multicast::BK,
         cluster_multicast::gemm,
         one_kernel("gemm_kernel", cluster_multicast::gemm_kernel, cluster_multicast::threads,
                    cluster_multicast::smem_bytes)},
        {"08_persistent_tile_scheduler", "Persistent: clusters walk the tiles in scheduled order, C leaves through the TMA",
         "snippets/tensor_core_gemm/08_persistent_tile_scheduler.cuh", "stepwise::tensor_core_gemm::persistent_tile_scheduler",
         ts::requirement, ts::requirement_met, ts::BM * ts::cluster_m, ts::BN, ts::BK, ts::gemm,
         one_kernel("gemm_kernel", ts::gemm_kernel, ts::threads, ts::smem_bytes)},
        {"09_any_shape", "Any shape: edges, padded copies, a configuration per shape", "snippets/tensor_core_gemm/09_any_shape.cuh",
         "stepwise::tensor_core_gemm::persistent", p::requirement, p::requirement_met, 1, 1, 1, p::gemm,
         {any_shape_kernel<p::Large>("gemm_kernel<stepwise::tensor_core_gemm::persistent::Config<128, 256, 4, 2, 1, 8> >"),
          any_shape_kernel<p::Medium>("gemm_kernel<stepwise::tensor_core_gemm::persistent::Config<128, 128, 6, 2, 1, 8> >"),
          any_shape_kernel<p::Small>("gemm_kernel<stepwise::tensor_core_gemm::persistent::Config<64, 128, 8, 2, 1, 8> >"),
          kernel_entry("pad_rows_kernel", p::pad_rows_kernel, dim3(256))},
         {"08_persistent"}},
        {"10_ping_pong_consumers", "Two consumers take the tiles in turn: one writes C while the other's wgmma run",
         "snippets/tensor_core_gemm/10_ping_pong_consumers.cuh", "stepwise::tensor_core_gemm::ping_pong_consumers",
         ping_pong_consumers::requirement, ping_pong_consumers::requirement_met, 1, 1, 1, ping_pong_consumers::gemm,
         {STEPWISE_LARGE_TILE_KERNELS(ping_pong_consumers, ""),
          STEPWISE_CONFIG_KERNEL(ping_pong_consumers, OneConsumer128, "64, 128, 8, 2, 1, 8, false"),
          kernel_entry("pad_rows_kernel", ping_pong_consumers::pad_rows_kernel, dim3(256))}},
        {"11_split_columns", "Small tiles: two consumers split the columns of a 64-row tile",
         "snippets/tensor_core_gemm/11_split_columns.cuh", "stepwise::tensor_core_gemm::split_columns",
         split_columns::requirement, split_columns::requirement_met, 1, 1, 1, split_columns::gemm,
         {STEPWISE_PING_PONG_KERNELS(split_columns, ""),
          kernel_entry("pad_rows_kernel", split_columns::pad_rows_kernel, dim3(256))}},
        // Step 12 is the code of the former step 10 (09_ping_pong before that), measured under those ids.
        {"12_two_loaders", "Two loaders, the block's own copies and the cluster's shared ones; a leaner epilogue",
         "snippets/tensor_core_gemm/12_two_loaders.cuh", "stepwise::tensor_core_gemm::ping_pong",
         ping_pong::requirement, ping_pong::requirement_met, 1, 1, 1, ping_pong::gemm,
         {STEPWISE_PING_PONG_KERNELS(ping_pong, ""), kernel_entry("pad_rows_kernel", ping_pong::pad_rows_kernel, dim3(256))},
         {"10_ping_pong", "09_ping_pong"}},
        {"13_tile_choice_by_rounds", "Small problems: the tile of fewest rounds times a k-tile's cost, widths between powers of two",
         "snippets/tensor_core_gemm/13_tile_choice_by_rounds.cuh", "stepwise::tensor_core_gemm::tile_choice_by_rounds",
         tile_choice_by_rounds::requirement, tile_choice_by_rounds::requirement_met, 1, 1, 1, tile_choice_by_rounds::gemm,
         {STEPWISE_PING_PONG_KERNELS(tile_choice_by_rounds, ""), STEPWISE_ROUNDS_KERNELS(tile_choice_by_rounds, ""),
          kernel_entry("pad_rows_kernel", tile_choice_by_rounds::pad_rows_kernel, dim3(256))},
         {"11_tile_choice_by_rounds", "10_tile_choice_by_rounds"}},
        {"14_three_consumer_tiles", "Three consumers share a 192 x 192 tile where few rounds cover C",
         "snippets/tensor_core_gemm/14_three_consumer_tiles.cuh", "stepwise::tensor_core_gemm::three_consumer_tiles",
         three_consumer_tiles::requirement, three_consumer_tiles::requirement_met, 1, 1, 1, three_consumer_tiles::gemm,
         {STEPWISE_PING_PONG_KERNELS(three_consumer_tiles, ", 2"), STEPWISE_ROUNDS_KERNELS(three_consumer_tiles, ", 2"),
          STEPWISE_CONFIG_KERNEL(three_consumer_tiles, ThreeConsumers192, "192, 192, 4, 2, 1, 8, false, 3"),
          kernel_entry("pad_rows_kernel", three_consumer_tiles::pad_rows_kernel, dim3(256))},
         {"12_three_consumer_tiles", "11_three_consumer_tiles"}},
    };
    return all;
}

std::string unsupported_reason(const Step& step) { return stepwise::unsupported_reason(step.needs, step.needs_met()); }

std::string tensor_peak_unsupported(nlohmann::json& unsupported)
{
    std::string reason = unsupported_reason(steps().back());
    if (!reason.empty()) {
        unsupported.push_back({{"id", "tensor_peak"}, {"reason", reason}});
    }
    return reason;
}

CublasGemmBf16::CublasGemmBf16() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }

CublasGemmBf16::~CublasGemmBf16() { cublasDestroy(handle_); }

cudaError_t CublasGemmBf16::operator()(int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C,
                                       cudaStream_t stream) const
{
    // Column-major, cuBLAS computes C^T (N x M, leading dimension N) = op(B^T) op(A^T): our B is stored as N rows of
    // K, a column-major K x N matrix with leading dimension K, so op = T gives B^T; our A (M rows of K) is the
    // column-major K x M matrix A^T, op = N.
    const float one = 1.f;
    const float zero = 0.f;
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, d_B, CUDA_R_16BF, K, d_A, CUDA_R_16BF,
                              K, &zero, d_C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    return cudaGetLastError();
}

std::size_t tensor_peak_threads() { return static_cast<std::size_t>(tensor_peak_blocks()) * peak_threads; }

cudaError_t tensor_peak(double num_fmas, float* d_sink, cudaStream_t stream)
{
    if (d_sink == nullptr || !(num_fmas > 0)) {
        return cudaErrorInvalidValue;
    }
    if (!persistent::requirement_met()) {
        return cudaErrorNotSupported;
    }
    if (const cudaError_t e = cudaFuncSetAttribute(tensor_peak_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(peak_smem_bytes));
        e != cudaSuccess) {
        return e;
    }
    const auto trips = static_cast<long long>(std::ceil(num_fmas / peak_fmas_per_trip));
    tensor_peak_kernel<<<tensor_peak_blocks(), peak_threads, peak_smem_bytes, stream>>>(trips, d_sink);
    return cudaGetLastError();
}

}  // namespace stepwise::tensor_core_gemm
