#include "core/step_loop.hpp"

#include "core/cuda_check.hpp"

#include <algorithm>
#include <utility>

namespace stepwise {

ChapterBase::ChapterBase(std::string id, std::string title, std::string share_of, std::string gtest_prefix)
{
    entry_.id = std::move(id);
    entry_.title = std::move(title);
    entry_.share_of = std::move(share_of);
    entry_.gtest_prefix = std::move(gtest_prefix);
}

nlohmann::json ChapterBase::measure(MeasureContext& context, const std::vector<std::string>& step_ids) const
{
    nlohmann::json chapter = measured_chapter(entry_);
    measure_rows(context, step_ids, chapter);
    add_share_of_ceiling(chapter);
    return chapter;
}

TimingMode single_cold_timing()
{
    return {"single_cold", "events around one launch; L2 flushed before each sample", true, 1};
}

TimingMode batch_warm_timing()
{
    return {"batch", "events around 10 back-to-back launches, time per launch; L2 warm", false, 10};
}

ReferenceEntry empty_launch_ceiling() { return {"empty_launch", "an empty kernel, one thread (the launch floor)"}; }

bool measures_step(const ChapterEntry& chapter, const std::vector<std::string>& step_ids, const std::string& id,
                   std::int64_t n)
{
    return std::find(step_ids.begin(), step_ids.end(), id) != step_ids.end() && measured_at(chapter, id, n);
}

nlohmann::json measured_chapter(const ChapterEntry& chapter)
{
    nlohmann::json out = chapter_header(chapter);
    for (const char* list : {"ceilings", "baselines", "steps"}) {
        out[list] = nlohmann::json::array();
    }
    return out;
}

Validation run_check(cudaStream_t stream, const TimedRow& row)
{
    row.prepare_check();
    STEPWISE_CUDA_CHECK(row.launch());
    STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return row.check();
}

void add_validation(nlohmann::json& row, const Validation& validation)
{
    row["validated"] = validation.validated;
    row["validation"] = validation.validation;
    row["accuracy"] = validation.accuracy;
}

std::vector<nlohmann::json> time_rows(MeasureContext& context, const ChapterEntry& chapter, const std::string& what,
                                      const TimedRow& row)
{
    std::vector<nlohmann::json> rows;
    const std::string named = what + " at " + problem_text(chapter, row.n);
    for (const TimingMode& mode : chapter.timings) {
        nlohmann::json timed =
            timing_row(context.sampler.time(named, mode, row.reset, row.launch), row.n, mode.id, row.bytes, row.flops);
        timed.update(row.fields);
        if (row.check && row.check_each_timing) {
            add_validation(timed, run_check(context.stream, row));
        }
        rows.push_back(std::move(timed));
    }
    if (row.check && !row.check_each_timing) {
        const Validation validation = run_check(context.stream, row);
        for (nlohmann::json& timed : rows) {
            add_validation(timed, validation);
        }
    }
    return rows;
}

void add_step_rows(nlohmann::json& out, MeasureContext& context, const ChapterEntry& chapter,
                   const std::string& step_id, const TimedRow& row)
{
    const StepEntry& step = find_step(chapter, step_id);
    const TestCounts tests = context.tests_of(chapter, step);
    for (nlohmann::json& timed : time_rows(context, chapter, step_id, row)) {
        add_step_fields(timed, step, tests);
        out["steps"].push_back(std::move(timed));
    }
}

void add_reference_rows(nlohmann::json& out, const std::string& list, MeasureContext& context,
                        const ChapterEntry& chapter, const ReferenceEntry& reference, const TimedRow& row)
{
    const std::string what = list == "ceilings" ? "ceiling " + reference.id : reference.id;
    for (nlohmann::json& timed : time_rows(context, chapter, what, row)) {
        add_reference_fields(timed, reference);
        out[list].push_back(std::move(timed));
    }
}

std::vector<int> checked_rows(int num_rows, int num_cols, std::int64_t values)
{
    std::vector<int> out;
    const std::int64_t wanted = std::max<std::int64_t>(1, std::min<std::int64_t>(num_rows, values / num_cols));
    for (std::int64_t i = 0; i < wanted; ++i) {
        out.push_back(static_cast<int>(wanted == 1 ? 0 : i * (num_rows - 1) / (wanted - 1)));
    }
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

bool guard_kept(const std::vector<unsigned char>& bytes, std::size_t from)
{
    return from <= bytes.size() && std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end(),
                                               [](unsigned char b) { return b == poison_byte; });
}

void add_rows_sampled_in_turn(nlohmann::json& out, MeasureContext& context, const ChapterEntry& chapter,
                              const TimingMode& mode, std::int64_t n, std::optional<std::int64_t> flops,
                              const std::optional<PickedLibraryCall>& library,
                              const std::vector<std::pair<std::string, Sampler::TimedCall>>& steps,
                              const std::function<Validation(const std::function<cudaError_t()>&)>& validate)
{
    std::vector<Sampler::TimedCall> calls;
    if (library) {
        calls.push_back(library->call);
    }
    for (const auto& step : steps) {
        calls.push_back(step.second);
    }
    const std::vector<RowTiming> timings = context.sampler.time_in_turn(calls, mode, [] {});
    std::size_t next = 0;
    if (library) {
        nlohmann::json row = timing_row(timings[next++], n, mode.id, std::nullopt, flops);
        add_reference_fields(row, *library->baseline);
        row["library"] = library->version;
        add_pick(row, library->candidates, library->picked, library_pick_rule);
        add_validation(row, validate(library->call.launch));
        out["baselines"].push_back(row);
    }
    for (const auto& [id, call] : steps) {
        const StepEntry& registry_step = find_step(chapter, id);
        nlohmann::json row = timing_row(timings[next++], n, mode.id, std::nullopt, flops);
        add_step_fields(row, registry_step, context.tests_of(chapter, registry_step));
        add_validation(row, validate(call.launch));
        out["steps"].push_back(row);
    }
}

}  // namespace stepwise
