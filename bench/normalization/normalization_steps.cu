#include "normalization/normalization_steps.hpp"

#include "../../snippets/normalization/01_three_kernels.cuh"
#include "../../snippets/normalization/02_block_per_row.cuh"
#include "../../snippets/normalization/03_warp_shuffle.cuh"
#include "../../snippets/normalization/04_layout_by_shape.cuh"
#include "../../snippets/normalization/05_one_pass_moments.cuh"
#include "../../snippets/normalization/06_row_in_registers.cuh"
#include "../../snippets/normalization/07_cluster_split.cuh"
#include "../../snippets/normalization/08_bf16.cuh"

#include <string>

namespace stepwise::normalization {
namespace {

//! The kernels of steps 6 and 7, for LayerNorm (Moments) and RMSNorm (Squares): the rows kernel with 16-byte accesses
//! (4 floats) and 16 or 32 values per thread, or 4-byte accesses and 16 values, and the split path's kernels.
//! The name of a step's type as the compiler's report spells it inside a kernel's template arguments.
#define STEPWISE_QUALIFIED(ns, type) "stepwise::normalization::" #ns "::" #type

#define STEPWISE_REGISTER_KERNELS(ns)                                                                                 \
    {kernel_entry("norm_rows_kernel<" STEPWISE_QUALIFIED(ns, Moments) ", 4, 16>", ns::norm_rows_kernel<ns::Moments, 4, 16>, dim3(ns::short_rows_block)), \
     kernel_entry("norm_rows_kernel<" STEPWISE_QUALIFIED(ns, Moments) ", 1, 16>", ns::norm_rows_kernel<ns::Moments, 1, 16>, dim3(ns::short_rows_block)), \
     kernel_entry("norm_rows_kernel<" STEPWISE_QUALIFIED(ns, Moments) ", 4, 32>", ns::norm_rows_kernel<ns::Moments, 4, 32>,                       \
                  dim3(ns::max_block_threads<32>)),                                                                   \
     kernel_entry("norm_rows_kernel<" STEPWISE_QUALIFIED(ns, Squares) ", 4, 16>", ns::norm_rows_kernel<ns::Squares, 4, 16>, dim3(ns::short_rows_block)), \
     kernel_entry("norm_rows_kernel<" STEPWISE_QUALIFIED(ns, Squares) ", 1, 16>", ns::norm_rows_kernel<ns::Squares, 1, 16>, dim3(ns::short_rows_block)), \
     kernel_entry("norm_rows_kernel<" STEPWISE_QUALIFIED(ns, Squares) ", 4, 32>", ns::norm_rows_kernel<ns::Squares, 4, 32>,                       \
                  dim3(ns::max_block_threads<32>)),                                                                   \
     kernel_entry("split_partials_kernel<" STEPWISE_QUALIFIED(ns, Moments) ", 4>", ns::split_partials_kernel<ns::Moments, 4>,                     \
                  dim3(ns::split_block_threads)),                                                                     \
     kernel_entry("split_partials_kernel<" STEPWISE_QUALIFIED(ns, Squares) ", 4>", ns::split_partials_kernel<ns::Squares, 4>,                     \
                  dim3(ns::split_block_threads)),                                                                     \
     kernel_entry("split_merge_kernel<" STEPWISE_QUALIFIED(ns, Moments) ">", ns::split_merge_kernel<ns::Moments>, dim3(ns::split_block_threads)), \
     kernel_entry("split_merge_kernel<" STEPWISE_QUALIFIED(ns, Squares) ">", ns::split_merge_kernel<ns::Squares>, dim3(ns::split_block_threads)), \
     kernel_entry("split_store_kernel<true, 4>", ns::split_store_kernel<true, 4>, dim3(ns::split_block_threads)),     \
     kernel_entry("split_store_kernel<false, 4>", ns::split_store_kernel<false, 4>, dim3(ns::split_block_threads))}

//! Step 7's kernels: step 6's, and the cluster kernels of LayerNorm and RMSNorm (16-byte accesses, 32 values a
//! thread) with the shared memory of their largest blocks.
std::vector<KernelEntry> cluster_split_kernels()
{
    namespace c = cluster_split;
    std::vector<KernelEntry> out = STEPWISE_REGISTER_KERNELS(cluster_split);
    const dim3 cluster(c::cluster_block_threads);
    out.push_back(kernel_entry("cluster_norm_kernel<" STEPWISE_QUALIFIED(cluster_split, Moments) ", 4, 32>",
                               c::cluster_norm_kernel<c::Moments, 4, 32>, cluster,
                               configured_shared_bytes(c::cluster_config<c::Moments, 4, 32>, c::cluster_block_threads)));
    out.push_back(kernel_entry("cluster_norm_kernel<" STEPWISE_QUALIFIED(cluster_split, Squares) ", 4, 32>",
                               c::cluster_norm_kernel<c::Squares, 4, 32>, cluster,
                               configured_shared_bytes(c::cluster_config<c::Squares, 4, 32>, c::cluster_block_threads)));
    return out;
}

//! Step 8's rows, cluster and split kernels for one element type `T` (named `type`): 16-byte accesses of `width`
//! values with 16 and 32 values a thread (16 with gamma and beta loaded ahead in rows of up to 128 threads, 8 in
//! RMSNorm's rows of up to 1024 values and in short fp32 rows, 64 in bf16 rows longer than 65536, or 16384 where the
//! memory is fast), and element-wide accesses with 16.
template <typename T>
void add_bf16_step_kernels(std::vector<KernelEntry>& out, const std::string& type)
{
    namespace s = bf16_in_out;
    constexpr int w = 16 / sizeof(T);
    const dim3 rows16(s::short_rows_block), rows32(s::max_block_threads<32>), split(s::split_block_threads);
    const std::string q = "stepwise::normalization::bf16_in_out::";
    const std::string t = type + ", " + q, wide = ", " + std::to_string(w);
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16, false>", s::norm_rows_kernel<T, s::Moments, w, 16, false>, rows16));
    if constexpr (s::parameters_ahead<T, s::Moments, w, 16>) {
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16, true>", s::norm_rows_kernel<T, s::Moments, w, 16, true>, rows16));
    }
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments, 1, 16, false>", s::norm_rows_kernel<T, s::Moments, 1, 16, false>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 32, false>", s::norm_rows_kernel<T, s::Moments, w, 32, false>, rows32));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16, false>", s::norm_rows_kernel<T, s::Squares, w, 16, false>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16, true>", s::norm_rows_kernel<T, s::Squares, w, 16, true>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares, 1, 16, false>", s::norm_rows_kernel<T, s::Squares, 1, 16, false>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 32, false>", s::norm_rows_kernel<T, s::Squares, w, 32, false>, rows32));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 8, true>", s::norm_rows_kernel<T, s::Squares, w, 8, true>, rows16));
    if constexpr (sizeof(T) == 4) {
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 8, true>", s::norm_rows_kernel<T, s::Moments, w, 8, true>, rows16));
    }
    const dim3 cluster(s::cluster_block_threads);
    out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Moments" + wide + ", 32>", s::cluster_norm_kernel<T, s::Moments, w, 32>,
                               cluster, configured_shared_bytes(s::cluster_config<T, s::Moments, w, 32>, s::cluster_block_threads)));
    out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Squares" + wide + ", 32>", s::cluster_norm_kernel<T, s::Squares, w, 32>,
                               cluster, configured_shared_bytes(s::cluster_config<T, s::Squares, w, 32>, s::cluster_block_threads)));
    if constexpr (sizeof(T) == 2) {
        out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Moments" + wide + ", 64>", s::cluster_norm_kernel<T, s::Moments, w, 64>,
                                   cluster, configured_shared_bytes(s::cluster_config<T, s::Moments, w, 64>, s::cluster_block_threads)));
        out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Squares" + wide + ", 64>", s::cluster_norm_kernel<T, s::Squares, w, 64>,
                                   cluster, configured_shared_bytes(s::cluster_config<T, s::Squares, w, 64>, s::cluster_block_threads)));
    }
    out.push_back(kernel_entry("split_partials_kernel<" + t + "Moments" + wide + ">", s::split_partials_kernel<T, s::Moments, w>, split));
    out.push_back(kernel_entry("split_partials_kernel<" + t + "Squares" + wide + ">", s::split_partials_kernel<T, s::Squares, w>, split));
    out.push_back(kernel_entry("split_merge_kernel<" + t + "Moments>", s::split_merge_kernel<T, s::Moments>, split));
    out.push_back(kernel_entry("split_merge_kernel<" + t + "Squares>", s::split_merge_kernel<T, s::Squares>, split));
    out.push_back(kernel_entry("split_store_kernel<" + type + ", true" + wide + ">", s::split_store_kernel<T, true, w>, split));
    out.push_back(kernel_entry("split_store_kernel<" + type + ", false" + wide + ">", s::split_store_kernel<T, false, w>, split));
}

std::vector<KernelEntry> bf16_kernels()
{
    std::vector<KernelEntry> out;
    add_bf16_step_kernels<float>(out, "float");
    add_bf16_step_kernels<__nv_bfloat16>(out, "__nv_bfloat16");
    return out;
}

}  // namespace

const std::vector<Step>& steps()
{
    namespace tk = three_kernels;
    namespace bp = block_per_row;
    namespace ws = warp_shuffle;
    namespace ls = layout_by_shape;
    namespace op = one_pass_moments;
    static const std::vector<Step> all = {
        {{"01_three_kernels", "A kernel per pass, one thread per row", "snippets/normalization/01_three_kernels.cuh",
          "stepwise::normalization::three_kernels"},
         tk::layer_norm,
         tk::rms_norm,
         nullptr,
         nullptr,
         {kernel_entry("mean_kernel", tk::mean_kernel, dim3(tk::block_threads)),
          kernel_entry("rstd_kernel", tk::rstd_kernel, dim3(tk::block_threads)),
          kernel_entry("rms_kernel", tk::rms_kernel, dim3(tk::block_threads)),
          kernel_entry("normalize_kernel", tk::normalize_kernel, dim3(tk::block_threads))},
         false},
        {{"02_block_per_row", "A block per row, shared-memory tree sums", "snippets/normalization/02_block_per_row.cuh",
          "stepwise::normalization::block_per_row"},
         bp::layer_norm,
         bp::rms_norm,
         nullptr,
         nullptr,
         {kernel_entry("layer_norm_kernel", bp::layer_norm_kernel, dim3(bp::block_threads)),
          kernel_entry("rms_norm_kernel", bp::rms_norm_kernel, dim3(bp::block_threads))},
         false},
        {{"03_warp_shuffle", "Warp-shuffle sums", "snippets/normalization/03_warp_shuffle.cuh",
          "stepwise::normalization::warp_shuffle"},
         ws::layer_norm,
         ws::rms_norm,
         nullptr,
         nullptr,
         {kernel_entry("layer_norm_kernel", ws::layer_norm_kernel, dim3(ws::block_threads)),
          kernel_entry("rms_norm_kernel", ws::rms_norm_kernel, dim3(ws::block_threads))},
         false},
        {{"04_layout_by_shape", "A warp per short row, a block per long one",
          "snippets/normalization/04_layout_by_shape.cuh", "stepwise::normalization::layout_by_shape"},
         ls::layer_norm,
         ls::rms_norm,
         nullptr,
         nullptr,
         {kernel_entry("layer_norm_warp_kernel", ls::layer_norm_warp_kernel, dim3(ls::block_threads)),
          kernel_entry("rms_norm_warp_kernel", ls::rms_norm_warp_kernel, dim3(ls::block_threads)),
          kernel_entry("layer_norm_block_kernel", ls::layer_norm_block_kernel, dim3(ls::block_threads)),
          kernel_entry("rms_norm_block_kernel", ls::rms_norm_block_kernel, dim3(ls::block_threads))},
         false},
        {{"05_one_pass_moments", "Mean and variance in one pass (Welford, Chan)",
          "snippets/normalization/05_one_pass_moments.cuh", "stepwise::normalization::one_pass_moments"},
         op::layer_norm,
         op::rms_norm,
         nullptr,
         nullptr,
         {kernel_entry("layer_norm_warp_kernel", op::layer_norm_warp_kernel, dim3(op::block_threads)),
          kernel_entry("rms_norm_warp_kernel", op::rms_norm_warp_kernel, dim3(op::block_threads)),
          kernel_entry("layer_norm_block_kernel", op::layer_norm_block_kernel, dim3(op::block_threads)),
          kernel_entry("rms_norm_block_kernel", op::rms_norm_block_kernel, dim3(op::block_threads))},
         false},
        {{"06_row_in_registers", "The row read once into registers, 16-byte loads",
          "snippets/normalization/06_row_in_registers.cuh", "stepwise::normalization::row_in_registers"},
         row_in_registers::layer_norm,
         row_in_registers::rms_norm,
         nullptr,
         nullptr,
         STEPWISE_REGISTER_KERNELS(row_in_registers),
         true},
        {{"07_cluster_split", "Long rows split over a thread-block cluster",
          "snippets/normalization/07_cluster_split.cuh", "stepwise::normalization::cluster_split"},
         cluster_split::layer_norm,
         cluster_split::rms_norm,
         nullptr,
         nullptr,
         cluster_split_kernels(),
         true},
        {{"08_bf16", "bf16 in and out, any shape", "snippets/normalization/08_bf16.cuh",
          "stepwise::normalization::bf16_in_out"},
         bf16_in_out::layer_norm,
         bf16_in_out::rms_norm,
         bf16_in_out::layer_norm,
         bf16_in_out::rms_norm,
         bf16_kernels(),
         true},
    };
    return all;
}

#undef STEPWISE_REGISTER_KERNELS
#undef STEPWISE_QUALIFIED

}  // namespace stepwise::normalization
