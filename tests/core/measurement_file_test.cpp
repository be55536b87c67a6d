// The measurement file as a whole: schema 1 upgraded, a run merged into an earlier file of its GPU, another GPU's
// file refused, and the progress lines' estimate of the time left (no GPU needed).
#include "core/command_line.hpp"
#include "core/measurement_file.hpp"
#include "core/progress.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace stepwise {
namespace {

nlohmann::json gpu(const std::string& name = "Test GPU", int sm_count = 132)
{
    return {{"name", name},        {"slug", slugify(name)}, {"compute_capability", "9.0"}, {"sm_count", sm_count},
            {"l2_bytes", 52428800}, {"driver", "580.1"},     {"cuda_runtime", "13.0"},     {"cuda_driver", "13.0"},
            {"sm_clock_mhz", {{"before", 1980}, {"after", 1755}}},
            {"temperature_c", {{"before", 40}, {"after", 61}}}};
}

//! A chapter as the timing program writes it, with `rows` step rows; `commit` names its run (schema 2).
nlohmann::json chapter(const std::string& id, const std::string& commit, int rows = 1)
{
    nlohmann::json steps = nlohmann::json::array();
    for (int i = 0; i < rows; ++i) {
        steps.push_back({{"id", "01_first"}, {"n", i + 1}, {"timing", "single_cold"}, {"median_ms", 1.0}});
    }
    return {{"id", id},
            {"ceilings", nlohmann::json::array()},
            {"baselines", nlohmann::json::array()},
            {"steps", steps},
            {"run", {{"commit", commit}, {"date", "2026-11-25T10:00:00Z"}, {"seconds", 10.0 * rows}}}};
}

nlohmann::json file_of(const nlohmann::json& gpu_json, std::initializer_list<nlohmann::json> chapters)
{
    return {{"schema", 2},
            {"generator", "stepwise_bench"},
            {"gpu", gpu_json},
            {"run", {{"commit", "now"}, {"measured", nlohmann::json::array()}}},
            {"chapters", chapters}};
}

nlohmann::json schema_1_file()
{
    return {{"schema", 1},
            {"generator", "stepwise_bench"},
            {"gpu", gpu()},
            {"run",
             {{"date", "2026-11-23T10:00:00Z"},
              {"commit", "abc1234"},
              {"dirty", false},
              {"command", "stepwise_bench"},
              {"seed", 7},
              {"clock_source", "nvml"},
              {"stopping_rule", {{"min_samples", 10}}}}},
            {"chapters",
             {{{"id", "elementwise"}, {"measure_seconds", 12.5}, {"steps", {{{"id", "01_a"}, {"median_ms", 0.1}}}}},
              {{"id", "transpose"}, {"steps", nlohmann::json::array()}}}}};
}

std::vector<std::string> ids(const nlohmann::json& file)
{
    std::vector<std::string> out;
    for (const auto& c : file.at("chapters")) {
        out.push_back(c.at("id"));
    }
    return out;
}

TEST(MeasurementFile, SchemaOneIsUpgradedWithANoteEachChapterKeepingTheFilesRun)
{
    std::string note;
    const nlohmann::json file = upgraded_measurement(schema_1_file(), note);
    EXPECT_EQ(file.at("schema"), measurement_schema);
    EXPECT_NE(note.find("schema 1"), std::string::npos) << note;
    EXPECT_NE(note.find("abc1234"), std::string::npos) << note;
    EXPECT_EQ(note.find('\n'), std::string::npos) << "one line";
    for (const auto& c : file.at("chapters")) {
        const auto& run = c.at("run");
        EXPECT_EQ(run.at("commit"), "abc1234");
        EXPECT_EQ(run.at("date"), "2026-11-23T10:00:00Z");
        EXPECT_EQ(run.at("driver"), "580.1");
        EXPECT_EQ(run.at("sm_clock_mhz").at("after"), 1755);
        EXPECT_EQ(run.at("stopping_rule").at("min_samples"), 10);
        EXPECT_EQ(run.at("upgraded_from_schema"), 1);
        EXPECT_FALSE(c.contains("measure_seconds")) << "moved into the run";
        EXPECT_FALSE(run.contains("tests")) << "schema 1 had no chapter counts; none are made up";
    }
    EXPECT_EQ(file.at("chapters").at(0).at("run").at("seconds"), 12.5);
    EXPECT_FALSE(file.at("chapters").at(1).at("run").contains("seconds"));
    EXPECT_EQ(file.at("chapters").at(0).at("steps").at(0).at("median_ms"), 0.1) << "the numbers are not touched";
    EXPECT_EQ(file.at("run").at("measured"), (nlohmann::json{"elementwise", "transpose"}));
}

TEST(MeasurementFile, SchemaTwoIsReadAsItIsAndUnknownSchemasAreRefused)
{
    std::string note = "stale";
    const nlohmann::json current = file_of(gpu(), {chapter("elementwise", "a")});
    EXPECT_EQ(upgraded_measurement(current, note), current);
    EXPECT_TRUE(note.empty());
    nlohmann::json future = current;
    future["schema"] = 3;
    EXPECT_THROW(upgraded_measurement(future, note), std::runtime_error);
    EXPECT_THROW(upgraded_measurement(nlohmann::json{{"schema", 1}}, note), std::runtime_error) << "no generator";
    EXPECT_THROW(upgraded_measurement(nlohmann::json::array(), note), std::runtime_error);
}

TEST(MeasurementFile, ReadingABadFileIsAOneLineUsageErrorNamingIt)
{
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "stepwise_measurement_file_test";
    std::filesystem::create_directories(dir);
    const std::string corrupt = (dir / "corrupt.json").string();
    std::ofstream(corrupt) << "{\"schema\": 2, ";
    for (const std::string& path : {corrupt, (dir / "missing.json").string()}) {
        try {
            read_measurement_file(path);
            ADD_FAILURE() << path << " was read";
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        }
    }
    const std::string old = (dir / "old.json").string();
    std::ofstream(old) << schema_1_file().dump();
    const ReadMeasurement read = read_measurement_file(old);
    EXPECT_EQ(read.file.at("schema"), measurement_schema);
    EXPECT_FALSE(read.upgrade_note.empty());
    std::filesystem::remove_all(dir);
}

TEST(MeasurementFile, AMergeReplacesTheMeasuredChaptersAndKeepsTheOthersInTheGuidesOrder)
{
    const nlohmann::json base = file_of(gpu(), {chapter("elementwise", "old"), chapter("transpose", "old"),
                                                chapter("sgemm", "old"), chapter("retired", "old")});
    const nlohmann::json fresh = file_of(gpu(), {chapter("transpose", "new", 3)});
    const nlohmann::json merged =
        merged_measurement(base, "docs/measurements/test-gpu.json", fresh, {"elementwise", "transpose", "sgemm"});
    EXPECT_EQ(ids(merged), (std::vector<std::string>{"elementwise", "transpose", "sgemm", "retired"}))
        << "the registry's order, then a chapter this build does not know, kept";
    EXPECT_EQ(merged.at("chapters").at(1).at("run").at("commit"), "new");
    EXPECT_EQ(merged.at("chapters").at(1).at("steps").size(), 3u);
    for (int i : {0, 2, 3}) {
        EXPECT_EQ(merged.at("chapters").at(i), base.at("chapters").at(i)) << "kept as it was";
    }
    EXPECT_EQ(merged.at("run").at("kept"), (nlohmann::json{"elementwise", "sgemm", "retired"}));
    EXPECT_EQ(merged.at("run").at("kept_from"), "docs/measurements/test-gpu.json");
    EXPECT_EQ(merged.at("run").at("commit"), "now") << "the file's run is this run";
}

TEST(MeasurementFile, AMergeOfEveryChapterKeepsNothing)
{
    const nlohmann::json base = file_of(gpu(), {chapter("elementwise", "old")});
    const nlohmann::json merged = merged_measurement(base, "b.json", file_of(gpu(), {chapter("elementwise", "new")}),
                                                     {"elementwise"});
    EXPECT_EQ(merged.at("chapters").size(), 1u);
    EXPECT_EQ(merged.at("chapters").at(0).at("run").at("commit"), "new");
    EXPECT_TRUE(merged.at("run").at("kept").empty());
}

TEST(MeasurementFile, AMergeRefusesAnotherGpusFile)
{
    const nlohmann::json fresh = file_of(gpu(), {chapter("transpose", "new")});
    for (const nlohmann::json& other : {gpu("Other GPU"), gpu("Test GPU", 114)}) {
        try {
            merged_measurement(file_of(other, {chapter("transpose", "old")}), "other.json", fresh, {"transpose"});
            ADD_FAILURE() << "merged into " << other.dump();
        } catch (const UsageError& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find("refusing to merge into other.json"), std::string::npos) << message;
            EXPECT_NE(message.find("another GPU"), std::string::npos) << message;
        }
    }
    nlohmann::json same = gpu();
    same["driver"] = "590.0";  // a driver update is the same GPU
    EXPECT_NO_THROW(require_same_gpu(gpu(), file_of(same, {}), "same.json"));
}

TEST(Progress, NoEstimateWithoutAnEarlierRunOfTheChapter)
{
    EXPECT_FALSE(ChapterEstimate::of(nlohmann::json(), "transpose"));
    const nlohmann::json earlier = file_of(gpu(), {chapter("elementwise", "old", 4)});
    EXPECT_FALSE(ChapterEstimate::of(earlier, "transpose"));
    const auto estimate = ChapterEstimate::of(earlier, "elementwise");
    ASSERT_TRUE(estimate);
    EXPECT_EQ(estimate->previous_rows, 4u);
    EXPECT_DOUBLE_EQ(estimate->previous_seconds, 40.0);
}

TEST(Progress, TheTimeLeftFollowsThisRunsPaceOnceATenthIsDone)
{
    const ChapterEstimate estimate{100.0, 100};
    EXPECT_DOUBLE_EQ(estimate.seconds_left(0, 0.0), 100.0);
    EXPECT_DOUBLE_EQ(estimate.seconds_left(5, 50.0), 95.0) << "before a tenth: the earlier run's time";
    EXPECT_DOUBLE_EQ(estimate.seconds_left(50, 50.0), 50.0) << "as fast as before";
    EXPECT_DOUBLE_EQ(estimate.seconds_left(50, 100.0), 100.0) << "twice as slow";
    EXPECT_DOUBLE_EQ(estimate.seconds_left(50, 1000.0), 200.0) << "pace held to 4x";
    EXPECT_DOUBLE_EQ(estimate.seconds_left(120, 130.0), 0.0) << "more rows than before";
}

TEST(Progress, PrintsALinePerRowWithTheSizeAndTheEstimate)
{
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    Progress progress(out, file_of(gpu(), {chapter("transpose", "old", 2)}));
    progress.begin_chapter("transpose");
    progress.row_done("05_padded_tile at 8192 x 8192 float", "single_cold", 0.1234, 200);
    std::rewind(out);
    std::string text(4096, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), out));
    std::fclose(out);
    EXPECT_NE(text.find("transpose: 2 rows and 20 s in the earlier measurement"), std::string::npos) << text;
    EXPECT_NE(text.find("transpose [1/2, 0 s, about "), std::string::npos) << text;
    EXPECT_NE(text.find("05_padded_tile at 8192 x 8192 float, single_cold: median 0.1234 ms of 200 samples"),
              std::string::npos)
        << text;
}

}  // namespace
}  // namespace stepwise
