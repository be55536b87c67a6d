#include "normalization_backward/normalization_backward_steps.hpp"

#include "../../snippets/normalization_backward/01_three_kernels.cuh"
#include "../../snippets/normalization_backward/02_column_partials.cuh"
#include "../../snippets/normalization_backward/03_row_in_registers.cuh"
#include "../../snippets/normalization_backward/04_parameter_sums_in_the_row_pass.cuh"
#include "../../snippets/normalization_backward/05_next_row_in_flight.cuh"
#include "../../snippets/normalization_backward/06_sixteen_byte_accesses.cuh"
#include "../../snippets/normalization_backward/07_long_rows_over_a_cluster.cuh"
#include "../../snippets/normalization_backward/08_rstd_tested_once_a_row.cuh"
#include "../../snippets/normalization_backward/09_one_barrier_a_row.cuh"
#include "../../snippets/normalization_backward/10_short_rows_to_lane_groups.cuh"
#include "../../snippets/normalization_backward/11_column_sums_in_registers.cuh"
#include "../../snippets/normalization_backward/12_conflict_free_column_sums.cuh"
#include "../../snippets/normalization_backward/13_partials_summed_over_a_cluster.cuh"

#include <string>

namespace stepwise::normalization_backward {
namespace {

using bf16 = __nv_bfloat16;
const std::string b = "__nv_bfloat16";

//! Step 1's kernels, in fp32 and bf16.
std::vector<KernelEntry> three_kernels_kernels()
{
    namespace s = three_kernels;
    const dim3 row(s::row_block_threads), value(s::value_block_threads), column(s::column_block_threads);
    return {kernel_entry("row_terms_kernel<float>", s::row_terms_kernel<float>, row),
            kernel_entry("row_terms_kernel<" + b + ">", s::row_terms_kernel<bf16>, row),
            kernel_entry("dx_kernel<float>", s::dx_kernel<float>, value),
            kernel_entry("dx_kernel<" + b + ">", s::dx_kernel<bf16>, value),
            kernel_entry("parameter_gradients_kernel<float>", s::parameter_gradients_kernel<float>, column),
            kernel_entry("parameter_gradients_kernel<" + b + ">", s::parameter_gradients_kernel<bf16>, column)};
}

//! Step 2's kernels: step 1's row means and dx, the tiles' partial sums and the kernel that adds them.
std::vector<KernelEntry> column_partials_kernels()
{
    namespace s = column_partials;
    const dim3 row(s::row_block_threads), value(s::value_block_threads), tile(s::tile_columns, s::tile_warps),
        column(s::column_block_threads);
    return {kernel_entry("row_terms_kernel<float>", s::row_terms_kernel<float>, row),
            kernel_entry("row_terms_kernel<" + b + ">", s::row_terms_kernel<bf16>, row),
            kernel_entry("dx_kernel<float>", s::dx_kernel<float>, value),
            kernel_entry("dx_kernel<" + b + ">", s::dx_kernel<bf16>, value),
            kernel_entry("partials_kernel<float>", s::partials_kernel<float>, tile),
            kernel_entry("partials_kernel<" + b + ">", s::partials_kernel<bf16>, tile),
            kernel_entry("add_partials_kernel", s::add_partials_kernel, column)};
}

//! Step 3's kernels: dx from a row held in registers (two sizes of registers), longer rows read twice, and step 2's
//! tiles and partial sums.
std::vector<KernelEntry> row_in_registers_kernels()
{
    namespace s = row_in_registers;
    const dim3 row(s::max_row_threads), streamed(s::streamed_row_threads), tile(s::tile_columns, s::tile_warps),
        column(s::column_block_threads);
    constexpr int few = s::short_values_per_thread, many = s::long_values_per_thread;
    return {kernel_entry("dx_row_kernel<float, 4>", s::dx_row_kernel<float, few>, row),
            kernel_entry("dx_row_kernel<" + b + ", 4>", s::dx_row_kernel<bf16, few>, row),
            kernel_entry("dx_row_kernel<float, 16>", s::dx_row_kernel<float, many>, row),
            kernel_entry("dx_row_kernel<" + b + ", 16>", s::dx_row_kernel<bf16, many>, row),
            kernel_entry("dx_streamed_row_kernel<float>", s::dx_streamed_row_kernel<float>, streamed),
            kernel_entry("dx_streamed_row_kernel<" + b + ">", s::dx_streamed_row_kernel<bf16>, streamed),
            kernel_entry("partials_kernel<float>", s::partials_kernel<float>, tile),
            kernel_entry("partials_kernel<" + b + ">", s::partials_kernel<bf16>, tile),
            kernel_entry("add_partials_kernel", s::add_partials_kernel, column)};
}

//! The kernels of a step launched as step 4 is, from namespace `ns`: its row pass at three sizes of registers, step
//! 3's and step 2's kernels for the longer rows, and the partial sums' adder (steps 4 and 5 differ in the row pass).
#define STEPWISE_ROW_PASS_STEP_KERNELS(ns)                                                                            \
    namespace s = ns;                                                                                                  \
    const dim3 row(s::max_row_threads), streamed(s::streamed_row_threads), tile(s::tile_columns, s::tile_warps),    \
        add(s::add_columns, s::add_warps);                                                                             \
    constexpr int few = s::short_values_per_thread, some = s::middle_values_per_thread,                               \
                  many = s::long_values_per_thread;                                                                   \
    return {kernel_entry("row_pass_kernel<float, 4>", s::row_pass_kernel<float, few>, row),                         \
            kernel_entry("row_pass_kernel<" + b + ", 4>", s::row_pass_kernel<bf16, few>, row),                      \
            kernel_entry("row_pass_kernel<float, 8>", s::row_pass_kernel<float, some>, row),                        \
            kernel_entry("row_pass_kernel<" + b + ", 8>", s::row_pass_kernel<bf16, some>, row),                     \
            kernel_entry("row_pass_kernel<float, 16>", s::row_pass_kernel<float, many>, row),                       \
            kernel_entry("row_pass_kernel<" + b + ", 16>", s::row_pass_kernel<bf16, many>, row),                    \
            kernel_entry("dx_streamed_row_kernel<float>", s::dx_streamed_row_kernel<float>, streamed),              \
            kernel_entry("dx_streamed_row_kernel<" + b + ">", s::dx_streamed_row_kernel<bf16>, streamed),           \
            kernel_entry("partials_kernel<float>", s::partials_kernel<float>, tile),                                \
            kernel_entry("partials_kernel<" + b + ">", s::partials_kernel<bf16>, tile),                             \
            kernel_entry("add_partials_kernel", s::add_partials_kernel, add)}

//! Step 4's kernels: the row pass that also adds the parameters' terms.
std::vector<KernelEntry> parameter_sums_in_the_row_pass_kernels()
{
    STEPWISE_ROW_PASS_STEP_KERNELS(parameter_sums_in_the_row_pass);
}

//! Step 5's kernels: the row pass that loads the block's next row early.
std::vector<KernelEntry> next_row_in_flight_kernels()
{
    STEPWISE_ROW_PASS_STEP_KERNELS(next_row_in_flight);
}

//! The kernels of a step launched as step 6 is, from namespace `ns`: step 5's, and the row pass and the longer rows'
//! dx pass of 16-byte accesses.
#define STEPWISE_WIDE_STEP_KERNELS(ns)                                                                                \
    std::vector<KernelEntry> kernels = []() -> std::vector<KernelEntry> { STEPWISE_ROW_PASS_STEP_KERNELS(ns); }();  \
    namespace w = ns;                                                                                                  \
    const dim3 wide_row(w::max_row_threads), wide_streamed(w::streamed_row_threads);                                  \
    for (KernelEntry entry :                                                                                           \
         {kernel_entry("wide_row_pass_kernel<float, 1>", w::wide_row_pass_kernel<float, 1>, wide_row),                \
          kernel_entry("wide_row_pass_kernel<float, 2>", w::wide_row_pass_kernel<float, 2>, wide_row),                \
          kernel_entry("wide_row_pass_kernel<float, 4>", w::wide_row_pass_kernel<float, 4>, wide_row),                \
          kernel_entry("wide_row_pass_kernel<" + b + ", 1>", w::wide_row_pass_kernel<bf16, 1>, wide_row),             \
          kernel_entry("wide_row_pass_kernel<" + b + ", 2>", w::wide_row_pass_kernel<bf16, 2>, wide_row),             \
          kernel_entry("wide_dx_streamed_row_kernel<float>", w::wide_dx_streamed_row_kernel<float>, wide_streamed),   \
          kernel_entry("wide_dx_streamed_row_kernel<" + b + ">", w::wide_dx_streamed_row_kernel<bf16>,                \
                       wide_streamed)}) {                                                                              \
        kernels.push_back(entry);                                                                                      \
    }

//! Step 6's kernels: step 5's, and those of 16-byte accesses.
std::vector<KernelEntry> sixteen_byte_accesses_kernels()
{
    STEPWISE_WIDE_STEP_KERNELS(sixteen_byte_accesses);
    return kernels;
}

//! The kernels of a step launched as step 7 is, from namespace `ns`: step 6's, and the row pass of rows split over a
//! cluster.
#define STEPWISE_CLUSTER_STEP_KERNELS(ns)                                                                             \
    STEPWISE_WIDE_STEP_KERNELS(ns);                                                                                    \
    const dim3 cluster_row(w::max_row_threads);                                                                        \
    kernels.push_back(kernel_entry("cluster_row_pass_kernel<float, 4>", w::cluster_row_pass_kernel<float, 4>,        \
                                   cluster_row));                                                                      \
    kernels.push_back(kernel_entry("cluster_row_pass_kernel<" + b + ", 2>", w::cluster_row_pass_kernel<bf16, 2>,     \
                                   cluster_row))

//! Step 7's kernels: step 6's, and the row pass of rows split over a cluster.
std::vector<KernelEntry> long_rows_over_a_cluster_kernels()
{
    STEPWISE_CLUSTER_STEP_KERNELS(long_rows_over_a_cluster);
    return kernels;
}

//! Step 8's kernels: step 7's, whose chunks' arithmetic tests rstd once a row.
std::vector<KernelEntry> rstd_tested_once_a_row_kernels()
{
    STEPWISE_CLUSTER_STEP_KERNELS(rstd_tested_once_a_row);
    return kernels;
}

//! Step 9's kernels: step 8's, whose block sums take one barrier a row.
std::vector<KernelEntry> one_barrier_a_row_kernels()
{
    STEPWISE_CLUSTER_STEP_KERNELS(one_barrier_a_row);
    return kernels;
}

//! The kernels of a step launched as step 10 is, from namespace `ns`: step 9's, and the row pass of short rows, a row
//! to a group of lanes.
#define STEPWISE_SHORT_ROWS_STEP_KERNELS(ns)                                                                          \
    STEPWISE_CLUSTER_STEP_KERNELS(ns);                                                                                 \
    const dim3 short_rows(w::short_rows_threads);                                                                      \
    kernels.push_back(kernel_entry("short_rows_kernel<float>", w::short_rows_kernel<float>, short_rows));             \
    kernels.push_back(kernel_entry("short_rows_kernel<" + b + ">", w::short_rows_kernel<bf16>, short_rows))

//! Step 10's kernels: step 9's, and the row pass of short rows, a row to a group of lanes.
std::vector<KernelEntry> short_rows_to_lane_groups_kernels()
{
    STEPWISE_SHORT_ROWS_STEP_KERNELS(short_rows_to_lane_groups);
    return kernels;
}

//! Step 11's kernels: step 10's, whose bf16 row pass of one chunk a thread keeps its column sums in registers.
std::vector<KernelEntry> column_sums_in_registers_kernels()
{
    STEPWISE_SHORT_ROWS_STEP_KERNELS(column_sums_in_registers);
    return kernels;
}

//! Step 12's kernels: step 11's, whose bf16 column sums in shared memory are laid out for a warp's contiguous accesses.
std::vector<KernelEntry> conflict_free_column_sums_kernels()
{
    STEPWISE_SHORT_ROWS_STEP_KERNELS(conflict_free_column_sums);
    return kernels;
}

//! Step 13's kernels: step 12's, whose wide row pass adds its column sums over a cluster before it writes them.
std::vector<KernelEntry> partials_summed_over_a_cluster_kernels()
{
    STEPWISE_SHORT_ROWS_STEP_KERNELS(partials_summed_over_a_cluster);
    return kernels;
}

#undef STEPWISE_SHORT_ROWS_STEP_KERNELS
#undef STEPWISE_CLUSTER_STEP_KERNELS
#undef STEPWISE_WIDE_STEP_KERNELS
#undef STEPWISE_ROW_PASS_STEP_KERNELS

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {{"01_three_kernels", "The formulas in three kernels", "snippets/normalization_backward/01_three_kernels.cuh",
          "stepwise::normalization_backward::three_kernels"},
         three_kernels::layer_norm_backward<float>,
         three_kernels::rms_norm_backward<float>,
         three_kernels::layer_norm_backward<bf16>,
         three_kernels::rms_norm_backward<bf16>,
         three_kernels_kernels()},
        {{"02_column_partials", "The parameters' gradients by tiles of rows, then their partial sums added",
          "snippets/normalization_backward/02_column_partials.cuh", "stepwise::normalization_backward::column_partials"},
         column_partials::layer_norm_backward<float>,
         column_partials::rms_norm_backward<float>,
         column_partials::layer_norm_backward<bf16>,
         column_partials::rms_norm_backward<bf16>,
         column_partials_kernels()},
        {{"03_row_in_registers", "dx from one read of each row, held in registers",
          "snippets/normalization_backward/03_row_in_registers.cuh", "stepwise::normalization_backward::row_in_registers"},
         row_in_registers::layer_norm_backward<float>,
         row_in_registers::rms_norm_backward<float>,
         row_in_registers::layer_norm_backward<bf16>,
         row_in_registers::rms_norm_backward<bf16>,
         row_in_registers_kernels()},
        {{"04_parameter_sums_in_the_row_pass", "The parameters' partial sums from the pass that writes dx",
          "snippets/normalization_backward/04_parameter_sums_in_the_row_pass.cuh",
          "stepwise::normalization_backward::parameter_sums_in_the_row_pass"},
         parameter_sums_in_the_row_pass::layer_norm_backward<float>,
         parameter_sums_in_the_row_pass::rms_norm_backward<float>,
         parameter_sums_in_the_row_pass::layer_norm_backward<bf16>,
         parameter_sums_in_the_row_pass::rms_norm_backward<bf16>,
         parameter_sums_in_the_row_pass_kernels()},
        {{"05_next_row_in_flight", "Each block's next row loaded while it reduces the current one",
          "snippets/normalization_backward/05_next_row_in_flight.cuh",
          "stepwise::normalization_backward::next_row_in_flight"},
         next_row_in_flight::layer_norm_backward<float>,
         next_row_in_flight::rms_norm_backward<float>,
         next_row_in_flight::layer_norm_backward<bf16>,
         next_row_in_flight::rms_norm_backward<bf16>,
         next_row_in_flight_kernels()},
        {{"06_sixteen_byte_accesses", "x, dy and dx read and written 16 bytes at a time",
          "snippets/normalization_backward/06_sixteen_byte_accesses.cuh",
          "stepwise::normalization_backward::sixteen_byte_accesses"},
         sixteen_byte_accesses::layer_norm_backward<float>,
         sixteen_byte_accesses::rms_norm_backward<float>,
         sixteen_byte_accesses::layer_norm_backward<bf16>,
         sixteen_byte_accesses::rms_norm_backward<bf16>,
         sixteen_byte_accesses_kernels()},
        {{"07_long_rows_over_a_cluster", "Rows longer than a block holds split over a cluster and read once",
          "snippets/normalization_backward/07_long_rows_over_a_cluster.cuh",
          "stepwise::normalization_backward::long_rows_over_a_cluster"},
         long_rows_over_a_cluster::layer_norm_backward<float>,
         long_rows_over_a_cluster::rms_norm_backward<float>,
         long_rows_over_a_cluster::layer_norm_backward<bf16>,
         long_rows_over_a_cluster::rms_norm_backward<bf16>,
         long_rows_over_a_cluster_kernels()},
        {{"08_rstd_tested_once_a_row", "Whether a row's rstd is infinite tested once a row, not at every value",
          "snippets/normalization_backward/08_rstd_tested_once_a_row.cuh",
          "stepwise::normalization_backward::rstd_tested_once_a_row"},
         rstd_tested_once_a_row::layer_norm_backward<float>,
         rstd_tested_once_a_row::rms_norm_backward<float>,
         rstd_tested_once_a_row::layer_norm_backward<bf16>,
         rstd_tested_once_a_row::rms_norm_backward<bf16>,
         rstd_tested_once_a_row_kernels()},
        {{"09_one_barrier_a_row", "A row's sums over the block with one barrier and a warp's shuffles",
          "snippets/normalization_backward/09_one_barrier_a_row.cuh",
          "stepwise::normalization_backward::one_barrier_a_row"},
         one_barrier_a_row::layer_norm_backward<float>,
         one_barrier_a_row::rms_norm_backward<float>,
         one_barrier_a_row::layer_norm_backward<bf16>,
         one_barrier_a_row::rms_norm_backward<bf16>,
         one_barrier_a_row_kernels()},
        {{"10_short_rows_to_lane_groups", "A short row to a group of lanes, several rows a warp",
          "snippets/normalization_backward/10_short_rows_to_lane_groups.cuh",
          "stepwise::normalization_backward::short_rows_to_lane_groups"},
         short_rows_to_lane_groups::layer_norm_backward<float>,
         short_rows_to_lane_groups::rms_norm_backward<float>,
         short_rows_to_lane_groups::layer_norm_backward<bf16>,
         short_rows_to_lane_groups::rms_norm_backward<bf16>,
         short_rows_to_lane_groups_kernels()},
        {{"11_column_sums_in_registers", "A thread of one bf16 chunk a row keeps its column sums in registers",
          "snippets/normalization_backward/11_column_sums_in_registers.cuh",
          "stepwise::normalization_backward::column_sums_in_registers"},
         column_sums_in_registers::layer_norm_backward<float>,
         column_sums_in_registers::rms_norm_backward<float>,
         column_sums_in_registers::layer_norm_backward<bf16>,
         column_sums_in_registers::rms_norm_backward<bf16>,
         column_sums_in_registers_kernels()},
        {{"12_conflict_free_column_sums", "A bf16 chunk's column sums laid out for a warp's contiguous shared accesses",
          "snippets/normalization_backward/12_conflict_free_column_sums.cuh",
          "stepwise::normalization_backward::conflict_free_column_sums"},
         conflict_free_column_sums::layer_norm_backward<float>,
         conflict_free_column_sums::rms_norm_backward<float>,
         conflict_free_column_sums::layer_norm_backward<bf16>,
         conflict_free_column_sums::rms_norm_backward<bf16>,
         conflict_free_column_sums_kernels()},
        {{"13_partials_summed_over_a_cluster",
          "The row pass's blocks add their column sums over a cluster, one row of partial sums a cluster",
          "snippets/normalization_backward/13_partials_summed_over_a_cluster.cuh",
          "stepwise::normalization_backward::partials_summed_over_a_cluster"},
         partials_summed_over_a_cluster::layer_norm_backward<float>,
         partials_summed_over_a_cluster::rms_norm_backward<float>,
         partials_summed_over_a_cluster::layer_norm_backward<bf16>,
         partials_summed_over_a_cluster::rms_norm_backward<bf16>,
         partials_summed_over_a_cluster_kernels()},
    };
    return all;
}

}  // namespace stepwise::normalization_backward
