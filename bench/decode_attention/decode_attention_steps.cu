#include "decode_attention/decode_attention_steps.hpp"

#include "core/cuda_check.hpp"

#include "../../snippets/decode_attention/01_three_passes.cuh"
#include "../../snippets/decode_attention/02_online_softmax.cuh"
#include "../../snippets/decode_attention/03_grouped_heads.cuh"
#include "../../snippets/decode_attention/04_split_kv.cuh"
#include "../../snippets/decode_attention/05_wide_loads.cuh"
#include "../../snippets/decode_attention/06_loads_ahead.cuh"
#include "../../snippets/decode_attention/07_tensor_cores.cuh"
#include "../../snippets/decode_attention/08_merge_launched_early.cuh"

namespace stepwise::decode_attention {
namespace {

//! A step's launcher, which takes the step's own `Cache` and `Shape`, called with the chapter's Problem.
template <typename Cache, typename Shape,
          cudaError_t (*Launcher)(void*, std::size_t&, const bf16*, const Cache&, bf16*, float*, const Shape&, float,
                                  cudaStream_t)>
cudaError_t on_problem(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                       const DevicePages& pages, bf16* d_o, float* d_lse, const Problem& p, float scale,
                       cudaStream_t stream)
{
    const Cache cache{pages.d_k, pages.d_v, pages.d_page_table, pages.d_lengths, p.num_pages, p.max_pages,
                      p.page_size};
    const Shape shape{p.batch, p.q_len, p.heads, p.kv_heads, p.head_dim};
    return Launcher(d_temp_storage, temp_storage_bytes, d_q, cache, d_o, d_lse, shape, scale, stream);
}

//! on_problem() of the launcher of namespace `ns`.
#define STEPWISE_ON_PROBLEM(ns) on_problem<ns::Cache, ns::Shape, ns::decode_attention>

//! The kernels of steps 5 and 6 (namespace `ns`): the split kernel for head_dim 64 and 128 (8 and 16 lanes a key),
//! each keeping `few_rows` or `group_rows` running states a lane, and the merge.
#define STEPWISE_WIDE_STEP_KERNELS(ns)                                                                                \
    {kernel_entry("split_kernel<8, 4>", ns::split_kernel<8, ns::few_rows>, dim3(ns::row_threads)),                   \
     kernel_entry("split_kernel<8, 8>", ns::split_kernel<8, ns::group_rows>, dim3(ns::row_threads)),                 \
     kernel_entry("split_kernel<16, 4>", ns::split_kernel<16, ns::few_rows>, dim3(ns::row_threads)),                 \
     kernel_entry("split_kernel<16, 8>", ns::split_kernel<16, ns::group_rows>, dim3(ns::row_threads)),               \
     kernel_entry("merge_kernel", ns::merge_kernel, dim3(ns::merge_threads))}

}  // namespace

const std::vector<Step>& steps()
{
    namespace tp = three_passes;
    namespace os = online_softmax;
    namespace gh = grouped_heads;
    namespace sk = split_kv;
    namespace wl = wide_loads;
    namespace la = loads_ahead;
    namespace tc = tensor_cores;
    namespace ml = merge_launched_early;
    static_assert(wl::chunk_values == 8 && la::chunk_values == 8 && wl::few_rows == 4 && wl::group_rows == 8 &&
                      la::few_rows == 4 && la::group_rows == 8,
                  "the kernel names below spell these");
    static const std::vector<Step> all = {
        {{"01_three_passes", "Three kernels: scores and probabilities through global memory",
          "snippets/decode_attention/01_three_passes.cuh", "stepwise::decode_attention::three_passes"},
         STEPWISE_ON_PROBLEM(tp),
         2,
         true,
         // The output kernel has a thread a column of head_dim (128 shown).
         {kernel_entry("scores_kernel", tp::scores_kernel, dim3(tp::scores_threads)),
          kernel_entry("softmax_kernel", tp::softmax_kernel, dim3(tp::softmax_threads)),
          kernel_entry("output_kernel", tp::output_kernel, dim3(128))}},
        {{"02_online_softmax", "One kernel, a block a row, with the online softmax",
          "snippets/decode_attention/02_online_softmax.cuh", "stepwise::decode_attention::online_softmax"},
         STEPWISE_ON_PROBLEM(os),
         2,
         false,
         {kernel_entry("row_kernel<2>", os::row_kernel<2>, dim3(os::row_threads)),
          kernel_entry("row_kernel<4>", os::row_kernel<4>, dim3(os::row_threads))}},
        {{"03_grouped_heads", "A block for the query heads of a K/V head: the cache read once a group",
          "snippets/decode_attention/03_grouped_heads.cuh", "stepwise::decode_attention::grouped_heads"},
         STEPWISE_ON_PROBLEM(gh),
         2,
         false,
         {kernel_entry("group_kernel<2>", gh::group_kernel<2>, dim3(gh::row_threads)),
          kernel_entry("group_kernel<4>", gh::group_kernel<4>, dim3(gh::row_threads))}},
        {{"04_split_kv", "The keys split across blocks and merged (split-KV)",
          "snippets/decode_attention/04_split_kv.cuh", "stepwise::decode_attention::split_kv"},
         STEPWISE_ON_PROBLEM(sk),
         2,
         true,
         {kernel_entry("split_kernel<2>", sk::split_kernel<2>, dim3(sk::row_threads)),
          kernel_entry("split_kernel<4>", sk::split_kernel<4>, dim3(sk::row_threads)),
          kernel_entry("merge_kernel", sk::merge_kernel, dim3(sk::merge_threads))}},
        {{"05_wide_loads", "16-byte loads: eight columns of a key a lane, a running state a row of the block",
          "snippets/decode_attention/05_wide_loads.cuh", "stepwise::decode_attention::wide_loads"},
         STEPWISE_ON_PROBLEM(wl),
         16,
         true,
         STEPWISE_WIDE_STEP_KERNELS(wl)},
        {{"06_loads_ahead", "The next keys' loads issued before the current key's arithmetic",
          "snippets/decode_attention/06_loads_ahead.cuh", "stepwise::decode_attention::loads_ahead"},
         STEPWISE_ON_PROBLEM(la),
         16,
         true,
         STEPWISE_WIDE_STEP_KERNELS(la)},
        {{"07_tensor_cores", "The group's rows times tiles of 16 keys on the tensor cores, the tiles staged by cp.async",
          "snippets/decode_attention/07_tensor_cores.cuh", "stepwise::decode_attention::tensor_cores"},
         STEPWISE_ON_PROBLEM(tc),
         16,
         true,
         {kernel_entry("split_kernel<64>", tc::split_kernel<64>, dim3(tc::block_threads), tc::shared_bytes(64)),
          kernel_entry("split_kernel<128>", tc::split_kernel<128>, dim3(tc::block_threads), tc::shared_bytes(128)),
          kernel_entry("merge_kernel", tc::merge_kernel, dim3(tc::merge_threads))},
         tc::requirement,
         tc::requirement_met},
        {{"08_merge_launched_early", "The merge launched while the split kernel ends (programmatic dependent launch)",
          "snippets/decode_attention/08_merge_launched_early.cuh", "stepwise::decode_attention::merge_launched_early"},
         STEPWISE_ON_PROBLEM(ml),
         16,
         true,
         {kernel_entry("split_kernel<64>", ml::split_kernel<64>, dim3(ml::block_threads), ml::shared_bytes(64)),
          kernel_entry("split_kernel<128>", ml::split_kernel<128>, dim3(ml::block_threads), ml::shared_bytes(128)),
          kernel_entry("merge_kernel", ml::merge_kernel, dim3(ml::merge_threads))},
         ml::requirement,
         ml::requirement_met},
    };
    return all;
}

std::string unsupported_reason(const Step& step)
{
    return stepwise::unsupported_reason(step.needs, step.needs_met == nullptr || step.needs_met());
}

#undef STEPWISE_WIDE_STEP_KERNELS
#undef STEPWISE_ON_PROBLEM

}  // namespace stepwise::decode_attention
