#include "softmax/softmax_steps.hpp"

#include "../../snippets/softmax/01_three_kernels.cuh"
#include "../../snippets/softmax/02_block_per_row.cuh"
#include "../../snippets/softmax/03_warp_shuffle.cuh"
#include "../../snippets/softmax/04_layout_by_shape.cuh"
#include "../../snippets/softmax/05_online_softmax.cuh"
#include "../../snippets/softmax/06_row_in_registers.cuh"
#include "../../snippets/softmax/07_cluster_split.cuh"
#include "../../snippets/softmax/08_bf16.cuh"
#include "../../snippets/softmax/09_any_row_alignment.cuh"
#include "../../snippets/softmax/10_edge_loads_together.cuh"
#include "../../snippets/softmax/11_three_cluster_blocks_an_sm.cuh"
#include "../../snippets/softmax/12_one_load_copy_a_row.cuh"
#include "../../snippets/softmax/13_row_ends_peeled.cuh"
#include "../../snippets/softmax/14_row_ends_staged.cuh"

#include <string>

namespace stepwise::softmax {
namespace {

//! The kernels of steps 6 and 7: the rows kernel with 16-byte accesses (4 floats) and 16 or 32 values per thread, or
//! 4-byte accesses and 16 values, and the split path's kernels with either access.
#define STEPWISE_REGISTER_KERNELS(ns)                                                                               \
    {kernel_entry("softmax_rows_kernel<4, 16>", ns::softmax_rows_kernel<4, 16>, dim3(ns::short_rows_block)),       \
     kernel_entry("softmax_rows_kernel<1, 16>", ns::softmax_rows_kernel<1, 16>, dim3(ns::short_rows_block)),       \
     kernel_entry("softmax_rows_kernel<4, 32>", ns::softmax_rows_kernel<4, 32>, dim3(ns::max_block_threads<32>)),  \
     kernel_entry("split_partials_kernel<4>", ns::split_partials_kernel<4>, dim3(ns::split_block_threads)),        \
     kernel_entry("split_partials_kernel<1>", ns::split_partials_kernel<1>, dim3(ns::split_block_threads)),        \
     kernel_entry("split_merge_kernel", ns::split_merge_kernel, dim3(ns::split_block_threads)),                    \
     kernel_entry("split_store_kernel<4>", ns::split_store_kernel<4>, dim3(ns::split_block_threads)),              \
     kernel_entry("split_store_kernel<1>", ns::split_store_kernel<1>, dim3(ns::split_block_threads))}

//! Step 7's kernels: step 6's, and the cluster kernel (16-byte accesses, 32 values a thread) with the shared memory
//! of its largest blocks.
std::vector<KernelEntry> cluster_split_kernels()
{
    namespace c = cluster_split;
    std::vector<KernelEntry> out = STEPWISE_REGISTER_KERNELS(cluster_split);
    out.push_back(kernel_entry("cluster_rows_kernel<4, 32>", c::cluster_rows_kernel<4, 32>, dim3(c::cluster_block_threads),
                               configured_shared_bytes(c::cluster_config<4, 32>, c::cluster_block_threads)));
    return out;
}

//! Step 8's kernels in namespace `ns`: those of step 7 for fp32 (16-byte accesses of 4 values) and for bf16 (of 8
//! values), with 8 values a thread in short fp32 rows and 64 in bf16 rows longer than a block. Each name ends its
//! template arguments with `suffix`: step 9's kernels take one more, `Windowed` (", false" for these).
#define STEPWISE_STEP_8_KERNELS(ns)                                                                                   \
std::vector<KernelEntry> step_8_kernels_in_##ns(const std::string& suffix)                                            \
{                                                                                                                     \
    namespace s = ns;                                                                                                 \
    using bf16 = __nv_bfloat16;                                                                                       \
    const dim3 rows16(s::short_rows_block), rows32(s::max_block_threads<32>), split(s::split_block_threads);          \
    const dim3 cluster(s::cluster_block_threads);                                                                     \
    const std::string b = "__nv_bfloat16", e = suffix + ">";                                                          \
    return {kernel_entry("cluster_rows_kernel<float, 4, 32" + e, s::cluster_rows_kernel<float, 4, 32>, cluster,       \
                         configured_shared_bytes(s::cluster_config<float, 4, 32>, s::cluster_block_threads)),         \
            kernel_entry("cluster_rows_kernel<" + b + ", 8, 32" + e, s::cluster_rows_kernel<bf16, 8, 32>, cluster,    \
                         configured_shared_bytes(s::cluster_config<bf16, 8, 32>, s::cluster_block_threads)),          \
            kernel_entry("cluster_rows_kernel<" + b + ", 8, 64" + e, s::cluster_rows_kernel<bf16, 8, 64>, cluster,    \
                         configured_shared_bytes(s::cluster_config<bf16, 8, 64>, s::cluster_block_threads)),          \
            kernel_entry("softmax_rows_kernel<float, 4, 8" + e, s::softmax_rows_kernel<float, 4, 8>, rows16),         \
            kernel_entry("softmax_rows_kernel<float, 4, 16" + e, s::softmax_rows_kernel<float, 4, 16>, rows16),       \
            kernel_entry("softmax_rows_kernel<float, 1, 16" + e, s::softmax_rows_kernel<float, 1, 16>, rows16),       \
            kernel_entry("softmax_rows_kernel<float, 4, 32" + e, s::softmax_rows_kernel<float, 4, 32>, rows32),       \
            kernel_entry("softmax_rows_kernel<" + b + ", 8, 16" + e, s::softmax_rows_kernel<bf16, 8, 16>, rows16),    \
            kernel_entry("softmax_rows_kernel<" + b + ", 1, 16" + e, s::softmax_rows_kernel<bf16, 1, 16>, rows16),    \
            kernel_entry("softmax_rows_kernel<" + b + ", 8, 32" + e, s::softmax_rows_kernel<bf16, 8, 32>, rows32),    \
            kernel_entry("split_partials_kernel<float, 4" + e, s::split_partials_kernel<float, 4>, split),            \
            kernel_entry("split_partials_kernel<float, 1" + e, s::split_partials_kernel<float, 1>, split),            \
            kernel_entry("split_partials_kernel<" + b + ", 8" + e, s::split_partials_kernel<bf16, 8>, split),         \
            kernel_entry("split_partials_kernel<" + b + ", 1" + e, s::split_partials_kernel<bf16, 1>, split),         \
            kernel_entry("split_merge_kernel", s::split_merge_kernel, split),                                         \
            kernel_entry("split_store_kernel<float, 4" + e, s::split_store_kernel<float, 4>, split),                  \
            kernel_entry("split_store_kernel<float, 1" + e, s::split_store_kernel<float, 1>, split),                  \
            kernel_entry("split_store_kernel<" + b + ", 8" + e, s::split_store_kernel<bf16, 8>, split),               \
            kernel_entry("split_store_kernel<" + b + ", 1" + e, s::split_store_kernel<bf16, 1>, split)};              \
}

STEPWISE_STEP_8_KERNELS(bf16_in_out)
STEPWISE_STEP_8_KERNELS(any_row_alignment)
STEPWISE_STEP_8_KERNELS(edge_loads_together)
STEPWISE_STEP_8_KERNELS(three_cluster_blocks_an_sm)
STEPWISE_STEP_8_KERNELS(one_load_copy_a_row)
STEPWISE_STEP_8_KERNELS(row_ends_peeled)
STEPWISE_STEP_8_KERNELS(row_ends_staged)
#undef STEPWISE_STEP_8_KERNELS

//! Step 9's kernels in namespace `ns` (steps 9 to 14): step 8's, and those that read rows through their 16-byte
//! windows (`Windowed`), which rows at any alignment take.
#define STEPWISE_STEP_9_KERNELS(ns)                                                                                   \
std::vector<KernelEntry> step_9_kernels_in_##ns()                                                                     \
{                                                                                                                     \
    namespace s = ns;                                                                                                 \
    using bf16 = __nv_bfloat16;                                                                                       \
    const dim3 rows16(s::short_rows_block), rows32(s::max_block_threads<32>), split(s::split_block_threads);          \
    const dim3 cluster(s::cluster_block_threads);                                                                     \
    const std::string b = "__nv_bfloat16";                                                                            \
    std::vector<KernelEntry> out = step_8_kernels_in_##ns(", false");                                                 \
    std::vector<KernelEntry> windowed = {                                                                             \
        kernel_entry("cluster_rows_kernel<float, 4, 32, true>", s::cluster_rows_kernel<float, 4, 32, true>, cluster,  \
                     configured_shared_bytes(s::cluster_config<float, 4, 32>, s::cluster_block_threads)),             \
        kernel_entry("cluster_rows_kernel<" + b + ", 8, 32, true>", s::cluster_rows_kernel<bf16, 8, 32, true>,        \
                     cluster, configured_shared_bytes(s::cluster_config<bf16, 8, 32>, s::cluster_block_threads)),     \
        kernel_entry("cluster_rows_kernel<" + b + ", 8, 64, true>", s::cluster_rows_kernel<bf16, 8, 64, true>,        \
                     cluster, configured_shared_bytes(s::cluster_config<bf16, 8, 64>, s::cluster_block_threads)),     \
        kernel_entry("softmax_rows_kernel<float, 4, 8, true>", s::softmax_rows_kernel<float, 4, 8, true>, rows16),    \
        kernel_entry("softmax_rows_kernel<float, 4, 16, true>", s::softmax_rows_kernel<float, 4, 16, true>, rows16),  \
        kernel_entry("softmax_rows_kernel<float, 4, 32, true>", s::softmax_rows_kernel<float, 4, 32, true>, rows32),  \
        kernel_entry("softmax_rows_kernel<" + b + ", 8, 16, true>", s::softmax_rows_kernel<bf16, 8, 16, true>,        \
                     rows16),                                                                                         \
        kernel_entry("softmax_rows_kernel<" + b + ", 8, 32, true>", s::softmax_rows_kernel<bf16, 8, 32, true>,        \
                     rows32),                                                                                         \
        kernel_entry("split_partials_kernel<float, 4, true>", s::split_partials_kernel<float, 4, true>, split),       \
        kernel_entry("split_partials_kernel<" + b + ", 8, true>", s::split_partials_kernel<bf16, 8, true>, split),    \
        kernel_entry("split_store_kernel<float, 4, true>", s::split_store_kernel<float, 4, true>, split),             \
        kernel_entry("split_store_kernel<" + b + ", 8, true>", s::split_store_kernel<bf16, 8, true>, split)};         \
    out.insert(out.end(), windowed.begin(), windowed.end());                                                          \
    return out;                                                                                                       \
}

STEPWISE_STEP_9_KERNELS(any_row_alignment)
STEPWISE_STEP_9_KERNELS(edge_loads_together)
STEPWISE_STEP_9_KERNELS(three_cluster_blocks_an_sm)
STEPWISE_STEP_9_KERNELS(one_load_copy_a_row)
STEPWISE_STEP_9_KERNELS(row_ends_peeled)
STEPWISE_STEP_9_KERNELS(row_ends_staged)
#undef STEPWISE_STEP_9_KERNELS

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {{"01_three_kernels", "Three kernels, one thread per row", "snippets/softmax/01_three_kernels.cuh",
          "stepwise::softmax::three_kernels"},
         three_kernels::softmax,
         nullptr,
         {kernel_entry("row_max_kernel", three_kernels::row_max_kernel, dim3(three_kernels::block_threads)),
          kernel_entry("row_sum_kernel", three_kernels::row_sum_kernel, dim3(three_kernels::block_threads)),
          kernel_entry("normalize_kernel", three_kernels::normalize_kernel, dim3(three_kernels::block_threads))}},
        {{"02_block_per_row", "A block per row, shared-memory tree reductions", "snippets/softmax/02_block_per_row.cuh",
          "stepwise::softmax::block_per_row"},
         block_per_row::softmax,
         nullptr,
         {kernel_entry("softmax_kernel", block_per_row::softmax_kernel, dim3(block_per_row::block_threads))}},
        {{"03_warp_shuffle", "Warp-shuffle reductions", "snippets/softmax/03_warp_shuffle.cuh",
          "stepwise::softmax::warp_shuffle"},
         warp_shuffle::softmax,
         nullptr,
         {kernel_entry("softmax_kernel", warp_shuffle::softmax_kernel, dim3(warp_shuffle::block_threads))}},
        {{"04_layout_by_shape", "A warp per short row, a block per long one", "snippets/softmax/04_layout_by_shape.cuh",
          "stepwise::softmax::layout_by_shape"},
         layout_by_shape::softmax,
         nullptr,
         {kernel_entry("warp_per_row_kernel", layout_by_shape::warp_per_row_kernel, dim3(layout_by_shape::block_threads)),
          kernel_entry("block_per_row_kernel", layout_by_shape::block_per_row_kernel,
                       dim3(layout_by_shape::block_threads))}},
        {{"05_online_softmax", "Online softmax: maximum and sum in one pass", "snippets/softmax/05_online_softmax.cuh",
          "stepwise::softmax::online_softmax"},
         online_softmax::softmax,
         nullptr,
         {kernel_entry("warp_per_row_kernel", online_softmax::warp_per_row_kernel, dim3(online_softmax::block_threads)),
          kernel_entry("block_per_row_kernel", online_softmax::block_per_row_kernel,
                       dim3(online_softmax::block_threads))}},
        {{"06_row_in_registers", "The row read once into registers, 16-byte loads",
          "snippets/softmax/06_row_in_registers.cuh", "stepwise::softmax::row_in_registers"},
         row_in_registers::softmax,
         nullptr,
         STEPWISE_REGISTER_KERNELS(row_in_registers)},
        {{"07_cluster_split", "Long rows split over a thread-block cluster", "snippets/softmax/07_cluster_split.cuh",
          "stepwise::softmax::cluster_split"},
         cluster_split::softmax,
         nullptr,
         cluster_split_kernels()},
        {{"08_bf16", "bf16 in and out, any shape", "snippets/softmax/08_bf16.cuh", "stepwise::softmax::bf16_in_out"},
         bf16_in_out::softmax,
         bf16_in_out::softmax,
         step_8_kernels_in_bf16_in_out("")},
        {{"09_any_row_alignment", "Rows at any alignment, 16 bytes an access",
          "snippets/softmax/09_any_row_alignment.cuh", "stepwise::softmax::any_row_alignment"},
         any_row_alignment::softmax,
         any_row_alignment::softmax,
         step_9_kernels_in_any_row_alignment()},
        {{"10_edge_loads_together", "The loads at a row's end issued together",
          "snippets/softmax/10_edge_loads_together.cuh", "stepwise::softmax::edge_loads_together"},
         edge_loads_together::softmax,
         edge_loads_together::softmax,
         step_9_kernels_in_edge_loads_together()},
        {{"11_three_cluster_blocks_an_sm", "The cluster kernel compiled for three blocks an SM",
          "snippets/softmax/11_three_cluster_blocks_an_sm.cuh", "stepwise::softmax::three_cluster_blocks_an_sm"},
         three_cluster_blocks_an_sm::softmax,
         three_cluster_blocks_an_sm::softmax,
         step_9_kernels_in_three_cluster_blocks_an_sm()},
        {{"12_one_load_copy_a_row", "The threads of a row take one copy of the load loop",
          "snippets/softmax/12_one_load_copy_a_row.cuh", "stepwise::softmax::one_load_copy_a_row"},
         one_load_copy_a_row::softmax,
         one_load_copy_a_row::softmax,
         step_9_kernels_in_one_load_copy_a_row()},
        {{"13_row_ends_peeled", "A row's ends held in the chunks its aligned body leaves free",
          "snippets/softmax/13_row_ends_peeled.cuh", "stepwise::softmax::row_ends_peeled"},
         row_ends_peeled::softmax,
         row_ends_peeled::softmax,
         step_9_kernels_in_row_ends_peeled()},
        {{"14_row_ends_staged", "A cluster block's row ends staged beside its slice",
          "snippets/softmax/14_row_ends_staged.cuh", "stepwise::softmax::row_ends_staged"},
         row_ends_staged::softmax,
         row_ends_staged::softmax,
         step_9_kernels_in_row_ends_staged()},
    };
    return all;
}

#undef STEPWISE_REGISTER_KERNELS

}  // namespace stepwise::softmax
