#include "sgemm/sgemm_autotune.hpp"

#include "../../snippets/sgemm/11_any_shape_any_size.cuh"

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <type_traits>

namespace stepwise::sgemm {
namespace {

//! The index of Cfg in the launcher's `autotuned::Configs`, or -1.
template <class Cfg, std::size_t... I>
constexpr int launcher_index(std::index_sequence<I...>)
{
    constexpr bool same[] = {std::is_same_v<Cfg, std::tuple_element_t<I, autotuned::Configs>>...};
    for (std::size_t i = 0; i < sizeof...(I); ++i) {
        if (same[i]) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

//! Cfg's kernel in instance P, named by the candidate's id ("sgemm_kernel<bm128_..., Path::edges>").
template <class Cfg, autotuned::Path P>
KernelEntry instance(const std::string& id, const char* path)
{
    return kernel_entry("sgemm_kernel<" + id + ", Path::" + path + ">", autotuned::sgemm_kernel<Cfg, P>,
                        dim3(Cfg::threads), Cfg::smem_bytes);
}

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int STAGES, int MIN_BLOCKS, int BURSTS>
AutotuneCandidate candidate()
{
    using Cfg = autotuned::Config<BM, BN, BK, WM, WN, TM, TN, STAGES, MIN_BLOCKS, BURSTS>;
    AutotuneCandidate c;
    c.id = "bm" + std::to_string(BM) + "_bn" + std::to_string(BN) + "_bk" + std::to_string(BK) + "_wm" +
           std::to_string(WM) + "_wn" + std::to_string(WN) + "_tm" + std::to_string(TM) + "_tn" +
           std::to_string(TN) + "_s" + std::to_string(STAGES) + "_mb" + std::to_string(MIN_BLOCKS) + "_b" +
           std::to_string(BURSTS);
    c.tiling = Tiling{BM, BN, BK, WM, WN, TM, TN, Cfg::threads, STAGES};
    c.min_blocks = MIN_BLOCKS;
    c.bursts = BURSTS;
    c.launcher_config = launcher_index<Cfg>(std::make_index_sequence<std::tuple_size_v<autotuned::Configs>>{});
    c.sgemm = autotuned::sgemm_with<Cfg>;
    c.path = [](int M, int N, int K, int splits, const float* d_B, const float* d_C) {
        return static_cast<int>(autotuned::path_for<Cfg>(M, N, K, autotuned::split_length(K, BK, splits), d_B, d_C));
    };
    c.kernels = {instance<Cfg, autotuned::Path::aligned>(c.id, "aligned"),
                 instance<Cfg, autotuned::Path::edges>(c.id, "edges"),
                 instance<Cfg, autotuned::Path::unaligned>(c.id, "unaligned")};
    return c;
}

}  // namespace

const std::vector<AutotuneCandidate>& autotune_candidates()
{
    // Block tile BM x BN x BK, warp tile WM x WN, thread tile TM x TN, shared-memory stages, minimum blocks per SM,
    // copy bursts.
    static const std::vector<AutotuneCandidate> all = {
        // 128 x 128 and larger: large problems (the launcher's Large first)
        candidate<128, 128, 32, 64, 32, 8, 8, 2, 2, 3>(),
        candidate<128, 128, 32, 64, 32, 8, 8, 2, 2, 1>(),
        candidate<128, 128, 32, 64, 32, 8, 8, 2, 2, 2>(),
        candidate<128, 128, 32, 32, 64, 8, 8, 2, 2, 2>(),
        candidate<128, 128, 32, 64, 32, 8, 8, 3, 1, 2>(),
        candidate<128, 128, 16, 64, 32, 8, 8, 3, 2, 1>(),
        candidate<128, 128, 16, 32, 64, 8, 8, 4, 2, 1>(),
        candidate<128, 256, 16, 64, 64, 8, 16, 3, 1, 2>(),
        // 128 x 64 and 64 x 64: medium problems, or few tiles (the launcher's Medium)
        candidate<128, 64, 16, 64, 32, 8, 8, 3, 3, 2>(),
        candidate<128, 64, 16, 64, 32, 8, 8, 3, 3, 1>(),
        candidate<64, 64, 16, 32, 32, 4, 8, 3, 4, 1>(),
        candidate<64, 64, 32, 32, 32, 4, 8, 3, 4, 2>(),
        // 32 x 32 and 64 x 32: small problems (the launcher's Small)
        candidate<32, 32, 32, 32, 16, 4, 4, 3, 8, 1>(),
        candidate<32, 32, 16, 32, 16, 4, 4, 4, 8, 1>(),
        candidate<64, 32, 16, 32, 32, 4, 8, 3, 6, 1>(),
    };
    return all;
}

std::vector<int> autotune_splits(const AutotuneCandidate& candidate, int M, int N, int K, int sm_count)
{
    const int BM = candidate.tiling.block_m, BN = candidate.tiling.block_n, BK = candidate.tiling.block_k;
    const long long tiles = static_cast<long long>((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const long long slots = static_cast<long long>(sm_count) * candidate.min_blocks;
    std::vector<int> out = {1};
    for (int s = 2; s <= 16 && K / s >= 128; ++s) {
        if (100 * tiles * (s - 1) >= autotuned::fill_percent * slots) {
            break;  // s - 1 splits already fill the GPU
        }
        if (100 * tiles * s >= autotuned::fill_percent * slots) {
            out.push_back(autotuned::effective_splits(K, BK, s));
            break;
        }
    }
    const autotuned::Plan plan = autotuned::choose_plan(M, N, K, sm_count);
    if (plan.config == candidate.launcher_config) {
        out.push_back(plan.splits);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

bool launcher_runs(const AutotuneCandidate& candidate, int splits, int M, int N, int K, int sm_count)
{
    const autotuned::Plan plan = autotuned::choose_plan(M, N, K, sm_count);
    return plan.rows == M && plan.config == candidate.launcher_config && plan.splits == splits;
}

std::optional<WholeWaves> launcher_whole_waves(int M, int N, int K, int sm_count)
{
    const autotuned::Plan plan = autotuned::choose_plan(M, N, K, sm_count);
    if (plan.rows == M) {
        return std::nullopt;
    }
    for (const AutotuneCandidate& c : autotune_candidates()) {
        if (c.launcher_config == plan.config) {
            return WholeWaves{&c, plan.rows};
        }
    }
    throw std::logic_error("step 11's launcher plans a configuration the sweep does not list; list it in "
                           "bench/sgemm/sgemm_autotune.cu");
}

cudaError_t launcher_sgemm(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta, float* d_C,
                           cudaStream_t stream)
{
    return autotuned::sgemm(M, N, K, alpha, d_A, d_B, beta, d_C, stream);
}

}  // namespace stepwise::sgemm
