#include "core/chapter.hpp"

#include "core/command_line.hpp"
#include "stepwise/source_hashes.hpp"

#include <algorithm>

#include <stdexcept>

namespace stepwise {

// Each chapter's folder, bench/<id>/, defines make_<id>_chapter(); the list of them is STEPWISE_CHAPTERS (the top
// level's CMakeLists.txt), written into stepwise/chapter_list.inc as STEPWISE_CHAPTER(id) lines.
#define STEPWISE_CHAPTER(id) std::unique_ptr<Chapter> make_##id##_chapter();
#include "stepwise/chapter_list.inc"
#undef STEPWISE_CHAPTER

std::vector<std::unique_ptr<Chapter>> make_chapters()
{
    std::vector<std::unique_ptr<Chapter>> chapters;
#define STEPWISE_CHAPTER(id) chapters.push_back(make_##id##_chapter());
#include "stepwise/chapter_list.inc"
#undef STEPWISE_CHAPTER
    return chapters;
}

std::string source_sha256(const std::string& file)
{
    for (const auto& entry : generated::source_hashes) {
        if (entry.file == file) {
            return std::string(entry.sha256);
        }
    }
    throw std::out_of_range("no source hash for " + file + " (is it under snippets/?)");
}

const StepEntry& find_step(const ChapterEntry& chapter, const std::string& id)
{
    for (const StepEntry& step : chapter.steps) {
        if (step.id == id) {
            return step;
        }
    }
    throw std::out_of_range("chapter " + chapter.id + " has no step " + id);
}

std::vector<std::int64_t> all_sizes(const ChapterEntry& chapter)
{
    std::vector<std::int64_t> sizes;
    for (const StepEntry& step : chapter.steps) {
        for (const ProblemSize& size : step.sizes) {
            sizes.push_back(size.n);
        }
    }
    for (const auto* references : {&chapter.ceilings, &chapter.baselines}) {
        for (const ReferenceEntry& reference : *references) {
            sizes.insert(sizes.end(), reference.sizes.begin(), reference.sizes.end());
        }
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

std::string problem_text(const ChapterEntry& chapter, std::int64_t n)
{
    for (const StepEntry& step : chapter.steps) {
        for (const ProblemSize& size : step.sizes) {
            if (size.n == n && !size.problem.empty()) {
                return size.problem;
            }
        }
    }
    return "n = " + std::to_string(n);
}

bool measured_at(const ChapterEntry& chapter, const std::string& id, std::int64_t n)
{
    for (const StepEntry& step : chapter.steps) {
        if (step.id == id) {
            return std::any_of(step.sizes.begin(), step.sizes.end(), [&](const ProblemSize& p) { return p.n == n; });
        }
    }
    for (const auto* references : {&chapter.ceilings, &chapter.baselines}) {
        for (const ReferenceEntry& reference : *references) {
            if (reference.id == id) {
                const auto& sizes = reference.sizes.empty() ? all_sizes(chapter) : reference.sizes;
                return std::find(sizes.begin(), sizes.end(), n) != sizes.end();
            }
        }
    }
    throw std::out_of_range("chapter " + chapter.id + " has no step, ceiling or baseline " + id);
}

void add_sweep(ChapterEntry& chapter, Sweep sweep)
{
    const auto in_sweep = [&](const std::string& id) {
        return std::find(sweep.rows.begin(), sweep.rows.end(), id) != sweep.rows.end();
    };
    std::vector<std::string> unknown = sweep.rows;
    const auto found = [&](const std::string& id) { unknown.erase(std::remove(unknown.begin(), unknown.end(), id), unknown.end()); };
    const std::vector<std::int64_t> main_sizes = all_sizes(chapter);
    for (const ProblemSize& size : sweep.sizes) {
        if (std::find(main_sizes.begin(), main_sizes.end(), size.n) != main_sizes.end()) {
            sweep.main_sizes.push_back(size.n);
        }
    }
    for (auto* references : {&chapter.ceilings, &chapter.baselines}) {
        for (ReferenceEntry& reference : *references) {
            if (reference.sizes.empty()) {
                reference.sizes = main_sizes;  // "every size" meant the main ones
            }
            if (in_sweep(reference.id)) {
                found(reference.id);
                for (const ProblemSize& size : sweep.sizes) {
                    if (std::find(reference.sizes.begin(), reference.sizes.end(), size.n) == reference.sizes.end()) {
                        reference.sizes.push_back(size.n);  // a sweep size may also be a main one
                    }
                }
            }
        }
    }
    for (StepEntry& step : chapter.steps) {
        if (in_sweep(step.id)) {
            found(step.id);
            for (const ProblemSize& size : sweep.sizes) {
                const auto same = [&](const ProblemSize& s) { return s.n == size.n; };
                if (std::none_of(step.sizes.begin(), step.sizes.end(), same)) {
                    step.sizes.push_back(size);
                }
            }
        }
    }
    if (!unknown.empty()) {
        throw std::logic_error("chapter " + chapter.id + ": the sweep names " + unknown.front() +
                               ", which is not one of its steps, ceilings or baselines");
    }
    chapter.sweep = std::move(sweep);
}

void add_reference_fields(nlohmann::json& row, const ReferenceEntry& reference)
{
    row["id"] = reference.id;
    row["title"] = reference.title;
}

void add_step_fields(nlohmann::json& row, const StepEntry& step, const TestCounts& tests)
{
    const std::int64_t n = row.at("n").get<std::int64_t>();
    const auto size = std::find_if(step.sizes.begin(), step.sizes.end(), [&](const ProblemSize& p) { return p.n == n; });
    if (size == step.sizes.end()) {
        throw std::out_of_range("step " + step.id + " has no size n = " + std::to_string(n));
    }
    row["id"] = step.id;
    row["title"] = step.title;
    row["file"] = step.file;
    row["source_sha256"] = source_sha256(step.file);
    row["problem"] = size->problem;
    row["same_operation"] = step.same_operation;
    row["beyond_article"] = step.beyond_article;
    row["tests"] = {{"passed", tests.passed}, {"failed", tests.failed}, {"skipped", tests.skipped}};
}

nlohmann::json chapter_header(const ChapterEntry& chapter)
{
    nlohmann::json timings = nlohmann::json::array();
    for (const TimingMode& t : chapter.timings) {
        nlohmann::json timing = {{"id", t.id},
                                 {"label", t.label},
                                 {"l2", t.flush_l2 ? "flushed" : "warm"},
                                 {"launches_per_sample", t.launches_per_sample}};
        if (t.throttle_threshold) {
            timing["throttle_threshold"] = *t.throttle_threshold;
        }
        timings.push_back(std::move(timing));
    }
    return {{"id", chapter.id}, {"title", chapter.title}, {"share_of", chapter.share_of}, {"timings", timings}};
}

nlohmann::json pytorch_size(const ProblemSize& size, const std::string& dtype, const nlohmann::json& extra)
{
    nlohmann::json j = {{"n", size.n}, {"problem", size.problem}, {"shape", size.shape}, {"dtype", dtype}};
    j.update(extra);
    return j;
}

nlohmann::json registry_json(const std::vector<std::unique_ptr<Chapter>>& chapters,
                             const std::vector<CompiledKernel>& compiled)
{
    nlohmann::json out = {{"schema", 1}, {"generator", "stepwise_bench"}, {"chapters", nlohmann::json::array()}};
    for (const auto& chapter : chapters) {
        const ChapterEntry& c = chapter->entry();
        nlohmann::json j = chapter_header(c);
        j["gtest_prefix"] = c.gtest_prefix;  // its GPU tests' suites start with it (make measure CHAPTERS=...)
        j["profile"] = nullptr;
        if (!c.profile.ncu_tests.empty() || !c.profile.race_demonstration_tests.empty()) {
            const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
            j["profile"] = {{"ncu_tests", or_null(c.profile.ncu_tests)},
                            {"ncu_kernels", or_null(c.profile.ncu_kernels)},
                            {"race_demonstration_tests", or_null(c.profile.race_demonstration_tests)}};
        }
        for (const char* kind : {"ceilings", "baselines"}) {
            j[kind] = nlohmann::json::array();
            for (const ReferenceEntry& r : std::string(kind) == "ceilings" ? c.ceilings : c.baselines) {
                nlohmann::json entry = {{"id", r.id}, {"title", r.title}};
                if (!r.sizes.empty()) {
                    entry["sizes"] = r.sizes;  // measured at these sizes only
                }
                j[kind].push_back(entry);
            }
        }
        j["steps"] = nlohmann::json::array();
        for (const StepEntry& s : c.steps) {
            nlohmann::json sizes = nlohmann::json::array();
            for (const ProblemSize& p : s.sizes) {
                nlohmann::json size = {{"n", p.n}, {"problem", p.problem}};
                if (!p.shape.empty()) {
                    size["shape"] = p.shape;
                }
                sizes.push_back(size);
            }
            nlohmann::json kernels = nlohmann::json::array();
            for (const KernelEntry& k : s.kernels) {
                kernels.push_back(kernel_registry_json(s.name_space, k, compiled));
            }
            nlohmann::json step = {{"id", s.id},
                                  {"title", s.title},
                                  {"file", s.file},
                                  {"namespace", s.name_space},
                                  {"launcher", s.launcher},
                                  {"source_sha256", source_sha256(s.file)},
                                  {"same_operation", s.same_operation},
                                  {"beyond_article", s.beyond_article},
                                  {"sizes", sizes},
                                  {"kernels", kernels}};
            if (!s.tiling.is_null()) {
                step["tiling"] = s.tiling;
            }
            if (!s.needs.empty()) {
                step["needs"] = s.needs;
            }
            if (!s.formerly.empty()) {
                step["formerly"] = s.formerly;  // the docs read a second GPU's rows of these ids as this step's
            }
            j["steps"].push_back(std::move(step));
        }
        j["pytorch"] = nlohmann::json::array();  // conf/pytorch_baselines.py times them (make measure)
        for (const PytorchRow& row : c.pytorch) {
            j["pytorch"].push_back({{"id", row.id}, {"sizes", row.sizes}});
        }
        j["racecheck_exclude"] = nlohmann::json::array();  // conf/measure.py's racecheck filter
        for (const RacecheckExclusion& e : c.racecheck_exclude) {
            j["racecheck_exclude"].push_back({{"tests", e.tests}, {"reason", e.reason}});
        }
        j["sass"] = c.sass;  // the build's sass/<id>.json (bench/CMakeLists.txt)
        if (c.headline) {
            j["headline"] = {{"n", c.headline->n},
                             {"timing", c.headline->timing},
                             {"first", c.headline->first},
                             {"final", c.headline->final}};
            if (!c.headline->baseline.empty()) {
                j["headline"]["baseline"] = c.headline->baseline;
            }
        }
        if (c.sweep) {
            nlohmann::json sizes = nlohmann::json::array();
            for (const ProblemSize& size : c.sweep->sizes) {
                sizes.push_back(size.n);
            }
            j["sweep"] = {{"sizes", sizes},
                          {"rows", c.sweep->rows},
                          {"footprint", {{"bytes_per_n", c.sweep->footprint_bytes_per_n},
                                         {"power", c.sweep->footprint_power}}}};
            if (!c.sweep->main_sizes.empty()) {
                j["sweep"]["main_sizes"] = c.sweep->main_sizes;  // also main sizes: the pages keep their tables
            }
            if (c.sweep->axis_shape_index >= 0) {
                j["sweep"]["axis"] = {{"label", c.sweep->axis_label}, {"shape_index", c.sweep->axis_shape_index}};
            }
        }
        out["chapters"].push_back(j);
    }
    if (!compiled.empty()) {
        out["compiled_by"] = {{"compiler", std::string("nvcc ") + STEPWISE_NVCC_VERSION},
                              {"report", "nvcc --resource-usage (ptxas) of the timing program's sources"}};
    }
    return out;
}

nlohmann::json step_runtime_resources(const StepEntry& step)
{
    nlohmann::json out = nlohmann::json::array();
    for (const KernelEntry& k : step.kernels) {
        out.push_back(runtime_resources_json(k));
    }
    return out;
}

nlohmann::json timing_row(const RowTiming& timing, std::int64_t n, const std::string& timing_id,
                          std::optional<std::int64_t> bytes, std::optional<std::int64_t> flops)
{
    const SampleSummary& s = timing.summary;
    const double seconds = s.median_ms * 1e-3;
    nlohmann::json row = {{"n", n},
                          {"timing", timing_id},
                          {"samples", s.samples},
                          {"median_ms", s.median_ms},
                          {"min_ms", s.min_ms},
                          {"max_ms", s.max_ms},
                          {"rel_noise", s.rel_noise},
                          {"throttled_samples", timing.throttled_samples},
                          {"bytes", nullptr},
                          {"gbps", nullptr},
                          {"flops", nullptr},
                          {"gflops", nullptr}};
    if (timing.sm_clock) {
        row["sm_clock_mhz"] = {{"median", timing.sm_clock->median_mhz},
                               {"min", timing.sm_clock->min_mhz},
                               {"max", timing.sm_clock->max_mhz}};
    }
    if (bytes) {
        row["bytes"] = *bytes;
        row["gbps"] = static_cast<double>(*bytes) / seconds * 1e-9;
    }
    if (flops) {
        row["flops"] = *flops;
        row["gflops"] = static_cast<double>(*flops) / seconds * 1e-9;
    }
    return row;
}

void add_share_of_ceiling(nlohmann::json& chapter)
{
    for (auto& step : chapter.at("steps")) {
        step["share_of_ceiling"] = nullptr;
        for (const auto& ceiling : chapter.at("ceilings")) {
            if (ceiling.at("id") != chapter.at("share_of") || ceiling.at("n") != step.at("n") ||
                ceiling.at("timing") != step.at("timing")) {
                continue;
            }
            // A rate where both have one (the step may move other bytes than the ceiling), else time.
            const bool rates = !ceiling.at("gbps").is_null() && !step.at("gbps").is_null();
            step["share_of_ceiling"] = rates ? step.at("gbps").get<double>() / ceiling.at("gbps").get<double>()
                                             : ceiling.at("median_ms").get<double>() /
                                                   step.at("median_ms").get<double>();
        }
    }
}

namespace {

std::string join_ids(const std::vector<std::string>& ids)
{
    std::string text;
    for (const auto& id : ids) {
        text += (text.empty() ? "" : ", ") + id;
    }
    return text;
}

}  // namespace

std::vector<Selection> select_steps(const std::vector<std::unique_ptr<Chapter>>& chapters,
                                    const std::vector<std::string>& chapter_ids,
                                    const std::vector<std::string>& step_ids)
{
    std::vector<std::string> known_chapters;
    for (const auto& c : chapters) {
        known_chapters.push_back(c->entry().id);
    }
    for (const auto& id : chapter_ids) {
        if (std::find(known_chapters.begin(), known_chapters.end(), id) == known_chapters.end()) {
            throw UsageError("unknown chapter '" + id + "' (known: " + join_ids(known_chapters) + ")");
        }
    }
    std::vector<Selection> selection;
    std::vector<bool> step_found(step_ids.size(), false);
    for (const auto& c : chapters) {
        const ChapterEntry& entry = c->entry();
        const bool chapter_named = std::find(chapter_ids.begin(), chapter_ids.end(), entry.id) != chapter_ids.end();
        Selection s{c.get(), {}};
        for (const StepEntry& step : entry.steps) {
            bool named = false;
            for (std::size_t i = 0; i < step_ids.size(); ++i) {
                if (step_ids[i] == step.id || step_ids[i] == entry.id + "/" + step.id) {
                    named = step_found[i] = true;
                }
            }
            const bool chapter_selected = chapter_ids.empty() || chapter_named;
            if (named || (step_ids.empty() && chapter_selected)) {
                s.step_ids.push_back(step.id);
            }
        }
        if (!s.step_ids.empty()) {
            selection.push_back(s);
        }
    }
    for (std::size_t i = 0; i < step_ids.size(); ++i) {
        if (!step_found[i]) {
            std::vector<std::string> known;
            for (const auto& c : chapters) {
                for (const StepEntry& step : c->entry().steps) {
                    known.push_back(c->entry().id + "/" + step.id);
                }
            }
            throw UsageError("unknown step '" + step_ids[i] + "' (known: " + join_ids(known) + ")");
        }
    }
    return selection;
}

TestCounts count_tests(const nlohmann::json& gtest_report, const std::string& suite_prefix,
                       const std::string& step_id)
{
    TestCounts counts;
    const std::string suffix = "/" + step_id;
    for (const auto& suite : gtest_report.at("testsuites")) {
        if (suite.at("name").get<std::string>().rfind(suite_prefix, 0) != 0) {
            continue;
        }
        for (const auto& test : suite.at("testsuite")) {
            const auto name = test.at("name").get<std::string>();
            const bool of_step = name.size() >= suffix.size() &&
                                 name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
            if (!step_id.empty() && !of_step) {
                continue;
            }
            if (test.contains("failures") && !test.at("failures").empty()) {
                ++counts.failed;
            } else if (test.value("result", "") == "SKIPPED" || test.value("status", "") == "NOTRUN") {
                ++counts.skipped;
            } else {
                ++counts.passed;
            }
        }
    }
    return counts;
}

}  // namespace stepwise
