#include "tensor_core_gemm/tensor_core_gemm_autotune.hpp"
#include "core/cuda_check.hpp"

#include "../../snippets/tensor_core_gemm/14_three_consumer_tiles.cuh"

namespace stepwise::tensor_core_gemm {
namespace {

namespace p = three_consumer_tiles;

//! @brief Whether the final step's launcher runs `Cfg` for an M x N problem on this device.
template <class Cfg>
bool launcher_picks(int M, int N)
{
    int device = 0;
    int sms = 0;
    STEPWISE_CUDA_CHECK(cudaGetDevice(&device));
    STEPWISE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return p::chosen_configuration(M, N, sms).gemm == &p::gemm_with<Cfg>;
}

template <int BM, int BN, int STAGES, int CLUSTER_M, int CLUSTER_N, int GROUP_M, bool PING_PONG, int CONSUMERS = 2>
AutotuneCandidate candidate()
{
    using Cfg = p::Config<BM, BN, STAGES, CLUSTER_M, CLUSTER_N, GROUP_M, PING_PONG, CONSUMERS>;
    AutotuneCandidate c;
    c.id = std::string(PING_PONG ? "pingpong" : CONSUMERS == 2 ? "coop" : "coop" + std::to_string(CONSUMERS)) +
           "_bm" + std::to_string(BM) + "_bn" + std::to_string(BN) +
           "_s" + std::to_string(STAGES) + "_c" + std::to_string(CLUSTER_M) + "x" + std::to_string(CLUSTER_N) + "_g" +
           std::to_string(GROUP_M);
    c.config = {{"schedule", PING_PONG ? "ping-pong" : "cooperative"},
                {"block_m", Cfg::BM},
                {"block_n", BN},
                {"block_k", p::BK},
                {"warp_m", Cfg::consumer_m},
                {"warp_n", Cfg::consumer_n},
                {"thread_m", 0},
                {"thread_n", 0},
                {"threads", Cfg::threads},
                {"stages", STAGES},
                {"cluster_m", CLUSTER_M},
                {"cluster_n", CLUSTER_N},
                {"group_m", GROUP_M}};
    c.gemm = [](int M, int N, int K, const bf16* d_A, const bf16* d_B, bf16* d_C, cudaStream_t stream) {
        return p::gemm_with<Cfg>(M, N, K, d_A, d_B, d_C, stream);
    };
    c.kernel = kernel_entry("gemm_kernel<" + c.id + ">", p::gemm_kernel<Cfg>, dim3(Cfg::threads), Cfg::smem_bytes);
    c.chosen_for = launcher_picks<Cfg>;
    return c;
}

}  // namespace

const std::vector<AutotuneCandidate>& autotune_candidates()
{
    // Schedule, rows and columns of C per tile, stages, cluster (tiles along M x along N), cluster rows per group.
    static const std::vector<AutotuneCandidate> all = {
        candidate<128, 176, 5, 2, 1, 8, true>(),    // PingPong176
        candidate<128, 176, 4, 2, 1, 8, true>(),
        candidate<128, 176, 5, 1, 2, 8, true>(),
        candidate<128, 176, 5, 2, 1, 4, true>(),
        candidate<128, 192, 5, 2, 1, 8, true>(),    // PingPong192
        candidate<128, 128, 6, 2, 1, 8, true>(),
        candidate<128, 256, 4, 2, 1, 8, false>(),   // Cooperative256
        candidate<128, 256, 4, 2, 1, 16, false>(),
        candidate<128, 128, 6, 2, 1, 8, false>(),   // Cooperative128
        candidate<128, 144, 5, 2, 1, 8, false>(),   // Cooperative144
        candidate<128, 144, 5, 1, 1, 8, false>(),
        candidate<192, 192, 4, 2, 1, 8, false, 3>(),  // ThreeConsumers192
        candidate<64, 128, 8, 2, 1, 8, false>(),    // SplitColumns128
        candidate<64, 128, 8, 1, 1, 8, false>(),
        candidate<64, 128, 6, 2, 1, 8, false>(),
        candidate<64, 96, 8, 2, 1, 8, false>(),     // SplitColumns96
        candidate<64, 64, 8, 1, 1, 8, false>(),     // SplitColumns64
        candidate<64, 64, 8, 2, 1, 8, false>(),
    };
    return all;
}

}  // namespace stepwise::tensor_core_gemm
