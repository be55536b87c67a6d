#include "sgemm_autotune.hpp"

#include "../snippets/sgemm/10_autotuned.cuh"

#include <type_traits>

namespace stepwise::sgemm {
namespace {

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int MIN_BLOCKS>
AutotuneCandidate candidate()
{
    using Cfg = autotuned::Config<BM, BN, BK, WM, WN, TM, TN, STAGES, MIN_BLOCKS>;
    AutotuneCandidate c;
    c.id = "bm" + std::to_string(BM) + "_bn" + std::to_string(BN) + "_bk" + std::to_string(BK) + "_wm" +
           std::to_string(WM) + "_wn" + std::to_string(WN) + "_tm" + std::to_string(TM) + "_tn" +
           std::to_string(TN) + "_s" + std::to_string(STAGES) + "_mb" + std::to_string(MIN_BLOCKS);
    c.tiling = Tiling{BM, BN, BK, WM, WN, TM, TN, Cfg::threads, STAGES};
    c.min_blocks = MIN_BLOCKS;
    c.chosen = std::is_same_v<Cfg, autotuned::Chosen>;
    c.multiple_m = BM;
    c.multiple_n = BN;
    c.multiple_k = BK;
    c.sgemm = [](int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                 cudaStream_t stream) { return autotuned::sgemm_with<Cfg>(M, N, K, alpha, d_A, d_B, beta, d_C, stream); };
    c.kernel = kernel_entry("sgemm_kernel<" + c.id + ">", autotuned::sgemm_kernel<Cfg>, dim3(Cfg::threads),
                            Cfg::smem_bytes);
    return c;
}

}  // namespace

const std::vector<AutotuneCandidate>& autotune_candidates()
{
    // Block tile BM x BN x BK, warp tile WM x WN, thread tile TM x TN, shared-memory stages, minimum blocks per SM.
    static const std::vector<AutotuneCandidate> all = {
        candidate<128, 128, 8, 64, 32, 8, 8, 3, 2>(),
        candidate<128, 128, 16, 64, 32, 8, 8, 2, 2>(),
        candidate<128, 128, 16, 64, 32, 8, 8, 3, 2>(),
        candidate<128, 128, 16, 64, 32, 8, 8, 4, 2>(),
        candidate<128, 128, 32, 64, 32, 8, 8, 2, 2>(),
        candidate<128, 128, 8, 64, 64, 8, 16, 4, 2>(),
        candidate<128, 256, 8, 64, 64, 8, 16, 3, 1>(),
        candidate<256, 128, 8, 64, 64, 8, 16, 3, 1>(),
        candidate<128, 256, 16, 64, 64, 8, 16, 3, 1>(),
    };
    return all;
}

}  // namespace stepwise::sgemm
