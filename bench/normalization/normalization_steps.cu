#include "normalization/normalization_steps.hpp"

#include "../../snippets/normalization/01_three_kernels.cuh"
#include "../../snippets/normalization/02_block_per_row.cuh"
#include "../../snippets/normalization/03_warp_shuffle.cuh"
#include "../../snippets/normalization/04_layout_by_shape.cuh"
#include "../../snippets/normalization/05_one_pass_moments.cuh"
#include "../../snippets/normalization/06_row_in_registers.cuh"
#include "../../snippets/normalization/07_cluster_split.cuh"
#include "../../snippets/normalization/08_bf16_by_words.cuh"
#include "../../snippets/normalization/09_fewer_instructions_per_value.cuh"
#include "../../snippets/normalization/10_values_per_thread.cuh"
#include "../../snippets/normalization/11_parameters_with_the_row.cuh"
#include "../../snippets/normalization/12_any_row_alignment.cuh"
#include "../../snippets/normalization/13_shifted_parameters.cuh"
#include "../../snippets/normalization/14_one_alignment_a_cluster.cuh"
#include "../../snippets/normalization/15_one_load_copy_a_thread.cuh"
#include "../../snippets/normalization/16_bounded_window_registers.cuh"
#include "../../snippets/normalization/17_row_ends_staged.cuh"
#include "../../snippets/normalization/18_row_ends_packed.cuh"
#include "../../snippets/normalization/19_many_rows_one_warp.cuh"
#include "../../snippets/normalization/20_padding_by_whole_chunks.cuh"
#include "../../snippets/normalization/21_lanes_known_at_compile_time.cuh"

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

//! Steps 8 to 11 are the same templates in four namespaces: each step's kernels, as add_typed_step_kernels() takes
//! them. Step 11's rows kernel also takes whether it loads gamma and beta with the row (here: not).
#define STEPWISE_TYPED_KERNELS(ns)                                                                                    \
    using Moments = ns::Moments;                                                                                      \
    using Squares = ns::Squares;                                                                                      \
    static constexpr const char* name_space = "stepwise::normalization::" #ns "::";                                  \
    static constexpr int short_rows_block = ns::short_rows_block;                                                     \
    static constexpr int rows32_block = ns::max_block_threads<32>;                                                    \
    static constexpr int split_block_threads = ns::split_block_threads;                                               \
    static constexpr int cluster_block_threads = ns::cluster_block_threads;                                           \
    template <typename T, typename Stats, int W, int V>                                                               \
    static constexpr auto cluster = ns::cluster_norm_kernel<T, Stats, W, V>;                                          \
    template <typename T, typename Stats, int W, int V>                                                               \
    static constexpr auto cluster_config = ns::cluster_config<T, Stats, W, V>;                                        \
    template <typename T, typename Stats, int W>                                                                      \
    static constexpr auto split_partials = ns::split_partials_kernel<T, Stats, W>;                                    \
    template <typename T, typename Stats>                                                                             \
    static constexpr auto split_merge = ns::split_merge_kernel<T, Stats>;                                             \
    template <typename T, bool WithBeta, int W>                                                                       \
    static constexpr auto split_store = ns::split_store_kernel<T, WithBeta, W>;

//! A step whose rows kernel takes no more than its type, statistics, width and values: steps 8 and 9 hold step 7's
//! 16 or 32 values a thread; step 10 also 8 and 64 (`values_by_row_and_memory`).
#define STEPWISE_ROWS_KERNELS(ns, by_row_and_memory)                                                                  \
    STEPWISE_TYPED_KERNELS(ns)                                                                                        \
    static constexpr bool values_by_row_and_memory = by_row_and_memory;                                               \
    static constexpr const char* rows_suffix = "";                                                                    \
    static constexpr const char* kernel_suffix = "";                                                                  \
    template <typename T, typename Stats, int W, int V>                                                               \
    static constexpr auto rows = ns::norm_rows_kernel<T, Stats, W, V>;

struct ByWordsStep {
    STEPWISE_ROWS_KERNELS(bf16_by_words, false)
};

struct FewerInstructionsStep {
    STEPWISE_ROWS_KERNELS(fewer_instructions, false)
};

struct ValuesPerThreadStep {
    STEPWISE_ROWS_KERNELS(bf16_in_out, true)
};

//! Step 11 holds step 10's values a thread, and its rows kernel also takes whether it loads gamma and beta with the
//! row.
struct WithTheRowStep {
    STEPWISE_TYPED_KERNELS(parameters_with_the_row)
    static constexpr bool values_by_row_and_memory = true;
    static constexpr const char* rows_suffix = ", false";
    static constexpr const char* kernel_suffix = "";
    template <typename T, typename Stats, int W, int V>
    static constexpr auto rows = parameters_with_the_row::norm_rows_kernel<T, Stats, W, V, false>;
};

//! Steps 12's to 20's kernels of 16-byte aligned rows are step 11's, with `Windowed` false: a further template
//! argument in the compiler's names (rows kernels: whether they load gamma and beta with the row, then whether they
//! are windowed). `Name` is the traits of the step of namespace `ns`.
#define STEPWISE_WINDOWED_STEP(Name, ns)                                                                             \
    struct Name {                                                                                                    \
        STEPWISE_TYPED_KERNELS(ns)                                                                                   \
        static constexpr bool values_by_row_and_memory = true;                                                      \
        static constexpr const char* rows_suffix = ", false, false";                                                \
        static constexpr const char* kernel_suffix = ", false";                                                     \
        template <typename T, typename Stats, int W, int V>                                                          \
        static constexpr auto rows = ns::norm_rows_kernel<T, Stats, W, V, false, false>;                             \
        static constexpr const char* lanes_suffix = "";                                                              \
        template <typename T, typename Stats, int W, int V, bool Ahead, bool Windowed>                               \
        static constexpr auto rows_of() { return ns::norm_rows_kernel<T, Stats, W, V, Ahead, Windowed>; }            \
    };
STEPWISE_WINDOWED_STEP(AnyRowStep, any_row_alignment)
STEPWISE_WINDOWED_STEP(ShiftedParametersStep, shifted_parameters)
STEPWISE_WINDOWED_STEP(OneAlignmentAClusterStep, one_alignment_a_cluster)
STEPWISE_WINDOWED_STEP(OneLoadCopyAThreadStep, one_load_copy_a_thread)
STEPWISE_WINDOWED_STEP(BoundedWindowRegistersStep, bounded_window_registers)
STEPWISE_WINDOWED_STEP(RowEndsStagedStep, row_ends_staged)
STEPWISE_WINDOWED_STEP(RowEndsPackedStep, row_ends_packed)
STEPWISE_WINDOWED_STEP(ManyRowsOneWarpStep, many_rows_one_warp)
STEPWISE_WINDOWED_STEP(PaddingByWholeChunksStep, padding_by_whole_chunks)
#undef STEPWISE_WINDOWED_STEP

//! Step 21's rows kernels also take the lanes of a row: `whole_block` (0) for a row per block, as the traits list them
//! here; those of rows that fit a warp, 1 to 32 lanes, come from add_warp_rows_kernels().
struct LanesKnownAtCompileTimeStep {
    STEPWISE_TYPED_KERNELS(lanes_known_at_compile_time)
    static constexpr bool values_by_row_and_memory = true;
    static constexpr const char* rows_suffix = ", false, false, 0";
    static constexpr const char* kernel_suffix = ", false";
    static constexpr int row_per_block = lanes_known_at_compile_time::whole_block;
    template <typename T, typename Stats, int W, int V>
    static constexpr auto rows = lanes_known_at_compile_time::norm_rows_kernel<T, Stats, W, V, false, false, row_per_block>;
    static constexpr const char* lanes_suffix = ", 0";
    template <typename T, typename Stats, int W, int V, bool Ahead, bool Windowed>
    static constexpr auto rows_of()
    {
        return lanes_known_at_compile_time::norm_rows_kernel<T, Stats, W, V, Ahead, Windowed, row_per_block>;
    }
};

#undef STEPWISE_ROWS_KERNELS
#undef STEPWISE_TYPED_KERNELS

//! Step 8's, 9's, 10's or 11's (`K`) rows, cluster and split kernels for one element type `T` (named `type`): 16-byte
//! accesses of `width` values with 16 and 32 values a thread (from step 10 also 8, in blocks of short rows, in
//! RMSNorm's rows of up to 1024 values and in short fp32 rows; and 64 in bf16 rows longer than 65536, or 16384 where
//! the memory is fast), and element-wide accesses with 16. Step 11 adds its rows kernels that load gamma and beta
//! with the row (add_with_the_row_kernels()).
template <typename K, typename T>
void add_typed_step_kernels(std::vector<KernelEntry>& out, const std::string& type)
{
    using Moments = typename K::Moments;
    using Squares = typename K::Squares;
    constexpr int w = 16 / sizeof(T);
    const dim3 rows16(K::short_rows_block), rows32(K::rows32_block), rows8(K::short_rows_block), split(K::split_block_threads);
    const std::string t = type + ", " + K::name_space, wide = ", " + std::to_string(w), end = std::string(K::rows_suffix) + ">";
    const std::string kend = std::string(K::kernel_suffix) + ">";  // cluster and split kernels
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16" + end, K::template rows<T, Moments, w, 16>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments, 1, 16" + end, K::template rows<T, Moments, 1, 16>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 32" + end, K::template rows<T, Moments, w, 32>, rows32));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16" + end, K::template rows<T, Squares, w, 16>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares, 1, 16" + end, K::template rows<T, Squares, 1, 16>, rows16));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 32" + end, K::template rows<T, Squares, w, 32>, rows32));
    if constexpr (K::values_by_row_and_memory) {
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 8" + end, K::template rows<T, Squares, w, 8>, rows8));
    }
    if constexpr (K::values_by_row_and_memory && sizeof(T) == 4) {
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 8" + end, K::template rows<T, Moments, w, 8>, rows8));
    }
    const dim3 cluster(K::cluster_block_threads);
    out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Moments" + wide + ", 32" + kend, K::template cluster<T, Moments, w, 32>,
                               cluster, configured_shared_bytes(K::template cluster_config<T, Moments, w, 32>, K::cluster_block_threads)));
    out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Squares" + wide + ", 32" + kend, K::template cluster<T, Squares, w, 32>,
                               cluster, configured_shared_bytes(K::template cluster_config<T, Squares, w, 32>, K::cluster_block_threads)));
    if constexpr (K::values_by_row_and_memory && sizeof(T) == 2) {
        out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Moments" + wide + ", 64" + kend, K::template cluster<T, Moments, w, 64>,
                                   cluster, configured_shared_bytes(K::template cluster_config<T, Moments, w, 64>, K::cluster_block_threads)));
        out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Squares" + wide + ", 64" + kend, K::template cluster<T, Squares, w, 64>,
                                   cluster, configured_shared_bytes(K::template cluster_config<T, Squares, w, 64>, K::cluster_block_threads)));
    }
    out.push_back(kernel_entry("split_partials_kernel<" + t + "Moments" + wide + kend, K::template split_partials<T, Moments, w>, split));
    out.push_back(kernel_entry("split_partials_kernel<" + t + "Squares" + wide + kend, K::template split_partials<T, Squares, w>, split));
    out.push_back(kernel_entry("split_merge_kernel<" + t + "Moments>", K::template split_merge<T, Moments>, split));
    out.push_back(kernel_entry("split_merge_kernel<" + t + "Squares>", K::template split_merge<T, Squares>, split));
    out.push_back(kernel_entry("split_store_kernel<" + type + ", true" + wide + kend, K::template split_store<T, true, w>, split));
    out.push_back(kernel_entry("split_store_kernel<" + type + ", false" + wide + kend, K::template split_store<T, false, w>, split));
}

//! Step 11's rows kernels that load gamma and beta with the row, in blocks of at most 256 threads: 16 and 8 values a
//! thread (LayerNorm's bf16 rows of 16 keep step 10's order).
template <typename T>
void add_with_the_row_kernels(std::vector<KernelEntry>& out, const std::string& type)
{
    namespace s = parameters_with_the_row;
    constexpr int w = 16 / sizeof(T);
    const dim3 rows(s::short_rows_block);
    const std::string t = type + ", " + WithTheRowStep::name_space, wide = ", " + std::to_string(w);
    if constexpr (s::parameters_ahead<T, s::Moments, w, 16>) {
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16, true>", s::norm_rows_kernel<T, s::Moments, w, 16, true>, rows));
    }
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16, true>", s::norm_rows_kernel<T, s::Squares, w, 16, true>, rows));
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 8, true>", s::norm_rows_kernel<T, s::Squares, w, 8, true>, rows));
    if constexpr (sizeof(T) == 4) {
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 8, true>", s::norm_rows_kernel<T, s::Moments, w, 8, true>, rows));
    }
}

//! Steps 12's and 13's rows kernels that load gamma and beta with the row (step 11's), and their windowed kernels
//! (rows not 16-byte aligned): rows kernels of 8 to 64 values a thread, with and without gamma and beta with the row,
//! the cluster kernels of 32 and 64 and the split path's; `add_<ns>_kernels<T>()` for the step of namespace `ns`,
//! whose traits are `Step`.
#define STEPWISE_WINDOWED_KERNELS(ns, Step)                                                                           \
template <typename T>                                                                                                 \
void add_##ns##_kernels(std::vector<KernelEntry>& out, const std::string& type)                                       \
{                                                                                                                     \
    namespace s = ns;                                                                                                 \
    using s::Moments;                                                                                                 \
    using s::Squares;                                                                                                 \
    constexpr int w = 16 / sizeof(T);                                                                                 \
    const dim3 rows(s::short_rows_block), split(s::split_block_threads), cluster(s::cluster_block_threads);           \
    const std::string t = type + ", " + Step::name_space, wide = ", " + std::to_string(w), lanes = Step::lanes_suffix;\
    if constexpr (s::parameters_ahead<T, Moments, w, 16>) {                                                           \
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16, true, false" + lanes + ">", Step::template rows_of<T, Moments, w, 16, true, false>(), rows));\
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16, true, true" + lanes + ">", Step::template rows_of<T, Moments, w, 16, true, true>(), rows));\
    }                                                                                                                 \
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16, true, false" + lanes + ">", Step::template rows_of<T, Squares, w, 16, true, false>(), rows));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 8, true, false" + lanes + ">", Step::template rows_of<T, Squares, w, 8, true, false>(), rows));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16, true, true" + lanes + ">", Step::template rows_of<T, Squares, w, 16, true, true>(), rows));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 8, true, true" + lanes + ">", Step::template rows_of<T, Squares, w, 8, true, true>(), rows));\
    if constexpr (sizeof(T) == 4) {                                                                                   \
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 8, true, false" + lanes + ">", Step::template rows_of<T, Moments, w, 8, true, false>(), rows));\
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 8, true, true" + lanes + ">", Step::template rows_of<T, Moments, w, 8, true, true>(), rows));\
    }                                                                                                                 \
    const dim3 rows32(s::max_block_threads<32>), rows64(s::max_block_threads<64>);                              \
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 16, false, true" + lanes + ">", Step::template rows_of<T, Moments, w, 16, false, true>(), rows));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 32, false, true" + lanes + ">", Step::template rows_of<T, Moments, w, 32, false, true>(), rows32));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 64, false, true" + lanes + ">", Step::template rows_of<T, Moments, w, 64, false, true>(), rows64));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 8, false, true" + lanes + ">", Step::template rows_of<T, Squares, w, 8, false, true>(), rows));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 16, false, true" + lanes + ">", Step::template rows_of<T, Squares, w, 16, false, true>(), rows));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 32, false, true" + lanes + ">", Step::template rows_of<T, Squares, w, 32, false, true>(), rows32));\
    out.push_back(kernel_entry("norm_rows_kernel<" + t + "Squares" + wide + ", 64, false, true" + lanes + ">", Step::template rows_of<T, Squares, w, 64, false, true>(), rows64));\
    if constexpr (sizeof(T) == 4) {                                                                                   \
        out.push_back(kernel_entry("norm_rows_kernel<" + t + "Moments" + wide + ", 8, false, true" + lanes + ">", Step::template rows_of<T, Moments, w, 8, false, true>(), rows));\
    }                                                                                                                 \
    for (const int values : {32, 64}) {                                                                               \
        const auto config_m = values == 32 ? s::cluster_config<T, Moments, w, 32> : s::cluster_config<T, Moments, w, 64>;\
        const auto config_s = values == 32 ? s::cluster_config<T, Squares, w, 32> : s::cluster_config<T, Squares, w, 64>;\
        const std::string v = ", " + std::to_string(values) + ", true>";                                              \
        out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Moments" + wide + v,                                 \
                                   values == 32 ? s::cluster_norm_kernel<T, Moments, w, 32, true> : s::cluster_norm_kernel<T, Moments, w, 64, true>,\
                                   cluster, configured_shared_bytes(config_m, s::cluster_block_threads)));            \
        out.push_back(kernel_entry("cluster_norm_kernel<" + t + "Squares" + wide + v,                                 \
                                   values == 32 ? s::cluster_norm_kernel<T, Squares, w, 32, true> : s::cluster_norm_kernel<T, Squares, w, 64, true>,\
                                   cluster, configured_shared_bytes(config_s, s::cluster_block_threads)));            \
    }                                                                                                                 \
    out.push_back(kernel_entry("split_partials_kernel<" + t + "Moments" + wide + ", true>", s::split_partials_kernel<T, Moments, w, true>, split));\
    out.push_back(kernel_entry("split_partials_kernel<" + t + "Squares" + wide + ", true>", s::split_partials_kernel<T, Squares, w, true>, split));\
    out.push_back(kernel_entry("split_store_kernel<" + type + ", true" + wide + ", true>", s::split_store_kernel<T, true, w, true>, split));\
    out.push_back(kernel_entry("split_store_kernel<" + type + ", false" + wide + ", true>", s::split_store_kernel<T, false, w, true>, split));\
}

STEPWISE_WINDOWED_KERNELS(any_row_alignment, AnyRowStep)
STEPWISE_WINDOWED_KERNELS(shifted_parameters, ShiftedParametersStep)
STEPWISE_WINDOWED_KERNELS(one_alignment_a_cluster, OneAlignmentAClusterStep)
STEPWISE_WINDOWED_KERNELS(one_load_copy_a_thread, OneLoadCopyAThreadStep)
STEPWISE_WINDOWED_KERNELS(bounded_window_registers, BoundedWindowRegistersStep)
STEPWISE_WINDOWED_KERNELS(row_ends_staged, RowEndsStagedStep)
STEPWISE_WINDOWED_KERNELS(row_ends_packed, RowEndsPackedStep)
STEPWISE_WINDOWED_KERNELS(many_rows_one_warp, ManyRowsOneWarpStep)
STEPWISE_WINDOWED_KERNELS(padding_by_whole_chunks, PaddingByWholeChunksStep)
STEPWISE_WINDOWED_KERNELS(lanes_known_at_compile_time, LanesKnownAtCompileTimeStep)
#undef STEPWISE_WINDOWED_KERNELS

//! Step 8's, 9's or 10's kernels (`K`), for fp32 and bf16.
template <typename K>
std::vector<KernelEntry> typed_kernels()
{
    std::vector<KernelEntry> out;
    add_typed_step_kernels<K, float>(out, "float");
    add_typed_step_kernels<K, __nv_bfloat16>(out, "__nv_bfloat16");
    return out;
}

std::vector<KernelEntry> with_the_row_kernels()
{
    std::vector<KernelEntry> out;
    add_typed_step_kernels<WithTheRowStep, float>(out, "float");
    add_with_the_row_kernels<float>(out, "float");
    add_typed_step_kernels<WithTheRowStep, __nv_bfloat16>(out, "__nv_bfloat16");
    add_with_the_row_kernels<__nv_bfloat16>(out, "__nv_bfloat16");
    return out;
}

//! Step `Step`'s (namespace `ns`) kernels of both types into `out`: those it shares with step 11 and its windowed ones.
#define STEPWISE_TYPED_AND_WINDOWED_KERNELS(ns, Step, out)                                                            \
    add_typed_step_kernels<Step, float>(out, "float");                                                                \
    add_##ns##_kernels<float>(out, "float");                                                                          \
    add_typed_step_kernels<Step, __nv_bfloat16>(out, "__nv_bfloat16");                                                \
    add_##ns##_kernels<__nv_bfloat16>(out, "__nv_bfloat16")

std::vector<KernelEntry> any_row_kernels()
{
    std::vector<KernelEntry> out;
    STEPWISE_TYPED_AND_WINDOWED_KERNELS(any_row_alignment, AnyRowStep, out);
    return out;
}

//! Steps 13's to 17's (namespace `ns`, traits `Step`): step 12's kernels, and the kernel that writes the shifted
//! copies of gamma (and beta).
#define STEPWISE_SHIFTED_PARAMETERS_KERNELS(ns, Step)                                                                 \
std::vector<KernelEntry> ns##_kernels()                                                                               \
{                                                                                                                     \
    namespace s = ns;                                                                                                 \
    std::vector<KernelEntry> out;                                                                                     \
    STEPWISE_TYPED_AND_WINDOWED_KERNELS(ns, Step, out);                                                               \
    const dim3 shift(s::shift_block_threads);                                                                         \
    for (const bool with_beta : {true, false}) {                                                                      \
        const std::string beta = with_beta ? "true" : "false";                                                        \
        out.push_back(kernel_entry("shift_parameters_kernel<float, " + beta + ", 4>",                                 \
                                   with_beta ? s::shift_parameters_kernel<float, true, 4>                             \
                                             : s::shift_parameters_kernel<float, false, 4>, shift));                  \
        out.push_back(kernel_entry("shift_parameters_kernel<__nv_bfloat16, " + beta + ", 8>",                         \
                                   with_beta ? s::shift_parameters_kernel<__nv_bfloat16, true, 8>                     \
                                             : s::shift_parameters_kernel<__nv_bfloat16, false, 8>, shift));          \
    }                                                                                                                 \
    return out;                                                                                                       \
}
STEPWISE_SHIFTED_PARAMETERS_KERNELS(shifted_parameters, ShiftedParametersStep)
STEPWISE_SHIFTED_PARAMETERS_KERNELS(one_alignment_a_cluster, OneAlignmentAClusterStep)
STEPWISE_SHIFTED_PARAMETERS_KERNELS(one_load_copy_a_thread, OneLoadCopyAThreadStep)
STEPWISE_SHIFTED_PARAMETERS_KERNELS(bounded_window_registers, BoundedWindowRegistersStep)
STEPWISE_SHIFTED_PARAMETERS_KERNELS(row_ends_staged, RowEndsStagedStep)
#undef STEPWISE_SHIFTED_PARAMETERS_KERNELS

//! Step 21's rows kernels of rows that fit a warp, of type `T` (named `type`): for each norm, values a thread (8 to
//! 32, 16-byte accesses, on and off 16-byte boundaries; 16 a value an access) the one that loads gamma and beta as
//! parameters_ahead says, at 1 to 32 lanes a row.
template <typename T>
void add_warp_rows_kernels(std::vector<KernelEntry>& out, const std::string& type)
{
    namespace s = lanes_known_at_compile_time;
    const std::string t = type + ", " + LanesKnownAtCompileTimeStep::name_space;
    const auto add_lanes = [&](auto stats, auto width, auto values, auto windowed, const std::string& norm) {
        using Stats = decltype(stats);
        constexpr int w = decltype(width)::value, v = decltype(values)::value;
        constexpr bool ahead = s::parameters_ahead<T, Stats, w, v>, window = decltype(windowed)::value;
        const std::string name = "norm_rows_kernel<" + t + norm + ", " + std::to_string(w) + ", " + std::to_string(v) +
                                 (ahead ? ", true" : ", false") + (window ? ", true, " : ", false, ");
        const auto add = [&](auto lanes) {
            constexpr int l = decltype(lanes)::value;
            out.push_back(kernel_entry(name + std::to_string(l) + ">", s::norm_rows_kernel<T, Stats, w, v, ahead, window, l>,
                                       dim3(s::short_rows_block)));
        };
        add(std::integral_constant<int, 1>{});
        add(std::integral_constant<int, 2>{});
        add(std::integral_constant<int, 4>{});
        add(std::integral_constant<int, 8>{});
        add(std::integral_constant<int, 16>{});
        add(std::integral_constant<int, 32>{});
    };
    constexpr std::integral_constant<int, 16 / sizeof(T)> wide{};
    const auto add_values = [&](auto values) {
        add_lanes(s::Moments{}, wide, values, std::false_type{}, "Moments");
        add_lanes(s::Squares{}, wide, values, std::false_type{}, "Squares");
        add_lanes(s::Moments{}, wide, values, std::true_type{}, "Moments");
        add_lanes(s::Squares{}, wide, values, std::true_type{}, "Squares");
    };
    add_values(std::integral_constant<int, 8>{});
    add_values(std::integral_constant<int, 16>{});
    add_values(std::integral_constant<int, 32>{});
    add_lanes(s::Moments{}, std::integral_constant<int, 1>{}, std::integral_constant<int, 16>{}, std::false_type{}, "Moments");
    add_lanes(s::Squares{}, std::integral_constant<int, 1>{}, std::integral_constant<int, 16>{}, std::false_type{}, "Squares");
}

//! Steps 18's to 21's (namespace `ns`, traits `Step`): step 17's kernels, their shift kernel writing the window's
//! copies or the packed rows' (`Packed`); then whatever `more` adds to `out`.
#define STEPWISE_PACKED_ROWS_KERNELS(ns, Step, more)                                                                  \
std::vector<KernelEntry> ns##_kernels()                                                                               \
{                                                                                                                     \
    namespace s = ns;                                                                                                 \
    std::vector<KernelEntry> out;                                                                                     \
    STEPWISE_TYPED_AND_WINDOWED_KERNELS(ns, Step, out);                                                               \
    const dim3 shift(s::shift_block_threads);                                                                         \
    const auto add = [&](const std::string& arguments, auto kernel) {                                                 \
        out.push_back(kernel_entry("shift_parameters_kernel<" + arguments + ">", kernel, shift));                     \
    };                                                                                                                \
    add("float, true, 4, false", s::shift_parameters_kernel<float, true, 4, false>);                                  \
    add("float, false, 4, false", s::shift_parameters_kernel<float, false, 4, false>);                                \
    add("__nv_bfloat16, true, 8, false", s::shift_parameters_kernel<__nv_bfloat16, true, 8, false>);                  \
    add("__nv_bfloat16, false, 8, false", s::shift_parameters_kernel<__nv_bfloat16, false, 8, false>);                \
    add("float, true, 4, true", s::shift_parameters_kernel<float, true, 4, true>);                                    \
    add("float, false, 4, true", s::shift_parameters_kernel<float, false, 4, true>);                                  \
    add("__nv_bfloat16, true, 8, true", s::shift_parameters_kernel<__nv_bfloat16, true, 8, true>);                    \
    add("__nv_bfloat16, false, 8, true", s::shift_parameters_kernel<__nv_bfloat16, false, 8, true>);                  \
    more;                                                                                                             \
    return out;                                                                                                       \
}
STEPWISE_PACKED_ROWS_KERNELS(row_ends_packed, RowEndsPackedStep, )
STEPWISE_PACKED_ROWS_KERNELS(many_rows_one_warp, ManyRowsOneWarpStep, )
STEPWISE_PACKED_ROWS_KERNELS(padding_by_whole_chunks, PaddingByWholeChunksStep, )
STEPWISE_PACKED_ROWS_KERNELS(lanes_known_at_compile_time, LanesKnownAtCompileTimeStep,
                             add_warp_rows_kernels<float>(out, "float");
                             add_warp_rows_kernels<__nv_bfloat16>(out, "__nv_bfloat16"))
#undef STEPWISE_PACKED_ROWS_KERNELS
#undef STEPWISE_TYPED_AND_WINDOWED_KERNELS

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
        {{"08_bf16_by_words", "bf16 in and out, widened a 32-bit word at a time",
          "snippets/normalization/08_bf16_by_words.cuh", "stepwise::normalization::bf16_by_words"},
         bf16_by_words::layer_norm,
         bf16_by_words::rms_norm,
         bf16_by_words::layer_norm,
         bf16_by_words::rms_norm,
         typed_kernels<ByWordsStep>(),
         true},
        {{"09_fewer_instructions_per_value", "Fewer instructions a value: plain squares, padding, shifts",
          "snippets/normalization/09_fewer_instructions_per_value.cuh", "stepwise::normalization::fewer_instructions"},
         fewer_instructions::layer_norm,
         fewer_instructions::rms_norm,
         fewer_instructions::layer_norm,
         fewer_instructions::rms_norm,
         typed_kernels<FewerInstructionsStep>(),
         true},
        {{"10_values_per_thread", "Values a thread by row length and by memory, blocks an SM",
          "snippets/normalization/10_values_per_thread.cuh", "stepwise::normalization::bf16_in_out"},
         bf16_in_out::layer_norm,
         bf16_in_out::rms_norm,
         bf16_in_out::layer_norm,
         bf16_in_out::rms_norm,
         typed_kernels<ValuesPerThreadStep>(),
         true,
         {"08_bf16"}},
        {{"11_parameters_with_the_row", "Short rows load gamma and beta with the row",
          "snippets/normalization/11_parameters_with_the_row.cuh", "stepwise::normalization::parameters_with_the_row"},
         parameters_with_the_row::layer_norm,
         parameters_with_the_row::rms_norm,
         parameters_with_the_row::layer_norm,
         parameters_with_the_row::rms_norm,
         with_the_row_kernels(),
         true,
         {"09_parameters_with_the_row"}},
        {{"12_any_row_alignment", "Rows at any alignment through 16-byte windows",
          "snippets/normalization/12_any_row_alignment.cuh", "stepwise::normalization::any_row_alignment"},
         any_row_alignment::layer_norm,
         any_row_alignment::rms_norm,
         any_row_alignment::layer_norm,
         any_row_alignment::rms_norm,
         any_row_kernels(),
         true},
        {{"13_shifted_parameters", "gamma and beta shifted once per row alignment, read 16 bytes at a time",
          "snippets/normalization/13_shifted_parameters.cuh", "stepwise::normalization::shifted_parameters"},
         shifted_parameters::layer_norm,
         shifted_parameters::rms_norm,
         shifted_parameters::layer_norm,
         shifted_parameters::rms_norm,
         shifted_parameters_kernels(),
         true},
        {{"14_one_alignment_a_cluster", "Every row of a cluster at one alignment, its shifted parameters in shared memory",
          "snippets/normalization/14_one_alignment_a_cluster.cuh", "stepwise::normalization::one_alignment_a_cluster"},
         one_alignment_a_cluster::layer_norm,
         one_alignment_a_cluster::rms_norm,
         one_alignment_a_cluster::layer_norm,
         one_alignment_a_cluster::rms_norm,
         one_alignment_a_cluster_kernels(),
         true},
        {{"15_one_load_copy_a_thread", "A thread whose window chunks all lie inside the row loads them unchecked",
          "snippets/normalization/15_one_load_copy_a_thread.cuh", "stepwise::normalization::one_load_copy_a_thread"},
         one_load_copy_a_thread::layer_norm,
         one_load_copy_a_thread::rms_norm,
         one_load_copy_a_thread::layer_norm,
         one_load_copy_a_thread::rms_norm,
         one_load_copy_a_thread_kernels(),
         true},
        {{"16_bounded_window_registers",
          "The windowed rows kernels of bf16 rows of 32 values a thread held to their aligned twins' registers",
          "snippets/normalization/16_bounded_window_registers.cuh", "stepwise::normalization::bounded_window_registers"},
         bounded_window_registers::layer_norm,
         bounded_window_registers::rms_norm,
         bounded_window_registers::layer_norm,
         bounded_window_registers::rms_norm,
         bounded_window_registers_kernels(),
         true},
        {{"17_row_ends_staged", "A cluster block's row ends staged beside its slice",
          "snippets/normalization/17_row_ends_staged.cuh", "stepwise::normalization::row_ends_staged"},
         row_ends_staged::layer_norm,
         row_ends_staged::rms_norm,
         row_ends_staged::layer_norm,
         row_ends_staged::rms_norm,
         row_ends_staged_kernels(),
         true},
        {{"18_row_ends_packed", "A row off a 16-byte boundary that fits a block packed as an aligned row",
          "snippets/normalization/18_row_ends_packed.cuh", "stepwise::normalization::row_ends_packed"},
         row_ends_packed::layer_norm,
         row_ends_packed::rms_norm,
         row_ends_packed::layer_norm,
         row_ends_packed::rms_norm,
         row_ends_packed_kernels(),
         true},
        {{"19_many_rows_one_warp", "Where rows are many, a bf16 LayerNorm row of up to 1024 values in one warp",
          "snippets/normalization/19_many_rows_one_warp.cuh", "stepwise::normalization::many_rows_one_warp"},
         many_rows_one_warp::layer_norm,
         many_rows_one_warp::rms_norm,
         many_rows_one_warp::layer_norm,
         many_rows_one_warp::rms_norm,
         many_rows_one_warp_kernels(),
         true},
        {{"20_padding_by_whole_chunks", "Values outside the row padded a whole chunk at a time",
          "snippets/normalization/20_padding_by_whole_chunks.cuh", "stepwise::normalization::padding_by_whole_chunks"},
         padding_by_whole_chunks::layer_norm,
         padding_by_whole_chunks::rms_norm,
         padding_by_whole_chunks::layer_norm,
         padding_by_whole_chunks::rms_norm,
         padding_by_whole_chunks_kernels(),
         true},
        {{"21_lanes_known_at_compile_time", "A row's lanes known at compile time",
          "snippets/normalization/21_lanes_known_at_compile_time.cuh",
          "stepwise::normalization::lanes_known_at_compile_time"},
         lanes_known_at_compile_time::layer_norm,
         lanes_known_at_compile_time::rms_norm,
         lanes_known_at_compile_time::layer_norm,
         lanes_known_at_compile_time::rms_norm,
         lanes_known_at_compile_time_kernels(),
         true},
    };
    return all;
}

#undef STEPWISE_REGISTER_KERNELS
#undef STEPWISE_QUALIFIED

}  // namespace stepwise::normalization
