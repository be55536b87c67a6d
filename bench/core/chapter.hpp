// What every chapter of the timing program provides: its registry entry and its measurement.
#pragma once

#include "core/resources.hpp"
#include "core/sampler.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stepwise {

//! @brief One problem size of a step ("n" is items, elements, or M = N = K).
struct ProblemSize {
    std::int64_t n = 0;
    std::string problem;  //!< e.g. "2048 x 2048 float"
    //! A GEMM's M, N, K where they differ (n is then a key, not a size: the pages leave it out of their plots
    //! against n, and cite it as MxNxK); empty otherwise.
    std::vector<int> shape = {};
};

//! @brief A step as the registry lists it.
struct StepEntry {
    std::string id, title, file, name_space, launcher;
    bool same_operation = true;
    bool beyond_article = false;
    std::vector<ProblemSize> sizes;
    std::vector<KernelEntry> kernels;  //!< what the launcher launches, with its block shapes
    nlohmann::json tiling = nullptr;   //!< how the step tiles the work (the SGEMM chapter's bounds), or null
    //! What the GPU and the build must offer beyond CUDA's baseline ("sm_90a": compute capability 9.0 and code built
    //! for it), or empty. A GPU without it skips the step; its measurement lists it under "unsupported".
    std::string needs = "";
    //! The ids the step had before the chapter's steps were split or renumbered: rows a GPU measured under one of
    //! them are this step's (as of their commit). None may be a current id of the chapter.
    std::vector<std::string> formerly = {};
};

//! @brief A ceiling or a library baseline.
struct ReferenceEntry {
    std::string id, title;
    //! The problem sizes it is measured at; empty: every size of the chapter.
    std::vector<std::int64_t> sizes = {};
};

//! @brief The sizes at which a few rows are measured beyond the chapter's main sizes, to show time and rate
//!        against problem size (where launch overhead ends, where the data stop fitting in L2).
struct Sweep {
    std::vector<ProblemSize> sizes;  //!< the extra sizes (the main sizes are measured anyway)
    std::vector<std::string> rows;   //!< ids of the steps, ceilings and baselines measured at them
    //! The bytes the problem occupies at size n: bytes_per_n * n^power (compared with the GPU's L2 size).
    double footprint_bytes_per_n = 0;
    int footprint_power = 1;
    //! Where the sizes are keys of shapes (ProblemSize::shape) rather than sizes: the pages draw the rows against
    //! `shape[axis_shape_index]` of each size of `sizes`, labelled `axis_label`. -1: against n.
    int axis_shape_index = -1;
    std::string axis_label = "";
    //! The sizes of `sizes` that are also main sizes of the chapter (add_sweep() fills it).
    std::vector<std::int64_t> main_sizes = {};
};

//! @brief What the front page shows of a chapter: its first and final step at one size and timing.
struct Headline {
    std::int64_t n = 0;
    std::string timing, first, final;
    //! The library baseline the front page sets beside the final step; empty: the chapter's first baseline.
    std::string baseline = "";
};

//! @brief A row of PyTorch's that `make measure` times beside the chapter's (conf/pytorch_baselines.py), and where.
struct PytorchRow {
    std::string id;  //!< the call, one of conf/pytorch_baselines.py's CALLS ("pytorch_softmax", ...)
    //! Its sizes: each a size of the chapter's final step ("n", "problem", "shape") with what the call needs besides
    //! ("dtype": "fp32" or "bf16"; "kv_heads" and "causal" for attention).
    std::vector<nlohmann::json> sizes;
};

//! @brief GoogleTest suites that `make measure` leaves out of compute-sanitizer's racecheck run, and why.
struct RacecheckExclusion {
    std::string tests;   //!< a gtest filter pattern ("DynamicParallelism*")
    std::string reason;  //!< why racecheck cannot check them
};

//! @brief A chapter as the registry lists it.
struct ChapterEntry {
    std::string id, title;
    std::string share_of;          //!< the ceiling whose rate is 100% in the share column
    std::string gtest_prefix;      //!< GoogleTest suites of this chapter start with this
    //! The profiler evidence `make profile` takes (conf/profile.py); empty: none.
    struct Profile {
        std::string ncu_tests;                  //!< gtest filter of the test that runs every step once
        std::string ncu_kernels;                //!< ncu's -k argument selecting the steps' kernels
        std::string race_demonstration_tests;   //!< gtest filter of a test to run under racecheck
    } profile;
    std::vector<TimingMode> timings;
    std::vector<ReferenceEntry> ceilings, baselines;
    std::vector<StepEntry> steps;
    std::optional<Headline> headline;  //!< what the front page shows (none: the chapter is not on it)
    std::optional<Sweep> sweep;        //!< none: no size sweep beyond the steps' own sizes
    std::vector<PytorchRow> pytorch;   //!< PyTorch's rows beside the chapter's (none: no PyTorch baseline)
    std::vector<RacecheckExclusion> racecheck_exclude;
    //! Whether the build counts the SASS of the chapter's kernels (namespace stepwise::<id>::) into sass/<id>.json,
    //! which its page's stepwise-sass directive reads.
    bool sass = false;
};

//! @brief GoogleTest counts for one step.
struct TestCounts {
    int passed = 0, failed = 0, skipped = 0;
};

//! @brief What a chapter's measurement needs from the run.
struct MeasureContext {
    Sampler& sampler;
    cudaStream_t stream;
    std::uint64_t seed;
    //! GoogleTest counts of a step (from the report the tests wrote in this run).
    std::function<TestCounts(const ChapterEntry&, const StepEntry&)> tests_of;
};

//! @brief A chapter: its registry entry, and a measurement of some of its steps.
class Chapter {
public:
    virtual ~Chapter() = default;
    virtual const ChapterEntry& entry() const = 0;
    //! @brief Measures the ceilings, baselines and the steps named in `step_ids` (in registry order).
    //! @return the chapter's object of the measurement file
    virtual nlohmann::json measure(MeasureContext& context, const std::vector<std::string>& step_ids) const = 0;
};

//! @brief Every chapter, in the guide's order: STEPWISE_CHAPTERS in the top level's CMakeLists.txt lists them, and
//!        the folder bench/<id>/ of each defines `std::unique_ptr<Chapter> make_<id>_chapter()`.
std::vector<std::unique_ptr<Chapter>> make_chapters();

// ---- helpers shared by the chapters (measurement.cpp) ----

//! @brief Adds a size sweep: `sweep.rows` (steps, ceilings or baselines) are also measured at `sweep.sizes`.
//!        Every other ceiling and baseline measured "at every size" is pinned to the main sizes first.
//! @throws std::logic_error for a row id the chapter does not have
void add_sweep(ChapterEntry& chapter, Sweep sweep);

//! @brief The ids of the `steps` asked for (in `step_ids`) that this GPU runs, in the steps' order; each one asked for
//!        that it cannot run goes into `unsupported` instead, with `reason(step)` (empty: it runs).
template <class Step, class Reason>
std::vector<std::string> runnable_steps(const std::vector<Step>& steps, const std::vector<std::string>& step_ids,
                                        Reason reason, nlohmann::json& unsupported)
{
    std::vector<std::string> runnable;
    for (const Step& step : steps) {
        if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end()) {
            continue;
        }
        if (const std::string why = reason(step); !why.empty()) {
            unsupported.push_back({{"id", step.id}, {"reason", why}});
        } else {
            runnable.push_back(step.id);
        }
    }
    return runnable;
}

//! @brief Whether the registry measures the step, ceiling or baseline `id` at size `n`.
bool measured_at(const ChapterEntry& chapter, const std::string& id, std::int64_t n);

//! @brief Every size at which the chapter measures something, ascending.
std::vector<std::int64_t> all_sizes(const ChapterEntry& chapter);

//! @brief The problem at size `n` as the chapter's steps name it ("8192 x 8192 float"), else "n = <n>".
std::string problem_text(const ChapterEntry& chapter, std::int64_t n);

//! @brief A size of a PyTorch row (PytorchRow::sizes): `size`'s n, problem and shape, its `dtype` and `extra`'s fields.
nlohmann::json pytorch_size(const ProblemSize& size, const std::string& dtype,
                            const nlohmann::json& extra = nlohmann::json::object());

//! @brief The SHA-256 of a step's source, embedded at build time (docs/_ext/stepwise_docs/source_hash.py).
//! @throws std::out_of_range for a file the build did not hash
std::string source_sha256(const std::string& file);

//! @brief The registry's JSON (what `--list --json` prints).
//! @param compiled the kernels of the build's ptxas reports: each step kernel's entry then carries the compiler's
//!        counts and its theoretical occupancy (empty: it does not)
//! @throws std::runtime_error when reports are given and a step's kernel is in none of them
nlohmann::json registry_json(const std::vector<std::unique_ptr<Chapter>>& chapters,
                             const std::vector<CompiledKernel>& compiled = {});

//! @brief The resources of a step's kernels as the CUDA runtime reports them on the current device.
nlohmann::json step_runtime_resources(const StepEntry& step);

//! @brief The fields every timed row has (see conf/measurement.schema.json, "timing_stats").
nlohmann::json timing_row(const RowTiming& timing, std::int64_t n, const std::string& timing_id,
                          std::optional<std::int64_t> bytes, std::optional<std::int64_t> flops);

//! @brief The registry entry of the step `id`.
//! @throws std::out_of_range for a step the chapter does not have
const StepEntry& find_step(const ChapterEntry& chapter, const std::string& id);

//! @brief Adds a ceiling's or baseline's id and title to its timed row.
void add_reference_fields(nlohmann::json& row, const ReferenceEntry& reference);

//! @brief Adds what every step row carries besides its timing: the registry's id, title, file and flags,
//!        the source hash, the problem at the row's `n`, and the step's GoogleTest counts.
void add_step_fields(nlohmann::json& row, const StepEntry& step, const TestCounts& tests);

//! @brief The chapter's object without rows: id, title, share_of, timings.
nlohmann::json chapter_header(const ChapterEntry& chapter);

//! @brief Adds `share_of_ceiling` to every step row (same n and timing as the `share_of` ceiling): the row's
//!        GB/s over the ceiling's where both have one, else the ceiling's time over the row's.
void add_share_of_ceiling(nlohmann::json& chapter);

//! @brief The steps a run measures, chapter by chapter.
struct Selection {
    const Chapter* chapter;
    std::vector<std::string> step_ids;
};

//! @brief Resolves `--chapter` and `--step` arguments (empty: everything).
//! @throws UsageError for an unknown chapter or step, naming what is known
std::vector<Selection> select_steps(const std::vector<std::unique_ptr<Chapter>>& chapters,
                                    const std::vector<std::string>& chapter_ids,
                                    const std::vector<std::string>& step_ids);

//! @brief GoogleTest counts per step from a report written with --gtest_output=json.
//! Test names ending in "/<step id>" in suites starting with the chapter's prefix belong to that step; with an empty
//! `step_id`, every test of those suites is counted (the chapter's).
TestCounts count_tests(const nlohmann::json& gtest_report, const std::string& suite_prefix,
                       const std::string& step_id);

}  // namespace stepwise
