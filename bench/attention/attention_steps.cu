#include "attention/attention_steps.hpp"

#include "core/cuda_check.hpp"

#include "../../snippets/attention/01_three_kernels.cuh"
#include "../../snippets/attention/02_fused_online_softmax.cuh"
#include "../../snippets/attention/03_mma_registers.cuh"
#include "../../snippets/attention/04_cp_async_double_buffer.cuh"
#include "../../snippets/attention/05_tma_wgmma.cuh"
#include "../../snippets/attention/06_lean_softmax.cuh"
#include "../../snippets/attention/07_warp_specialized_pingpong.cuh"
#include "../../snippets/attention/08_persistent_longest_first.cuh"
#include "../../snippets/attention/09_three_consumer_groups.cuh"
#include "../../snippets/attention/10_output_through_shared_memory.cuh"

namespace stepwise::attention {
namespace {

//! A step's launcher, which takes the step's own `Shape`, called with the chapter's Problem.
template <typename Shape, cudaError_t (*Launcher)(void*, std::size_t&, const bf16*, const bf16*, const bf16*, bf16*,
                                                  float*, const Shape&, float, cudaStream_t)>
cudaError_t on_problem(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q, const bf16* d_k,
                       const bf16* d_v, bf16* d_o, float* d_lse, const Problem& p, float scale, cudaStream_t stream)
{
    const Shape shape{p.batch, p.heads, p.kv_heads, p.seq, p.head_dim, p.causal};
    return Launcher(d_temp_storage, temp_storage_bytes, d_q, d_k, d_v, d_o, d_lse, shape, scale, stream);
}

}  // namespace

const std::vector<Step>& steps()
{
    namespace tk = three_kernels;
    namespace fo = fused_online_softmax;
    namespace mr = mma_registers;
    namespace cd = cp_async_double_buffer;
    namespace tw = tma_wgmma;
    namespace ls = lean_softmax;
    namespace wp = warp_specialized_pingpong;
    namespace pl = persistent_longest_first;
    namespace tg = three_consumer_groups;
    namespace os = output_through_shared_memory;
    static const std::vector<Step> all = {
        {{"01_three_kernels", "Three kernels: S and P through global memory", "snippets/attention/01_three_kernels.cuh",
          "stepwise::attention::three_kernels"},
         tk::requirement,
         tk::requirement_met,
         on_problem<tk::Shape, tk::attention>,
         {kernel_entry("scores_kernel<128>", tk::scores_kernel<128>, dim3(tk::gemm_threads)),
          kernel_entry("scores_kernel<64>", tk::scores_kernel<64>, dim3(tk::gemm_threads)),
          kernel_entry("softmax_kernel", tk::softmax_kernel, dim3(tk::softmax_threads)),
          kernel_entry("output_kernel<128>", tk::output_kernel<128>, dim3(tk::gemm_threads)),
          kernel_entry("output_kernel<64>", tk::output_kernel<64>, dim3(tk::gemm_threads))}},
        {{"02_fused_online_softmax", "One fused kernel with the online softmax (WMMA, S and P in shared memory)",
          "snippets/attention/02_fused_online_softmax.cuh", "stepwise::attention::fused_online_softmax"},
         fo::requirement,
         fo::requirement_met,
         on_problem<fo::Shape, fo::attention>,
         {kernel_entry("attention_kernel<128>", fo::attention_kernel<128>, dim3(fo::threads), fo::Layout<128>::bytes),
          kernel_entry("attention_kernel<64>", fo::attention_kernel<64>, dim3(fo::threads), fo::Layout<64>::bytes)}},
        {{"03_mma_registers", "mma.sync and ldmatrix: scores, P and O in registers",
          "snippets/attention/03_mma_registers.cuh", "stepwise::attention::mma_registers"},
         mr::requirement,
         mr::requirement_met,
         on_problem<mr::Shape, mr::attention>,
         {kernel_entry("attention_kernel<128>", mr::attention_kernel<128>, dim3(mr::threads)),
          kernel_entry("attention_kernel<64>", mr::attention_kernel<64>, dim3(mr::threads))}},
        {{"04_cp_async_double_buffer", "cp.async: the next tile of K and V copied while this one is computed on",
          "snippets/attention/04_cp_async_double_buffer.cuh", "stepwise::attention::cp_async_double_buffer"},
         cd::requirement,
         cd::requirement_met,
         on_problem<cd::Shape, cd::attention>,
         {kernel_entry("attention_kernel<128>", cd::attention_kernel<128>, dim3(cd::threads), cd::shared_bytes<128>),
          kernel_entry("attention_kernel<64>", cd::attention_kernel<64>, dim3(cd::threads), cd::shared_bytes<64>)}},
        {{"05_tma_wgmma", "TMA loads and wgmma for both products, P from registers",
          "snippets/attention/05_tma_wgmma.cuh", "stepwise::attention::tma_wgmma"},
         tw::requirement,
         tw::requirement_met,
         on_problem<tw::Shape, tw::attention>,
         {kernel_entry("attention_kernel<128>", tw::attention_kernel<128>, dim3(tw::threads),
                       tw::Layout<128>::bytes),
          kernel_entry("attention_kernel<64>", tw::attention_kernel<64>, dim3(tw::threads), tw::Layout<64>::bytes)}},
        {{"06_lean_softmax", "A softmax of few instructions a score, over tiles of 128 keys",
          "snippets/attention/06_lean_softmax.cuh", "stepwise::attention::lean_softmax"},
         ls::requirement,
         ls::requirement_met,
         on_problem<ls::Shape, ls::attention>,
         {kernel_entry("attention_kernel<128, false>", ls::attention_kernel<128, false>, dim3(ls::threads),
                       ls::Layout<128>::bytes),
          kernel_entry("attention_kernel<64, false>", ls::attention_kernel<64, false>, dim3(ls::threads),
                       ls::Layout<64>::bytes)}},
        {{"07_warp_specialized_pingpong",
          "A loading warpgroup, two computing ones taking turns, the next scores issued with P V",
          "snippets/attention/07_warp_specialized_pingpong.cuh", "stepwise::attention::warp_specialized_pingpong"},
         wp::requirement,
         wp::requirement_met,
         on_problem<wp::Shape, wp::attention>,
         {kernel_entry("attention_kernel<128, false>", wp::attention_kernel<128, false>, dim3(wp::threads),
                       wp::Layout<128>::bytes),
          kernel_entry("attention_kernel<64, false>", wp::attention_kernel<64, false>, dim3(wp::threads),
                       wp::Layout<64>::bytes)}},
        {{"08_persistent_longest_first", "A persistent grid: one block an SM walks the work items, longest first",
          "snippets/attention/08_persistent_longest_first.cuh", "stepwise::attention::persistent_longest_first"},
         pl::requirement,
         pl::requirement_met,
         on_problem<pl::Shape, pl::attention>,
         {kernel_entry("attention_kernel<128, false, false>", pl::attention_kernel<128, false, false>,
                       dim3(pl::threads), pl::Layout<128>::bytes),
          kernel_entry("attention_kernel<128, false, true>", pl::attention_kernel<128, false, true>,
                       dim3(pl::threads), pl::Layout<128>::bytes),
          kernel_entry("attention_kernel<64, false, false>", pl::attention_kernel<64, false, false>,
                       dim3(pl::threads), pl::Layout<64>::bytes),
          kernel_entry("attention_kernel<64, false, true>", pl::attention_kernel<64, false, true>,
                       dim3(pl::threads), pl::Layout<64>::bytes)}},
        {{"09_three_consumer_groups", "Head_dim 64: three computing warpgroups take turns, 192 rows a block",
          "snippets/attention/09_three_consumer_groups.cuh", "stepwise::attention::three_consumer_groups"},
         tg::requirement,
         tg::requirement_met,
         on_problem<tg::Shape, tg::attention>,
         {kernel_entry("attention_kernel<128, false, false>", tg::attention_kernel<128, false, false>,
                       dim3(tg::Block<128>::threads), tg::Layout<128>::bytes),
          kernel_entry("attention_kernel<128, false, true>", tg::attention_kernel<128, false, true>,
                       dim3(tg::Block<128>::threads), tg::Layout<128>::bytes),
          kernel_entry("attention_kernel<64, false, false>", tg::attention_kernel<64, false, false>,
                       dim3(tg::Block<64>::threads), tg::Layout<64>::bytes),
          kernel_entry("attention_kernel<64, false, true>", tg::attention_kernel<64, false, true>,
                       dim3(tg::Block<64>::threads), tg::Layout<64>::bytes)}},
        {{"10_output_through_shared_memory", "O staged in shared memory and written by the TMA",
          "snippets/attention/10_output_through_shared_memory.cuh",
          "stepwise::attention::output_through_shared_memory"},
         os::requirement,
         os::requirement_met,
         on_problem<os::Shape, os::attention>,
         {kernel_entry("attention_kernel<128, false, false>", os::attention_kernel<128, false, false>,
                       dim3(os::Block<128>::threads), os::Layout<128>::bytes),
          kernel_entry("attention_kernel<128, false, true>", os::attention_kernel<128, false, true>,
                       dim3(os::Block<128>::threads), os::Layout<128>::bytes),
          kernel_entry("attention_kernel<64, false, false>", os::attention_kernel<64, false, false>,
                       dim3(os::Block<64>::threads), os::Layout<64>::bytes),
          kernel_entry("attention_kernel<64, false, true>", os::attention_kernel<64, false, true>,
                       dim3(os::Block<64>::threads), os::Layout<64>::bytes)}},
    };
    return all;
}

std::string unsupported_reason(const Step& step) { return stepwise::unsupported_reason(step.needs, step.needs_met()); }

}  // namespace stepwise::attention
