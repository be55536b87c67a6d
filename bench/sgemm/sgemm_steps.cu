#include "sgemm/sgemm_steps.hpp"
#include "core/cuda_check.hpp"

#include "../../snippets/sgemm/01_naive.cuh"
#include "../../snippets/sgemm/02_coalesced.cuh"
#include "../../snippets/sgemm/03_shared_memory_tiles.cuh"
#include "../../snippets/sgemm/04_blocktile_1d.cuh"
#include "../../snippets/sgemm/05_register_blocking_2d.cuh"
#include "../../snippets/sgemm/06_vectorized_transposed_a.cuh"
#include "../../snippets/sgemm/07_conflict_free_layout.cuh"
#include "../../snippets/sgemm/08_warp_tiles.cuh"
#include "../../snippets/sgemm/09_cp_async_pipeline.cuh"
#include "../../snippets/sgemm/10_autotuned_tiles.cuh"
#include "../../snippets/sgemm/11_any_shape_any_size.cuh"
#include "../../snippets/sgemm/12_tf32_wmma.cuh"
#include "../../snippets/sgemm/13_tf32_wgmma.cuh"

namespace stepwise::sgemm {
namespace {

//! The naive steps stop at this size in the timing program: at 8192^3 one launch takes seconds.
constexpr int naive_max_timed_n = 4096;
constexpr int max_timed_n = 8192;

//! A step of block tile bm x bn (depth bk), thread tile tm x tn, with `threads` threads and `stages` buffers.
Tiling tiles(int bm, int bn, int bk, int tm, int tn, int threads, int stages = 0, int wm = 0, int wn = 0)
{
    return Tiling{bm, bn, bk, wm, wn, tm, tn, threads, stages};
}

//! Configuration Cfg of step 10's or step 11's template (namespace `name_space`), as the compiler names it
//! ("stepwise::sgemm::autotuned::Config<128, 128, 32, 64, 32, 8, 8, 2, 2, 3>").
template <class Cfg>
std::string config_name(const std::string& name_space)
{
    return name_space + "::Config<" + std::to_string(Cfg::BM) + ", " + std::to_string(Cfg::BN) + ", " +
           std::to_string(Cfg::BK) + ", " + std::to_string(Cfg::WM) + ", " + std::to_string(Cfg::WN) + ", " +
           std::to_string(Cfg::TM) + ", " + std::to_string(Cfg::TN) + ", " + std::to_string(Cfg::stages) + ", " +
           std::to_string(Cfg::min_blocks) + ", " + std::to_string(Cfg::bursts) + ">";
}

//! Step 10's kernel in its one configuration, as the compiler names it ("sgemm_kernel<...Config<128, ...> >": the
//! demangler puts a space between two closing brackets).
KernelEntry autotuned_tiles_kernel()
{
    using Cfg = autotuned_tiles::Large;
    return kernel_entry("sgemm_kernel<" + config_name<Cfg>("stepwise::sgemm::autotuned_tiles") + " >",
                        autotuned_tiles::sgemm_kernel<Cfg>, dim3(Cfg::threads), Cfg::smem_bytes);
}

//! Step 11's kernel in configuration Cfg and instance P, as the compiler names it
//! ("sgemm_kernel<...Config<128, ...>, (stepwise::sgemm::autotuned::Path)1>": Path::edges).
template <class Cfg, autotuned::Path P>
KernelEntry autotuned_kernel()
{
    const std::string path = "(stepwise::sgemm::autotuned::Path)" + std::to_string(static_cast<int>(P));
    return kernel_entry("sgemm_kernel<" + config_name<Cfg>("stepwise::sgemm::autotuned") + ", " + path + ">",
                        autotuned::sgemm_kernel<Cfg, P>, dim3(Cfg::threads), Cfg::smem_bytes);
}

//! Step 11's kernel in configuration Cfg, its three instances.
template <class Cfg>
std::vector<KernelEntry> autotuned_kernels()
{
    return {autotuned_kernel<Cfg, autotuned::Path::aligned>(), autotuned_kernel<Cfg, autotuned::Path::edges>(),
            autotuned_kernel<Cfg, autotuned::Path::unaligned>()};
}

//! What step 11 launches: each configuration of its launcher in its three instances, and the scaling of C.
std::vector<KernelEntry> autotuned_step_kernels()
{
    std::vector<KernelEntry> all;
    for (std::vector<KernelEntry> config : {autotuned_kernels<autotuned::Large>(), autotuned_kernels<autotuned::Medium>(),
                                            autotuned_kernels<autotuned::Small>()}) {
        all.insert(all.end(), config.begin(), config.end());
    }
    all.push_back(kernel_entry("scale_kernel", autotuned::scale_kernel, dim3(autotuned::scale_threads)));
    return all;
}

}  // namespace

const std::vector<Step>& steps()
{
    using autotuned::Large;
    using autotuned::Medium;
    using autotuned::Small;
    static const std::vector<Step> all = {
        {"01_naive", "One thread per element of C", "snippets/sgemm/01_naive.cuh", "stepwise::sgemm::naive", false,
         true, 1, 1, 1, false, naive_max_timed_n, naive::sgemm,
         {kernel_entry("sgemm_kernel", naive::sgemm_kernel, dim3(naive::block_side, naive::block_side))},
         tiles(naive::block_side, naive::block_side, 0, 1, 1, naive::block_side * naive::block_side)},
        {"02_coalesced", "Threads along N: coalesced", "snippets/sgemm/02_coalesced.cuh",
         "stepwise::sgemm::coalesced", true, true, 1, 1, 1, false, naive_max_timed_n, coalesced::sgemm,
         {kernel_entry("sgemm_kernel", coalesced::sgemm_kernel, dim3(coalesced::block_side, coalesced::block_side))},
         tiles(coalesced::block_side, coalesced::block_side, 0, 1, 1, coalesced::block_side * coalesced::block_side)},
        {"03_shared_memory_tiles", "32 x 32 tiles in shared memory", "snippets/sgemm/03_shared_memory_tiles.cuh",
         "stepwise::sgemm::shared_memory_tiles", false, true, 1, 1, 1, false, max_timed_n, shared_memory_tiles::sgemm,
         {kernel_entry("sgemm_kernel", shared_memory_tiles::sgemm_kernel,
                       dim3(shared_memory_tiles::tile, shared_memory_tiles::tile))},
         tiles(shared_memory_tiles::tile, shared_memory_tiles::tile, shared_memory_tiles::tile, 1, 1,
               shared_memory_tiles::tile * shared_memory_tiles::tile)},
        {"04_blocktile_1d", "Eight results per thread down a column", "snippets/sgemm/04_blocktile_1d.cuh",
         "stepwise::sgemm::blocktile_1d", true, true, blocktile_1d::BM, blocktile_1d::BN, blocktile_1d::BK, false,
         max_timed_n, blocktile_1d::sgemm,
         {kernel_entry("sgemm_kernel", blocktile_1d::sgemm_kernel, dim3(blocktile_1d::threads))},
         tiles(blocktile_1d::BM, blocktile_1d::BN, blocktile_1d::BK, blocktile_1d::TM, 1, blocktile_1d::threads)},
        {"05_register_blocking_2d", "An 8 x 8 register block per thread",
         "snippets/sgemm/05_register_blocking_2d.cuh", "stepwise::sgemm::register_blocking_2d", false, true,
         register_blocking_2d::BM, register_blocking_2d::BN, register_blocking_2d::BK, false, max_timed_n,
         register_blocking_2d::sgemm,
         {kernel_entry("sgemm_kernel", register_blocking_2d::sgemm_kernel, dim3(register_blocking_2d::threads))},
         tiles(register_blocking_2d::BM, register_blocking_2d::BN, register_blocking_2d::BK, register_blocking_2d::TM,
               register_blocking_2d::TN, register_blocking_2d::threads)},
        {"06_vectorized_transposed_a", "16-byte loads, A transposed in shared memory",
         "snippets/sgemm/06_vectorized_transposed_a.cuh", "stepwise::sgemm::vectorized_transposed_a", true, true,
         vectorized_transposed_a::BM, vectorized_transposed_a::BN, vectorized_transposed_a::BK, true, max_timed_n,
         vectorized_transposed_a::sgemm,
         {kernel_entry("sgemm_kernel", vectorized_transposed_a::sgemm_kernel, dim3(vectorized_transposed_a::threads))},
         tiles(vectorized_transposed_a::BM, vectorized_transposed_a::BN, vectorized_transposed_a::BK,
               vectorized_transposed_a::TM, vectorized_transposed_a::TN, vectorized_transposed_a::threads)},
        {"07_conflict_free_layout", "A shared layout without bank conflicts",
         "snippets/sgemm/07_conflict_free_layout.cuh", "stepwise::sgemm::conflict_free_layout", true, true,
         conflict_free_layout::BM, conflict_free_layout::BN, conflict_free_layout::BK, true, max_timed_n,
         conflict_free_layout::sgemm,
         {kernel_entry("sgemm_kernel", conflict_free_layout::sgemm_kernel, dim3(conflict_free_layout::threads))},
         tiles(conflict_free_layout::BM, conflict_free_layout::BN, conflict_free_layout::BK, conflict_free_layout::TM,
               conflict_free_layout::TN, conflict_free_layout::threads)},
        {"08_warp_tiles", "Warp tiles of 64 x 32", "snippets/sgemm/08_warp_tiles.cuh", "stepwise::sgemm::warp_tiles",
         true, true, warp_tiles::BM, warp_tiles::BN, warp_tiles::BK, true, max_timed_n, warp_tiles::sgemm,
         {kernel_entry("sgemm_kernel", warp_tiles::sgemm_kernel, dim3(warp_tiles::threads))},
         tiles(warp_tiles::BM, warp_tiles::BN, warp_tiles::BK, warp_tiles::TM, warp_tiles::TN, warp_tiles::threads, 0,
               warp_tiles::WM, warp_tiles::WN)},
        {"09_cp_async_pipeline", "A three-stage cp.async pipeline", "snippets/sgemm/09_cp_async_pipeline.cuh",
         "stepwise::sgemm::cp_async_pipeline", true, true, cp_async_pipeline::BM, cp_async_pipeline::BN,
         cp_async_pipeline::BK, true, max_timed_n, cp_async_pipeline::sgemm,
         {kernel_entry("sgemm_kernel", cp_async_pipeline::sgemm_kernel, dim3(cp_async_pipeline::threads),
                       cp_async_pipeline::smem_bytes)},
         tiles(cp_async_pipeline::BM, cp_async_pipeline::BN, cp_async_pipeline::BK, cp_async_pipeline::TM,
               cp_async_pipeline::TN, cp_async_pipeline::threads, cp_async_pipeline::stages, cp_async_pipeline::WM,
               cp_async_pipeline::WN),
         cp_async_pipeline::requirement, cp_async_pipeline::requirement_met},
        {"10_autotuned_tiles", "The tiles as template parameters, in the configuration a sweep chose",
         "snippets/sgemm/10_autotuned_tiles.cuh", "stepwise::sgemm::autotuned_tiles", true, true,
         autotuned_tiles::Large::BM, autotuned_tiles::Large::BN, autotuned_tiles::Large::BK, true, max_timed_n,
         autotuned_tiles::sgemm, {autotuned_tiles_kernel()},
         tiles(autotuned_tiles::Large::BM, autotuned_tiles::Large::BN, autotuned_tiles::Large::BK,
               autotuned_tiles::Large::TM, autotuned_tiles::Large::TN, autotuned_tiles::Large::threads,
               autotuned_tiles::Large::stages, autotuned_tiles::Large::WM, autotuned_tiles::Large::WN),
         autotuned_tiles::requirement, autotuned_tiles::requirement_met},
        {"11_any_shape_any_size", "Any shape, any size: edges, split K, a configuration per size",
         "snippets/sgemm/11_any_shape_any_size.cuh", "stepwise::sgemm::autotuned", true, true, 1, 1, 1, false,
         max_timed_n, autotuned::sgemm, autotuned_step_kernels(),
         tiles(Large::BM, Large::BN, Large::BK, Large::TM, Large::TN, Large::threads, Large::stages, Large::WM,
               Large::WN),
         autotuned::requirement, autotuned::requirement_met, {"10_autotuned"}},
        {"12_tf32_wmma", "TF32 tensor cores through WMMA", "snippets/sgemm/12_tf32_wmma.cuh",
         "stepwise::sgemm::tf32_wmma", true, false, tf32_wmma::BM, tf32_wmma::BN, tf32_wmma::BK, true, max_timed_n,
         tf32_wmma::sgemm,
         {kernel_entry("sgemm_kernel", tf32_wmma::sgemm_kernel, dim3(tf32_wmma::threads), tf32_wmma::smem_bytes)},
         tiles(tf32_wmma::BM, tf32_wmma::BN, tf32_wmma::BK, 0, 0, tf32_wmma::threads, tf32_wmma::stages, tf32_wmma::WM,
               tf32_wmma::WN),
         tf32_wmma::requirement, tf32_wmma::requirement_met, {"11_tf32_wmma"}},
        {"13_tf32_wgmma", "TF32 on Hopper's warpgroup MMA (wgmma, TMA, clusters)", "snippets/sgemm/13_tf32_wgmma.cuh",
         "stepwise::sgemm::tf32_wgmma", true, false, 1, 1, 4, false, max_timed_n, tf32_wgmma::sgemm,
         {kernel_entry("sgemm_kernel", tf32_wgmma::sgemm_kernel, dim3(tf32_wgmma::threads), tf32_wgmma::smem_bytes),
          kernel_entry("transpose_b_kernel", tf32_wgmma::transpose_b_kernel, dim3(32, 8))},
         tiles(tf32_wgmma::BM, tf32_wgmma::BN, tf32_wgmma::BK, 0, 0, tf32_wgmma::threads, tf32_wgmma::stages,
               tf32_wgmma::WGM, tf32_wgmma::BN),
         tf32_wgmma::requirement, tf32_wgmma::requirement_met, {"12_tf32_wgmma"}},
    };
    return all;
}

std::string unsupported_reason(const Step& step)
{
    return stepwise::unsupported_reason(step.needs, step.needs_met == nullptr || step.needs_met());
}

CublasSgemm::CublasSgemm(bool tf32) : tf32_(tf32)
{
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetMathMode(handle_, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                 "cublasSetMathMode");
}

CublasSgemm::~CublasSgemm() { cublasDestroy(handle_); }

cudaError_t CublasSgemm::operator()(int M, int N, int K, float alpha, const float* d_A, const float* d_B, float beta,
                                    float* d_C, cudaStream_t stream) const
{
    // Row-major C (M x N) is the column-major N x M matrix C^T = B^T A^T: B^T is row-major B seen as column-major
    // (N x K, leading dimension N), A^T likewise (K x M, leading dimension K). No transposition is needed.
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cublas(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, d_B, CUDA_R_32F, N, d_A, CUDA_R_32F,
                              K, &beta, d_C, CUDA_R_32F, N,
                              tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    return cudaGetLastError();
}

}  // namespace stepwise::sgemm
