// The part of a chapter's measurement that every chapter does the same way: time a row (a step, a baseline or a
// ceiling at one size) in each of the chapter's timing modes, check what it wrote on the buffers that were timed,
// and append its rows to the chapter's object. A chapter says only what is its own: its inputs and launches, its
// reference and comparison, its accuracy fields and sizes.
#pragma once

#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/pick.hpp"
#include "core/sampler.hpp"

#include <nlohmann/json.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stepwise {

//! @brief What every chapter class shares: its registry entry, which its constructor fills in, and the frame of its
//!        measurement (the chapter's object before the rows, the share of the ceiling after them).
class ChapterBase : public Chapter {
public:
    const ChapterEntry& entry() const final { return entry_; }
    //! @brief measured_chapter(), the chapter's rows (measure_rows), then add_share_of_ceiling().
    nlohmann::json measure(MeasureContext& context, const std::vector<std::string>& step_ids) const final;

protected:
    ChapterBase(std::string id, std::string title, std::string share_of, std::string gtest_prefix);
    //! @brief Appends the rows of the ceilings, the baselines and the steps named in `step_ids` (in registry order) to
    //!        `chapter`'s lists.
    virtual void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                              nlohmann::json& chapter) const = 0;

    ChapterEntry entry_;
};

//! @brief The timing mode of one launch per sample, L2 flushed before each ("single_cold").
TimingMode single_cold_timing();

//! @brief The timing mode of 10 back-to-back launches per sample, L2 warm ("batch").
TimingMode batch_warm_timing();

//! @brief The launch floor: an empty kernel of one thread (empty_launch(), core/floor_kernels.hpp), at every size.
ReferenceEntry empty_launch_ceiling();

//! @brief What the check of a row found: the row's `validated`, `validation` and `accuracy` fields.
struct Validation {
    bool validated = false;
    std::string validation;
    nlohmann::json accuracy;
};

//! @brief One row to time at one size, and how to check what it wrote.
struct TimedRow {
    std::function<cudaError_t()> launch;                //!< one launch (or call) of what is timed
    std::int64_t n = 0;                                 //!< the row's problem size
    std::optional<std::int64_t> bytes = std::nullopt;   //!< bytes one launch moves (the rate's model), if any
    std::optional<std::int64_t> flops = std::nullopt;   //!< FLOPs one launch does, if any
    std::function<void()> reset = [] {};                //!< before each sample, outside the events (restores inputs)
    //! Before the checking launch: poison the output, restore an input the launch overwrites. With `check` unset the
    //! row is not checked.
    std::function<void()> prepare_check = [] {};
    //! After the checking launch, synchronized: compare what it wrote with the reference.
    std::function<Validation()> check = nullptr;
    //! true: checked after each timing mode's samples, each row with its own check; false: once, after the last
    //! mode's samples, and every row carries that check.
    bool check_each_timing = false;
    nlohmann::json fields = nlohmann::json::object();  //!< fields every row carries besides (a GEMM's shape)
};

//! @brief Whether the run measures step `id` at size `n`: selected on the command line (`step_ids`) and measured
//!        at that size by the registry.
bool measures_step(const ChapterEntry& chapter, const std::vector<std::string>& step_ids, const std::string& id,
                   std::int64_t n);

//! @brief The chapter's object of the measurement file before any row: chapter_header() and empty lists of
//!        ceilings, baselines and steps.
nlohmann::json measured_chapter(const ChapterEntry& chapter);

//! @brief Checks `row` once: `prepare_check`, one launch, a synchronization of `stream`, then `check`.
//! @throws CudaError when the launch or the synchronization fails
Validation run_check(cudaStream_t stream, const TimedRow& row);

//! @brief Adds a check's `validated`, `validation` and `accuracy` to a row.
void add_validation(nlohmann::json& row, const Validation& validation);

//! @brief Times `row` in each of the chapter's timing modes (named `what` at its problem size in messages and progress
//!        lines) and checks it.
//! @return one row per timing mode, in their order: timing_row()'s fields, `row.fields` and the check's
std::vector<nlohmann::json> time_rows(MeasureContext& context, const ChapterEntry& chapter, const std::string& what,
                                      const TimedRow& row);

//! @brief The step loop's body: the rows of step `step_id` (time_rows(), with the registry's fields and the step's
//!        GoogleTest counts) appended to `out["steps"]`.
void add_step_rows(nlohmann::json& out, MeasureContext& context, const ChapterEntry& chapter,
                   const std::string& step_id, const TimedRow& row);

//! @brief add_step_rows() of a launcher that takes a workspace, `run(d_temp, temp_bytes)` (CUB's convention: with a
//!        null `d_temp` it sets the bytes it needs): the workspace is allocated once, and `checked(launch)` makes the
//!        TimedRow of a launch on it.
template <class Run, class Checked>
void add_step_rows_with_workspace(nlohmann::json& out, MeasureContext& context, const ChapterEntry& chapter,
                                  const std::string& step_id, Run run, Checked checked)
{
    std::size_t temp_bytes = 0;
    STEPWISE_CUDA_CHECK(run(nullptr, temp_bytes));
    DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));
    add_step_rows(out, context, chapter, step_id, checked([&] { return run(d_temp.data(), temp_bytes); }));
}

//! @brief A ceiling's or a baseline's rows (time_rows(), with its id and title) appended to `out[list]`, `list`
//!        "ceilings" or "baselines". A ceiling is named "ceiling <id>" in messages, a baseline by its id.
void add_reference_rows(nlohmann::json& out, const std::string& list, MeasureContext& context,
                        const ChapterEntry& chapter, const ReferenceEntry& reference, const TimedRow& row);

//! The byte a check fills an output and the guard after it with before the checked launch (a NaN in every float type).
inline constexpr unsigned char poison_byte = 0xFF;
//! Bytes after each checked output that the launch must leave poisoned.
inline constexpr std::size_t guard_bytes = 256;

//! @brief Whether every byte of `bytes` from `from` on is still poison_byte: the guard after an output, untouched.
bool guard_kept(const std::vector<unsigned char>& bytes, std::size_t from);

//! @brief A library's call at one size with the plan picked for it (pick_fastest() under library_pick_rule).
struct PickedLibraryCall {
    const ReferenceEntry* baseline = nullptr;  //!< its registry entry
    Sampler::TimedCall call;                   //!< named "<id> at <size>" in progress lines
    std::string version;                       //!< the library's version: the row's `library`
    std::vector<PickedCandidate> candidates;   //!< the plans tried
    std::size_t picked = 0;                    //!< the one kept
};

//! @brief One size's library call (if any) and its steps' calls sampled in turn (Sampler::time_in_turn() in timing
//!        mode `mode`: a drift of the clocks falls on all of them alike), then each checked once by `validate` of its
//!        launch: the library's row appended to `out["baselines"]` (held to the steps' tolerance), each step's to
//!        `out["steps"]`. `steps` pairs a registry step's id with its call.
void add_rows_sampled_in_turn(nlohmann::json& out, MeasureContext& context, const ChapterEntry& chapter,
                              const TimingMode& mode, std::int64_t n, std::optional<std::int64_t> flops,
                              const std::optional<PickedLibraryCall>& library,
                              const std::vector<std::pair<std::string, Sampler::TimedCall>>& steps,
                              const std::function<Validation(const std::function<cudaError_t()>&)>& validate);

//! @brief The rows of a `num_rows` x `num_cols` matrix that a row-wise check compares with its reference: every row
//!        while they hold at most `values` values, else about `values` values of evenly spaced rows, the first
//!        and the last among them (at least one row).
std::vector<int> checked_rows(int num_rows, int num_cols, std::int64_t values);

}  // namespace stepwise
