#include "attention_backward/attention_backward_steps.hpp"

#include "core/cuda_check.hpp"

#include "../../snippets/attention_backward/01_products_through_global_memory.cuh"
#include "../../snippets/attention_backward/02_fused_key_tiles.cuh"
#include "../../snippets/attention_backward/03_mma_registers.cuh"
#include "../../snippets/attention_backward/04_cp_async_double_buffer.cuh"
#include "../../snippets/attention_backward/05_dq_added_16_bytes_at_a_time.cuh"
#include "../../snippets/attention_backward/06_mask_only_on_cut_tiles.cuh"

namespace stepwise::attention_backward {
namespace {

//! A step's launcher, which takes the step's own `Shape`, called with the chapter's Problem.
template <typename Shape,
          cudaError_t (*Launcher)(void*, std::size_t&, const bf16*, const bf16*, const bf16*, const bf16*,
                                  const float*, const bf16*, bf16*, bf16*, bf16*, const Shape&, float, cudaStream_t)>
cudaError_t on_problem(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q, const bf16* d_k,
                       const bf16* d_v, const bf16* d_o, const float* d_lse, const bf16* d_do, bf16* d_dq, bf16* d_dk,
                       bf16* d_dv, const Problem& p, float scale, cudaStream_t stream)
{
    const Shape shape{p.batch, p.heads, p.kv_heads, p.seq, p.head_dim, p.causal};
    return Launcher(d_temp_storage, temp_storage_bytes, d_q, d_k, d_v, d_o, d_lse, d_do, d_dq, d_dk, d_dv, shape, scale,
                    stream);
}

}  // namespace

const std::vector<Step>& steps()
{
    namespace pg = products_through_global_memory;
    namespace fk = fused_key_tiles;
    namespace mr = mma_registers;
    namespace cd = cp_async_double_buffer;
    namespace wa = dq_added_16_bytes_at_a_time;
    namespace mc = mask_only_on_cut_tiles;
    const dim3 gemm(pg::gemm_threads), dot(pg::dot_threads), fused(fk::gemm_threads), convert(fk::convert_threads),
        mma(mr::gemm_threads), copying(cd::gemm_threads), adding(wa::gemm_threads), masking(mc::gemm_threads);
    static const std::vector<Step> all = {
        {{"01_products_through_global_memory", "The formulas in five kernels: P and dS through global memory",
          "snippets/attention_backward/01_products_through_global_memory.cuh",
          "stepwise::attention_backward::products_through_global_memory"},
         pg::requirement,
         pg::requirement_met,
         on_problem<pg::Shape, pg::attention_backward>,
         true,
         {kernel_entry("row_dot_kernel<128>", pg::row_dot_kernel<128>, dot),
          kernel_entry("row_dot_kernel<64>", pg::row_dot_kernel<64>, dot),
          kernel_entry("probabilities_kernel<128>", pg::probabilities_kernel<128>, gemm),
          kernel_entry("probabilities_kernel<64>", pg::probabilities_kernel<64>, gemm),
          kernel_entry("score_gradients_kernel<128>", pg::score_gradients_kernel<128>, gemm),
          kernel_entry("score_gradients_kernel<64>", pg::score_gradients_kernel<64>, gemm),
          kernel_entry("key_gradient_kernel<128>", pg::key_gradient_kernel<128>, gemm),
          kernel_entry("key_gradient_kernel<64>", pg::key_gradient_kernel<64>, gemm),
          kernel_entry("query_gradient_kernel<128>", pg::query_gradient_kernel<128>, gemm),
          kernel_entry("query_gradient_kernel<64>", pg::query_gradient_kernel<64>, gemm)}},
        {{"02_fused_key_tiles", "One fused kernel in FlashAttention-2's order: P and dS in shared memory",
          "snippets/attention_backward/02_fused_key_tiles.cuh", "stepwise::attention_backward::fused_key_tiles"},
         fk::requirement,
         fk::requirement_met,
         on_problem<fk::Shape, fk::attention_backward>,
         false,
         {kernel_entry("row_dot_kernel<128>", fk::row_dot_kernel<128>, dot),
          kernel_entry("row_dot_kernel<64>", fk::row_dot_kernel<64>, dot),
          kernel_entry("key_tile_kernel<128>", fk::key_tile_kernel<128>, fused, fk::Layout<128>::bytes),
          kernel_entry("key_tile_kernel<64>", fk::key_tile_kernel<64>, fused, fk::Layout<64>::bytes),
          kernel_entry("convert_dq_kernel", fk::convert_dq_kernel, convert)}},
        {{"03_mma_registers", "mma.sync with each warp owning 16 keys: S, P, dP and dS in registers",
          "snippets/attention_backward/03_mma_registers.cuh", "stepwise::attention_backward::mma_registers"},
         mr::requirement,
         mr::requirement_met,
         on_problem<mr::Shape, mr::attention_backward>,
         false,
         {kernel_entry("row_dot_kernel<128>", mr::row_dot_kernel<128>, dot),
          kernel_entry("row_dot_kernel<64>", mr::row_dot_kernel<64>, dot),
          kernel_entry("key_tile_kernel<128>", mr::key_tile_kernel<128>, mma, mr::Layout<128>::bytes),
          kernel_entry("key_tile_kernel<64>", mr::key_tile_kernel<64>, mma, mr::Layout<64>::bytes),
          kernel_entry("convert_dq_kernel", mr::convert_dq_kernel, convert)}},
        {{"04_cp_async_double_buffer", "cp.async: the next query tile copied while this one is computed on",
          "snippets/attention_backward/04_cp_async_double_buffer.cuh",
          "stepwise::attention_backward::cp_async_double_buffer"},
         cd::requirement,
         cd::requirement_met,
         on_problem<cd::Shape, cd::attention_backward>,
         false,
         {kernel_entry("row_dot_kernel<128>", cd::row_dot_kernel<128>, dot),
          kernel_entry("row_dot_kernel<64>", cd::row_dot_kernel<64>, dot),
          kernel_entry("key_tile_kernel<128>", cd::key_tile_kernel<128>, copying, cd::Layout<128>::bytes),
          kernel_entry("key_tile_kernel<64>", cd::key_tile_kernel<64>, copying, cd::Layout<64>::bytes),
          kernel_entry("convert_dq_kernel", cd::convert_dq_kernel, convert)}},
        {{"05_dq_added_16_bytes_at_a_time", "dQ's atomic additions four consecutive floats at a time",
          "snippets/attention_backward/05_dq_added_16_bytes_at_a_time.cuh",
          "stepwise::attention_backward::dq_added_16_bytes_at_a_time"},
         wa::requirement,
         wa::requirement_met,
         on_problem<wa::Shape, wa::attention_backward>,
         false,
         {kernel_entry("row_dot_kernel<128>", wa::row_dot_kernel<128>, dot),
          kernel_entry("row_dot_kernel<64>", wa::row_dot_kernel<64>, dot),
          kernel_entry("key_tile_kernel<128>", wa::key_tile_kernel<128>, adding, wa::Layout<128>::bytes),
          kernel_entry("key_tile_kernel<64>", wa::key_tile_kernel<64>, adding, wa::Layout<64>::bytes),
          kernel_entry("convert_dq_kernel", wa::convert_dq_kernel, convert)}},
        {{"06_mask_only_on_cut_tiles", "The mask tested only in the tiles it cuts",
          "snippets/attention_backward/06_mask_only_on_cut_tiles.cuh",
          "stepwise::attention_backward::mask_only_on_cut_tiles"},
         mc::requirement,
         mc::requirement_met,
         on_problem<mc::Shape, mc::attention_backward>,
         false,
         {kernel_entry("row_dot_kernel<128>", mc::row_dot_kernel<128>, dot),
          kernel_entry("row_dot_kernel<64>", mc::row_dot_kernel<64>, dot),
          kernel_entry("key_tile_kernel<128>", mc::key_tile_kernel<128>, masking, mc::Layout<128>::bytes),
          kernel_entry("key_tile_kernel<64>", mc::key_tile_kernel<64>, masking, mc::Layout<64>::bytes),
          kernel_entry("convert_dq_kernel", mc::convert_dq_kernel, convert)}},
    };
    return all;
}

std::string unsupported_reason(const Step& step) { return stepwise::unsupported_reason(step.needs, step.needs_met()); }

}  // namespace stepwise::attention_backward
