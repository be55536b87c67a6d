#include "cross_entropy/cross_entropy_steps.hpp"

#include "../../snippets/cross_entropy/01_separate_kernels.cuh"
#include "../../snippets/cross_entropy/02_row_in_registers.cuh"
#include "../../snippets/cross_entropy/03_exp_as_exp2.cuh"
#include "../../snippets/cross_entropy/04_any_row_alignment.cuh"
#include "../../snippets/cross_entropy/05_short_rows_to_lane_groups.cuh"
#include "../../snippets/cross_entropy/06_long_rows_over_a_cluster.cuh"
#include "../../snippets/cross_entropy/07_row_ends_staged.cuh"
#include "../../snippets/cross_entropy/08_label_stored_apart.cuh"
#include "../../snippets/cross_entropy/09_cluster_parts_merged_across_lanes.cuh"
#include "../../snippets/cross_entropy/10_padding_off_the_checked_path.cuh"
#include "../../snippets/cross_entropy/11_labels_read_ahead.cuh"

#include <string>
#include <vector>

namespace stepwise::cross_entropy {
namespace {

using bf16 = __nv_bfloat16;
const std::string b = "__nv_bfloat16";

std::vector<KernelEntry> separate_kernels_kernels()
{
    namespace s = separate_kernels;
    const dim3 row(s::block_threads), loss(s::loss_block_threads);
    return {kernel_entry("row_stats_kernel<float>", s::row_stats_kernel<float>, row),
            kernel_entry("row_stats_kernel<" + b + ">", s::row_stats_kernel<bf16>, row),
            kernel_entry("loss_kernel<float>", s::loss_kernel<float>, loss),
            kernel_entry("loss_kernel<" + b + ">", s::loss_kernel<bf16>, loss),
            kernel_entry("gradient_kernel<float>", s::gradient_kernel<float>, row),
            kernel_entry("gradient_kernel<" + b + ">", s::gradient_kernel<bf16>, row)};
}

//! The kernels of a step launched as step 2 is, from namespace `ns`: the rows held in registers (a full block shown:
//! the launcher sizes it to the row) and the longer rows' kernel, each with 16-byte accesses (4 fp32, 8 bf16) or one
//! value at a time; the labels' count and the mean.
#define STEPWISE_ROWS_STEP_KERNELS(ns)                                                                                \
    namespace s = ns;                                                                                                  \
    const dim3 rows(s::max_block_threads), longer(s::long_rows_block), labels(s::labels_block);                      \
    return {kernel_entry("count_kernel", s::count_kernel, labels),                                                   \
            kernel_entry("rows_kernel<float, 4>", s::rows_kernel<float, 4>, rows),                                   \
            kernel_entry("rows_kernel<float, 1>", s::rows_kernel<float, 1>, rows),                                   \
            kernel_entry("rows_kernel<" + b + ", 8>", s::rows_kernel<bf16, 8>, rows),                                \
            kernel_entry("rows_kernel<" + b + ", 1>", s::rows_kernel<bf16, 1>, rows),                                \
            kernel_entry("long_rows_kernel<float, 4>", s::long_rows_kernel<float, 4>, longer),                       \
            kernel_entry("long_rows_kernel<float, 1>", s::long_rows_kernel<float, 1>, longer),                       \
            kernel_entry("long_rows_kernel<" + b + ", 8>", s::long_rows_kernel<bf16, 8>, longer),                    \
            kernel_entry("long_rows_kernel<" + b + ", 1>", s::long_rows_kernel<bf16, 1>, longer),                    \
            kernel_entry("mean_kernel", s::mean_kernel, labels)}

//! Step 2's kernels.
std::vector<KernelEntry> row_in_registers_kernels() { STEPWISE_ROWS_STEP_KERNELS(row_in_registers); }

//! Step 3's kernels: step 2's, whose exponentials are exp2f() of a scaled difference.
std::vector<KernelEntry> exp_as_exp2_kernels() { STEPWISE_ROWS_STEP_KERNELS(exp_as_exp2); }

#undef STEPWISE_ROWS_STEP_KERNELS

//! Step 4's kernels: step 3's, each also as the instance that holds rows as their body and ends (`true`).
std::vector<KernelEntry> any_row_alignment_kernels()
{
    namespace s = any_row_alignment;
    const dim3 rows(s::max_block_threads), longer(s::long_rows_block), labels(s::labels_block);
    return {kernel_entry("count_kernel", s::count_kernel, labels),
            kernel_entry("rows_kernel<float, 4, false>", s::rows_kernel<float, 4, false>, rows),
            kernel_entry("rows_kernel<float, 4, true>", s::rows_kernel<float, 4, true>, rows),
            kernel_entry("rows_kernel<float, 1, false>", s::rows_kernel<float, 1, false>, rows),
            kernel_entry("rows_kernel<" + b + ", 8, false>", s::rows_kernel<bf16, 8, false>, rows),
            kernel_entry("rows_kernel<" + b + ", 8, true>", s::rows_kernel<bf16, 8, true>, rows),
            kernel_entry("rows_kernel<" + b + ", 1, false>", s::rows_kernel<bf16, 1, false>, rows),
            kernel_entry("long_rows_kernel<float, 4, false>", s::long_rows_kernel<float, 4, false>, longer),
            kernel_entry("long_rows_kernel<float, 4, true>", s::long_rows_kernel<float, 4, true>, longer),
            kernel_entry("long_rows_kernel<float, 1, false>", s::long_rows_kernel<float, 1, false>, longer),
            kernel_entry("long_rows_kernel<" + b + ", 8, false>", s::long_rows_kernel<bf16, 8, false>, longer),
            kernel_entry("long_rows_kernel<" + b + ", 8, true>", s::long_rows_kernel<bf16, 8, true>, longer),
            kernel_entry("long_rows_kernel<" + b + ", 1, false>", s::long_rows_kernel<bf16, 1, false>, longer),
            kernel_entry("mean_kernel", s::mean_kernel, labels)};
}

//! The kernels of a step launched as step 5 is, from namespace `ns`: step 4's, and the short rows' kernel, chunked
//! (rows on 16-byte boundaries) or a logit an access.
#define STEPWISE_LANE_GROUPS_STEP_KERNELS(ns)                                                                          \
    std::vector<KernelEntry>                                                                                           \
    {                                                                                                                  \
        kernel_entry("count_kernel", ns::count_kernel, dim3(ns::labels_block)),                                        \
            kernel_entry("short_rows_kernel<float, true>", ns::short_rows_kernel<float, true>,                         \
                         dim3(ns::short_rows_block)),                                                                  \
            kernel_entry("short_rows_kernel<float, false>", ns::short_rows_kernel<float, false>,                       \
                         dim3(ns::short_rows_block)),                                                                  \
            kernel_entry("short_rows_kernel<" + b + ", true>", ns::short_rows_kernel<bf16, true>,                      \
                         dim3(ns::short_rows_block)),                                                                  \
            kernel_entry("short_rows_kernel<" + b + ", false>", ns::short_rows_kernel<bf16, false>,                    \
                         dim3(ns::short_rows_block)),                                                                  \
            kernel_entry("rows_kernel<float, 4, false>", ns::rows_kernel<float, 4, false>, dim3(ns::max_block_threads)), \
            kernel_entry("rows_kernel<float, 4, true>", ns::rows_kernel<float, 4, true>, dim3(ns::max_block_threads)),  \
            kernel_entry("rows_kernel<float, 1, false>", ns::rows_kernel<float, 1, false>, dim3(ns::max_block_threads)), \
            kernel_entry("rows_kernel<" + b + ", 8, false>", ns::rows_kernel<bf16, 8, false>,                          \
                         dim3(ns::max_block_threads)),                                                                 \
            kernel_entry("rows_kernel<" + b + ", 8, true>", ns::rows_kernel<bf16, 8, true>, dim3(ns::max_block_threads)), \
            kernel_entry("rows_kernel<" + b + ", 1, false>", ns::rows_kernel<bf16, 1, false>,                          \
                         dim3(ns::max_block_threads)),                                                                 \
            kernel_entry("long_rows_kernel<float, 4, false>", ns::long_rows_kernel<float, 4, false>,                   \
                         dim3(ns::long_rows_block)),                                                                   \
            kernel_entry("long_rows_kernel<float, 4, true>", ns::long_rows_kernel<float, 4, true>,                     \
                         dim3(ns::long_rows_block)),                                                                   \
            kernel_entry("long_rows_kernel<float, 1, false>", ns::long_rows_kernel<float, 1, false>,                   \
                         dim3(ns::long_rows_block)),                                                                   \
            kernel_entry("long_rows_kernel<" + b + ", 8, false>", ns::long_rows_kernel<bf16, 8, false>,                \
                         dim3(ns::long_rows_block)),                                                                   \
            kernel_entry("long_rows_kernel<" + b + ", 8, true>", ns::long_rows_kernel<bf16, 8, true>,                  \
                         dim3(ns::long_rows_block)),                                                                   \
            kernel_entry("long_rows_kernel<" + b + ", 1, false>", ns::long_rows_kernel<bf16, 1, false>,                \
                         dim3(ns::long_rows_block)),                                                                   \
            kernel_entry("mean_kernel", ns::mean_kernel, dim3(ns::labels_block))                                       \
    }

//! Step 5's kernels.
std::vector<KernelEntry> short_rows_to_lane_groups_kernels()
{
    return STEPWISE_LANE_GROUPS_STEP_KERNELS(short_rows_to_lane_groups);
}

//! Step 6's kernels: step 5's, and the cluster kernel of rows on 16-byte boundaries, 64 logits a thread, and 32 in
//! fp32 rows of up to 16 blocks of 32 (a full block shown: the launcher sizes it to the row).
std::vector<KernelEntry> long_rows_over_a_cluster_kernels()
{
    namespace s = long_rows_over_a_cluster;
    const dim3 cluster(s::cluster_block_threads);
    constexpr int values = s::cluster_values, fp32_values = s::cluster_values / 2;
    std::vector<KernelEntry> all = STEPWISE_LANE_GROUPS_STEP_KERNELS(long_rows_over_a_cluster);
    const std::vector<KernelEntry> clusters = {
        kernel_entry("cluster_rows_kernel<float, 32>", s::cluster_rows_kernel<float, fp32_values>, cluster),
        kernel_entry("cluster_rows_kernel<float, 64>", s::cluster_rows_kernel<float, values>, cluster),
        kernel_entry("cluster_rows_kernel<" + b + ", 64>", s::cluster_rows_kernel<bf16, values>, cluster)};
    all.insert(all.end(), clusters.begin(), clusters.end());
    return all;
}

//! The kernels of a step launched as step 7 is, from namespace `ns`: step 5's, and the cluster kernel of rows on
//! 16-byte boundaries (`false`) or not (`true`), 64 logits a thread, and 32 in fp32 rows of up to 16 blocks of 32 (a
//! full block shown: the launcher sizes it to the row).
#define STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS(ns)                                                                     \
    namespace s = ns;                                                                                                  \
    const dim3 cluster(s::cluster_block_threads);                                                                      \
    constexpr int values = s::cluster_values, fp32_values = s::cluster_values / 2;                                     \
    std::vector<KernelEntry> all = STEPWISE_LANE_GROUPS_STEP_KERNELS(ns);                                              \
    const std::vector<KernelEntry> clusters = {                                                                        \
        kernel_entry("cluster_rows_kernel<float, 32, false>", s::cluster_rows_kernel<float, fp32_values, false>,       \
                     cluster),                                                                                         \
        kernel_entry("cluster_rows_kernel<float, 32, true>", s::cluster_rows_kernel<float, fp32_values, true>,         \
                     cluster),                                                                                         \
        kernel_entry("cluster_rows_kernel<float, 64, false>", s::cluster_rows_kernel<float, values, false>, cluster),  \
        kernel_entry("cluster_rows_kernel<float, 64, true>", s::cluster_rows_kernel<float, values, true>, cluster),    \
        kernel_entry("cluster_rows_kernel<" + b + ", 64, false>", s::cluster_rows_kernel<bf16, values, false>,         \
                     cluster),                                                                                         \
        kernel_entry("cluster_rows_kernel<" + b + ", 64, true>", s::cluster_rows_kernel<bf16, values, true>,           \
                     cluster)};                                                                                        \
    all.insert(all.end(), clusters.begin(), clusters.end());                                                           \
    return all

//! Step 7's kernels.
std::vector<KernelEntry> row_ends_staged_kernels() { STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS(row_ends_staged); }

//! Step 8's kernels: step 7's, whose cluster kernel stores the label's gradient apart.
std::vector<KernelEntry> label_stored_apart_kernels() { STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS(label_stored_apart); }

//! Step 9's kernels: step 8's, whose cluster kernel merges the blocks' parts across lanes.
std::vector<KernelEntry> cluster_parts_merged_across_lanes_kernels()
{
    STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS(cluster_parts_merged_across_lanes);
}

//! Step 10's kernels: step 9's, whose windowed cluster kernel takes only the threads at a row's ends down its checked
//! code.
std::vector<KernelEntry> padding_off_the_checked_path_kernels()
{
    STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS(padding_off_the_checked_path);
}

//! Step 11's kernels: step 10's, whose cluster kernel reads each row's label a row ahead.
std::vector<KernelEntry> labels_read_ahead_kernels() { STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS(labels_read_ahead); }

#undef STEPWISE_WINDOWED_CLUSTER_STEP_KERNELS
#undef STEPWISE_LANE_GROUPS_STEP_KERNELS

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {{"01_separate_kernels", "The formulas in three kernels", "snippets/cross_entropy/01_separate_kernels.cuh",
          "stepwise::cross_entropy::separate_kernels"},
         separate_kernels::cross_entropy,
         separate_kernels::cross_entropy,
         separate_kernels_kernels()},
        {{"02_row_in_registers", "The row read once into registers, a deterministic mean",
          "snippets/cross_entropy/02_row_in_registers.cuh", "stepwise::cross_entropy::row_in_registers"},
         row_in_registers::cross_entropy,
         row_in_registers::cross_entropy,
         row_in_registers_kernels()},
        {{"03_exp_as_exp2", "Every exponential as exp2f() of a scaled difference, no test a value",
          "snippets/cross_entropy/03_exp_as_exp2.cuh", "stepwise::cross_entropy::exp_as_exp2"},
         exp_as_exp2::cross_entropy,
         exp_as_exp2::cross_entropy,
         exp_as_exp2_kernels()},
        {{"04_any_row_alignment", "Rows off 16-byte boundaries as a body of whole chunks and two short ends",
          "snippets/cross_entropy/04_any_row_alignment.cuh", "stepwise::cross_entropy::any_row_alignment"},
         any_row_alignment::cross_entropy,
         any_row_alignment::cross_entropy,
         any_row_alignment_kernels()},
        {{"05_short_rows_to_lane_groups", "Rows of up to 256 logits to groups of lanes, several rows a block",
          "snippets/cross_entropy/05_short_rows_to_lane_groups.cuh",
          "stepwise::cross_entropy::short_rows_to_lane_groups"},
         short_rows_to_lane_groups::cross_entropy,
         short_rows_to_lane_groups::cross_entropy,
         short_rows_to_lane_groups_kernels()},
        {{"06_long_rows_over_a_cluster",
          "Rows on 16-byte boundaries longer than a block holds split over a resident cluster, read once",
          "snippets/cross_entropy/06_long_rows_over_a_cluster.cuh",
          "stepwise::cross_entropy::long_rows_over_a_cluster"},
         long_rows_over_a_cluster::cross_entropy,
         long_rows_over_a_cluster::cross_entropy,
         long_rows_over_a_cluster_kernels()},
        {{"07_row_ends_staged", "Rows off 16-byte boundaries on the cluster path, the chunks across their ends staged",
          "snippets/cross_entropy/07_row_ends_staged.cuh", "stepwise::cross_entropy::row_ends_staged"},
         row_ends_staged::cross_entropy,
         row_ends_staged::cross_entropy,
         row_ends_staged_kernels()},
        {{"08_label_stored_apart", "The cluster path's gradient with no test a logit, the label's written apart",
          "snippets/cross_entropy/08_label_stored_apart.cuh", "stepwise::cross_entropy::label_stored_apart"},
         label_stored_apart::cross_entropy,
         label_stored_apart::cross_entropy,
         label_stored_apart_kernels()},
        {{"09_cluster_parts_merged_across_lanes",
          "The cluster path merges its blocks' parts across lanes, log2(blocks) merges a thread",
          "snippets/cross_entropy/09_cluster_parts_merged_across_lanes.cuh",
          "stepwise::cross_entropy::cluster_parts_merged_across_lanes"},
         cluster_parts_merged_across_lanes::cross_entropy,
         cluster_parts_merged_across_lanes::cross_entropy,
         cluster_parts_merged_across_lanes_kernels()},
        {{"10_padding_off_the_checked_path",
          "Rows off 16-byte boundaries: only the threads at a row's ends take the checked code",
          "snippets/cross_entropy/10_padding_off_the_checked_path.cuh",
          "stepwise::cross_entropy::padding_off_the_checked_path"},
         padding_off_the_checked_path::cross_entropy,
         padding_off_the_checked_path::cross_entropy,
         padding_off_the_checked_path_kernels()},
        {{"11_labels_read_ahead", "The cluster path reads each row's label a row ahead",
          "snippets/cross_entropy/11_labels_read_ahead.cuh", "stepwise::cross_entropy::labels_read_ahead"},
         labels_read_ahead::cross_entropy,
         labels_read_ahead::cross_entropy,
         labels_read_ahead_kernels()},
    };
    return all;
}

}  // namespace stepwise::cross_entropy
