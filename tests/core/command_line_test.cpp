#include "core/command_line.hpp"

#include <gtest/gtest.h>

namespace stepwise {
namespace {

TEST(CommandLine, DefaultsMeasureEverything)
{
    const Options o = parse_command_line({});
    EXPECT_FALSE(o.list);
    EXPECT_TRUE(o.chapters.empty());
    EXPECT_TRUE(o.steps.empty());
    EXPECT_EQ(o.commit, "unknown");
    EXPECT_FALSE(o.seed.has_value());
}

TEST(CommandLine, ParsesEveryOption)
{
    const Options o = parse_command_line({"--chapter", "elementwise", "--step", "elementwise/06_float4", "--step",
                                          "07_fast_intrinsics", "--gtest-report", "r.json", "--out-dir", "m", "--commit",
                                          "abc1234", "--dirty", "--seed", "42", "--min-samples", "5",
                                          "--max-samples", "9", "--target-rel-stderr", "0.01",
                                          "--max-seconds-per-row", "0.5", "--throttle-threshold", "0.8",
                                          "--warmup-samples", "1"});
    EXPECT_EQ(o.chapters, std::vector<std::string>{"elementwise"});
    EXPECT_EQ(o.steps, (std::vector<std::string>{"elementwise/06_float4", "07_fast_intrinsics"}));
    EXPECT_EQ(o.gtest_report, "r.json");
    EXPECT_EQ(o.out_dir, "m");
    EXPECT_EQ(o.commit, "abc1234");
    EXPECT_TRUE(o.dirty);
    EXPECT_EQ(o.seed, 42u);
    EXPECT_EQ(o.rule.min_samples, 5u);
    EXPECT_EQ(o.rule.max_samples, 9u);
    EXPECT_DOUBLE_EQ(o.rule.target_rel_stderr, 0.01);
    EXPECT_DOUBLE_EQ(o.rule.max_seconds_per_row, 0.5);
    EXPECT_DOUBLE_EQ(o.throttle_threshold, 0.8);
    EXPECT_EQ(o.warmup_samples, 1);
}

TEST(CommandLine, MergeUpgradeAndTheProbesJson)
{
    const Options merge = parse_command_line({"--chapter", "transpose", "--merge-from", "docs/measurements/g.json"});
    EXPECT_EQ(merge.merge_from, "docs/measurements/g.json");
    EXPECT_EQ(merge.chapters, std::vector<std::string>{"transpose"});
    const Options upgrade = parse_command_line({"--upgrade", "old.json", "--out", "new.json"});
    EXPECT_EQ(upgrade.upgrade, "old.json");
    EXPECT_EQ(upgrade.out_file, "new.json");
    const Options probe = parse_command_line({"--probe", "--json"});
    EXPECT_TRUE(probe.probe);
    EXPECT_TRUE(probe.json);
}

TEST(CommandLine, RejectsBadInputWithAOneLineReason)
{
    const auto message = [](const std::vector<std::string>& args) {
        try {
            parse_command_line(args);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(message({"--frobnicate"}), "unknown option '--frobnicate' (try --help)");
    EXPECT_EQ(message({"--chapter"}), "--chapter needs a value");
    EXPECT_NE(message({"--min-samples", "ten"}).find("wants a number"), std::string::npos);
    EXPECT_NE(message({"--throttle-threshold", "1.5"}).find("wants a number"), std::string::npos);
    EXPECT_EQ(message({"--min-samples", "10", "--max-samples", "5"}), "--min-samples is larger than --max-samples");
    EXPECT_EQ(message({"--json"}), "--json only goes with --list or --probe");
    EXPECT_EQ(message({"--list", "--probe"}), "give one of --list, --probe and --upgrade");
    EXPECT_EQ(message({"--upgrade", "a.json", "--chapter", "sgemm"}),
              "--upgrade FILE takes only --out (default: FILE itself)");
    EXPECT_EQ(message({"--list", "--merge-from", "a.json"}),
              "--merge-from goes with a measurement, not with --list, --probe or --upgrade");
    EXPECT_EQ(message({"--out", "a", "--out-dir", "b"}), "give --out or --out-dir, not both");
    for (const auto& args : {std::vector<std::string>{"--frobnicate"}, {"--seed", "-1"}}) {
        EXPECT_EQ(message(args).find('\n'), std::string::npos);
    }
}

TEST(CommandLine, SlugsAreLowerCaseWordsJoinedByDashes)
{
    EXPECT_EQ(slugify("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3");
    EXPECT_EQ(slugify("  NVIDIA  GeForce RTX 4090 (rev. 2) "), "nvidia-geforce-rtx-4090-rev-2");
    EXPECT_EQ(slugify("***"), "unknown-gpu");
}

}  // namespace
}  // namespace stepwise
