// The timing program's registry, step selection, rows and GoogleTest attribution (no GPU needed).
#include "core/chapter.hpp"
#include "core/command_line.hpp"
#include "core/cuda_check.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

namespace stepwise {
namespace {

TEST(Registry, EveryStepIsNumberedInOrderNamedAfterItsFileAndHashed)
{
    const auto chapters = make_chapters();
    ASSERT_FALSE(chapters.empty());
    std::set<std::string> namespaces;
    for (const auto& chapter : chapters) {
        const ChapterEntry& c = chapter->entry();
        int number = 0;
        const StepEntry* previous = nullptr;
        for (const StepEntry& s : c.steps) {
            ++number;
            char prefix[16];
            std::snprintf(prefix, sizeof prefix, "%02d_", number);
            EXPECT_EQ(s.id.rfind(prefix, 0), 0u) << s.id << " should be step " << number;
            EXPECT_EQ(source_sha256(s.file).size(), 64u);
            // A step has its own file, named after it; or it launches the previous step's source
            // differently (the occupancy chapter's block shapes): same file and namespace, another launcher.
            const bool variant = previous != nullptr && s.file == previous->file;
            if (variant) {
                EXPECT_EQ(s.name_space, previous->name_space) << s.id;
                EXPECT_NE(s.launcher, previous->launcher) << s.id << " launches what " << previous->id << " does";
            } else {
                // Named after the step; the first of a run of launch variants after its number only.
                const bool has_variants = number < static_cast<int>(c.steps.size()) && c.steps[number].file == s.file;
                if (has_variants) {
                    EXPECT_EQ(s.file.rfind("snippets/" + c.id + "/" + prefix, 0), 0u) << s.file;
                } else {
                    EXPECT_EQ(s.file, "snippets/" + c.id + "/" + s.id + ".cuh");
                }
                EXPECT_TRUE(namespaces.insert(s.name_space).second) << "two steps share " << s.name_space;
            }
            previous = &s;
        }
        bool share_of_is_a_ceiling = false;
        for (const ReferenceEntry& r : c.ceilings) {
            share_of_is_a_ceiling |= r.id == c.share_of;
        }
        EXPECT_TRUE(share_of_is_a_ceiling) << c.id << ": share_of names no ceiling";
        // A step may be untimed (it shows what it prints), its chapter's tests say which; the chapter is timed.
        EXPECT_TRUE(std::any_of(c.steps.begin(), c.steps.end(), [](const StepEntry& s) { return !s.sizes.empty(); }))
            << c.id << " times no step";
        EXPECT_FALSE(c.gtest_prefix.empty());
    }
    // A chapter's tests are the suites starting with its prefix (CHAPTERS=..., the per-step counts): no prefix
    // may start another chapter's, or one chapter would run and count the other's tests as its own.
    for (const auto& a : chapters) {
        for (const auto& b : chapters) {
            if (a != b) {
                EXPECT_NE(b->entry().gtest_prefix.rfind(a->entry().gtest_prefix, 0), 0u)
                    << b->entry().id << "'s tests start with " << a->entry().id << "'s prefix";
            }
        }
    }
}

TEST(Registry, JsonListsChaptersStepsAndHashes)
{
    const auto chapters = make_chapters();
    const nlohmann::json registry = registry_json(chapters);
    EXPECT_EQ(registry.at("schema"), 1);
    ASSERT_EQ(registry.at("chapters").size(), chapters.size());
    for (std::size_t i = 0; i < chapters.size(); ++i) {  // in the guide's order
        const ChapterEntry& entry = chapters[i]->entry();
        const nlohmann::json& chapter = registry.at("chapters").at(i);
        EXPECT_EQ(chapter.at("id"), entry.id);
        EXPECT_EQ(chapter.at("steps").at(0).at("id"), entry.steps.at(0).id);
        EXPECT_EQ(chapter.at("steps").at(0).at("source_sha256").get<std::string>().size(), 64u);
        EXPECT_EQ(chapter.at("timings").size(), entry.timings.size());
        EXPECT_EQ(chapter.at("pytorch").size(), entry.pytorch.size());
        EXPECT_EQ(chapter.at("racecheck_exclude").size(), entry.racecheck_exclude.size());
        EXPECT_EQ(chapter.at("sass"), entry.sass);
    }
}

TEST(Registry, EveryStepSaysWhatItsSnippetRequires)
{
    // A snippet that needs more than sm_75 says so (`constexpr const char* requirement = "sm_80";`); its registry
    // entry must too, or a GPU without it would time an empty kernel. This file is tests/core/, the snippets' root
    // is ../../.
    const std::filesystem::path root = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
    const std::regex requirement(R"re(constexpr const char\* requirement = "([^"]+)")re");
    int with_requirement = 0;
    for (const auto& chapter : make_chapters()) {
        for (const StepEntry& s : chapter->entry().steps) {
            std::ifstream in(root / s.file);
            ASSERT_TRUE(in) << root / s.file;
            std::stringstream text;
            text << in.rdbuf();
            const std::string source = text.str();
            std::smatch m;
            const std::string wanted = std::regex_search(source, m, requirement) ? m[1].str() : "";
            EXPECT_EQ(s.needs, wanted) << chapter->entry().id << "/" << s.id;
            with_requirement += !wanted.empty();
        }
    }
    EXPECT_GT(with_requirement, 0);
}

TEST(Unsupported, TheReasonNamesWhatTheStepNeedsAndThisGpu)
{
    EXPECT_EQ(unsupported_text("sm_80", 7, 5),
              "needs sm_80: compute capability 8.0 or higher and this code built for it (this GPU: 7.5)");
    EXPECT_EQ(unsupported_text("sm_120", 9, 0),
              "needs sm_120: compute capability 12.0 or higher and this code built for it (this GPU: 9.0)");
    EXPECT_EQ(unsupported_text("sm_90a", 12, 0),
              "needs sm_90a: a GPU of compute capability 9.0 and this code built for it (this GPU: 12.0)");
    // Nothing needed, or what is needed is there: no reason, and no device queried (this runs without a GPU).
    EXPECT_EQ(unsupported_reason("", false), "");
    EXPECT_EQ(unsupported_reason("sm_80", true), "");
}

TEST(Registry, EveryHeadlineNamesStepsMeasuredAtItsSizeAndTiming)
{
    int with_headline = 0;
    for (const auto& chapter : make_chapters()) {
        const ChapterEntry& c = chapter->entry();
        if (!c.headline) {
            continue;
        }
        ++with_headline;
        const Headline& h = *c.headline;
        EXPECT_TRUE(std::any_of(c.timings.begin(), c.timings.end(), [&](const TimingMode& t) { return t.id == h.timing; }))
            << c.id << ": headline timing " << h.timing;
        EXPECT_NE(h.first, h.final) << c.id;
        for (const std::string& id : {h.first, h.final}) {
            EXPECT_NO_THROW(find_step(c, id)) << c.id << "/" << id;
            EXPECT_TRUE(measured_at(c, id, h.n)) << c.id << "/" << id << " is not measured at the headline's n " << h.n;
        }
        if (!h.baseline.empty()) {
            EXPECT_TRUE(std::any_of(c.baselines.begin(), c.baselines.end(),
                                    [&](const ReferenceEntry& b) { return b.id == h.baseline; }))
                << c.id << ": headline baseline " << h.baseline << " is not one of its baselines";
            EXPECT_TRUE(measured_at(c, h.baseline, h.n)) << c.id << "/" << h.baseline << " at the headline's n";
        }
    }
    // Every chapter with timed steps is on the front page.
    EXPECT_EQ(with_headline, static_cast<int>(make_chapters().size()));
}

TEST(Registry, SweepRowsAreMeasuredAtTheSweepAndMainSizesAndNothingElseGrows)
{
    ChapterEntry c;
    c.id = "demo";
    c.steps = {StepEntry{"01_a", "", "", "", "", true, false, {{100, "100"}}, {}},
               StepEntry{"02_b", "", "", "", "", true, false, {{100, "100"}, {200, "200"}}, {}}};
    c.ceilings = {ReferenceEntry{"copy", ""}, ReferenceEntry{"empty", ""}};
    c.baselines = {ReferenceEntry{"lib", "", {200}}};
    add_sweep(c, Sweep{{{10, "10"}, {1000, "1000"}}, {"02_b", "copy", "lib"}, 4, 1});
    EXPECT_EQ(all_sizes(c), (std::vector<std::int64_t>{10, 100, 200, 1000}));
    for (const std::int64_t n : {10, 100, 200, 1000}) {
        EXPECT_TRUE(measured_at(c, "02_b", n)) << n;
        EXPECT_TRUE(measured_at(c, "copy", n)) << n;
        EXPECT_EQ(measured_at(c, "01_a", n), n == 100) << n;
        EXPECT_EQ(measured_at(c, "empty", n), n == 100 || n == 200) << n;  // "every size" meant the main ones
        EXPECT_EQ(measured_at(c, "lib", n), n != 100) << n;
    }
    EXPECT_THROW(measured_at(c, "nothing", 10), std::out_of_range);

    ChapterEntry unknown = c;
    EXPECT_THROW(add_sweep(unknown, Sweep{{{5, "5"}}, {"03_missing"}, 4, 1}), std::logic_error);
}

//! @brief The first chapter as if its second step had been renumbered: its entry names the id it had.
class RenumberedChapter : public Chapter {
public:
    RenumberedChapter() : entry_(make_chapters().front()->entry()) { entry_.steps.at(1).formerly = {"01_old_name"}; }
    const ChapterEntry& entry() const override { return entry_; }
    nlohmann::json measure(MeasureContext&, const std::vector<std::string>&) const override { return {}; }

private:
    ChapterEntry entry_;
};

TEST(Registry, AStepsFormerIdsAreListedAndOnlyThere)
{
    std::vector<std::unique_ptr<Chapter>> chapters;
    chapters.push_back(std::make_unique<RenumberedChapter>());
    const nlohmann::json steps = registry_json(chapters).at("chapters").at(0).at("steps");
    EXPECT_EQ(steps.at(1).at("formerly"), nlohmann::json::array({"01_old_name"}));
    EXPECT_FALSE(steps.at(0).contains("formerly"));
}

TEST(Registry, UnhashedFilesAreAnError)
{
    EXPECT_THROW(source_sha256("snippets/no_such_chapter/99_missing.cuh"), std::out_of_range);
}

TEST(Selection, EmptyMeansEverything)
{
    const auto chapters = make_chapters();
    const auto selection = select_steps(chapters, {}, {});
    ASSERT_EQ(selection.size(), chapters.size());
    EXPECT_EQ(selection[0].step_ids.size(), chapters[0]->entry().steps.size());
}

TEST(Selection, StepsByBareOrQualifiedId)
{
    const auto chapters = make_chapters();
    const ChapterEntry& first = chapters.front()->entry();
    // A step of the first chapter by its bare id (one no other chapter has), its first step by chapter/id.
    const auto unique = std::find_if(first.steps.rbegin(), first.steps.rend(), [&](const StepEntry& s) {
        return std::none_of(chapters.begin() + 1, chapters.end(), [&](const auto& c) {
            return std::any_of(c->entry().steps.begin(), c->entry().steps.end(),
                               [&](const StepEntry& other) { return other.id == s.id; });
        });
    });
    ASSERT_NE(unique, first.steps.rend());
    ASSERT_NE(unique->id, first.steps.front().id);
    const auto selection = select_steps(chapters, {}, {unique->id, first.id + "/" + first.steps.front().id});
    ASSERT_EQ(selection.size(), 1u);
    EXPECT_EQ(selection[0].step_ids, (std::vector<std::string>{first.steps.front().id, unique->id}));
}

TEST(Selection, UnknownChapterOrStepIsAUsageErrorNamingWhatIsKnown)
{
    const auto chapters = make_chapters();
    try {
        select_steps(chapters, {"nope"}, {});
        FAIL() << "accepted an unknown chapter";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("unknown chapter 'nope' (known: " + chapters.front()->entry().id, 0), 0u)
            << e.what();
    }
    const std::string unknown = chapters.front()->entry().id + "/99_nothing";
    try {
        select_steps(chapters, {}, {unknown});
        FAIL() << "accepted an unknown step";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("unknown step '" + unknown + "' (known: "), std::string::npos);
    }
}

TEST(Rows, RatesComeFromTheMedian)
{
    RowTiming t;
    t.summary = summarize({0.002, 0.001, 0.003});
    const nlohmann::json row = timing_row(t, 4, "batch", 2'000'000, 4'000'000);
    EXPECT_DOUBLE_EQ(row.at("median_ms").get<double>(), 0.002);
    EXPECT_DOUBLE_EQ(row.at("gbps").get<double>(), 1000.0);    // 2e6 bytes in 2 us
    EXPECT_DOUBLE_EQ(row.at("gflops").get<double>(), 2000.0);  // 4e6 flops in 2 us
    EXPECT_EQ(row.at("samples"), 3);
    const nlohmann::json no_rates = timing_row(t, 4, "batch", std::nullopt, std::nullopt);
    EXPECT_TRUE(no_rates.at("gbps").is_null());
    EXPECT_TRUE(no_rates.at("gflops").is_null());
}

TEST(Rows, TheSmClockOfTheKeptSamplesIsRecordedWhereItWasRead)
{
    RowTiming t;
    t.summary = summarize({0.002});
    EXPECT_FALSE(timing_row(t, 4, "batch", std::nullopt, std::nullopt).contains("sm_clock_mhz"));  // no NVML
    t.sm_clock = ClockSummary{1755, 1650, 1980};
    const nlohmann::json clock = timing_row(t, 4, "batch", std::nullopt, std::nullopt).at("sm_clock_mhz");
    EXPECT_DOUBLE_EQ(clock.at("median").get<double>(), 1755);
    EXPECT_DOUBLE_EQ(clock.at("min").get<double>(), 1650);
    EXPECT_DOUBLE_EQ(clock.at("max").get<double>(), 1980);
}

TEST(Registry, ATimingsOwnThrottleThresholdIsListedAndOnlyThere)
{
    const auto chapters = make_chapters();
    const nlohmann::json registry = registry_json(chapters);
    for (std::size_t i = 0; i < chapters.size(); ++i) {
        const std::vector<TimingMode>& modes = chapters[i]->entry().timings;
        const nlohmann::json& timings = registry.at("chapters").at(i).at("timings");
        ASSERT_EQ(timings.size(), modes.size());
        for (std::size_t t = 0; t < modes.size(); ++t) {
            EXPECT_EQ(timings.at(t).contains("throttle_threshold"), modes[t].throttle_threshold.has_value())
                << chapters[i]->entry().id;
            if (modes[t].throttle_threshold) {
                EXPECT_EQ(timings.at(t).at("throttle_threshold"), *modes[t].throttle_threshold);
            }
        }
    }
}

TEST(Rows, ShareOfCeilingMatchesSizeAndTiming)
{
    nlohmann::json chapter = {
        {"share_of", "floor"},
        {"ceilings",
         {{{"id", "floor"}, {"n", 8}, {"timing", "batch"}, {"median_ms", 1.0}, {"gbps", nullptr}},
          {{"id", "floor"}, {"n", 8}, {"timing", "cold"}, {"median_ms", 2.0}, {"gbps", nullptr}},
          {{"id", "other"}, {"n", 8}, {"timing", "batch"}, {"median_ms", 0.1}, {"gbps", nullptr}}}},
        {"steps",
         {{{"id", "01_a"}, {"n", 8}, {"timing", "batch"}, {"median_ms", 4.0}, {"gbps", nullptr}},
          {{"id", "01_a"}, {"n", 8}, {"timing", "cold"}, {"median_ms", 4.0}, {"gbps", nullptr}},
          {{"id", "01_a"}, {"n", 16}, {"timing", "batch"}, {"median_ms", 4.0}, {"gbps", nullptr}}}}};
    add_share_of_ceiling(chapter);
    EXPECT_DOUBLE_EQ(chapter["steps"][0]["share_of_ceiling"].get<double>(), 0.25);
    EXPECT_DOUBLE_EQ(chapter["steps"][1]["share_of_ceiling"].get<double>(), 0.5);
    EXPECT_TRUE(chapter["steps"][2]["share_of_ceiling"].is_null());
}

TEST(Rows, ShareOfCeilingComparesRatesWhenTheBytesDiffer)
{
    // A reduction reads n values; the copy ceiling reads and writes them: compare GB/s, not time.
    nlohmann::json chapter = {
        {"share_of", "copy"},
        {"ceilings", {{{"id", "copy"}, {"n", 8}, {"timing", "cold"}, {"median_ms", 2.0}, {"gbps", 3000.0}}}},
        {"steps", {{{"id", "01_a"}, {"n", 8}, {"timing", "cold"}, {"median_ms", 1.0}, {"gbps", 2400.0}}}}};
    add_share_of_ceiling(chapter);
    EXPECT_DOUBLE_EQ(chapter["steps"][0]["share_of_ceiling"].get<double>(), 0.8);
}

TEST(GoogleTestReport, CountsEachStepsPassedFailedAndSkippedTests)
{
    const nlohmann::json report = nlohmann::json::parse(R"({"testsuites": [
      {"name": "Elementwise/StepTest", "testsuite": [
        {"name": "A/01_original_kernel_a", "status": "RUN", "result": "COMPLETED"},
        {"name": "B/01_original_kernel_a", "status": "RUN", "result": "COMPLETED", "failures": [{"failure": "x"}]},
        {"name": "C/01_original_kernel_a", "status": "RUN", "result": "SKIPPED"},
        {"name": "A/011_original_kernel_a", "status": "RUN", "result": "COMPLETED"},
        {"name": "A/02_block_512x1", "status": "RUN", "result": "COMPLETED"}]},
      {"name": "ElementwiseAnyInput/AnyInputStepTest", "testsuite": [
        {"name": "R/01_original_kernel_a", "status": "RUN", "result": "COMPLETED"}]},
      {"name": "Reduction/StepTest", "testsuite": [
        {"name": "A/01_original_kernel_a", "status": "RUN", "result": "COMPLETED"}]}]})");
    const TestCounts counts = count_tests(report, "Elementwise", "01_original_kernel_a");
    EXPECT_EQ(counts.passed, 2);
    EXPECT_EQ(counts.failed, 1);
    EXPECT_EQ(counts.skipped, 1);
    const TestCounts none = count_tests(report, "Elementwise", "07_fast_intrinsics");
    EXPECT_EQ(none.passed + none.failed + none.skipped, 0);
}

}  // namespace
}  // namespace stepwise
