// The reduction chapter's registry entry, and a row's fields from it (no GPU needed).
#include "core/chapter.hpp"
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace stepwise::reduction {
namespace {

TEST(ReductionRegistry, HeadlineAndSweep)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("reduction");
    ASSERT_FALSE(chapter.is_null());
    EXPECT_EQ(chapter.at("headline").at("n"), 1 << 28);
    EXPECT_EQ(chapter.at("headline").at("final"), "17_single_pass");
    EXPECT_FALSE(chapter.at("headline").contains("baseline"));  // its first baseline, CUB's
    const nlohmann::json& sweep = chapter.at("sweep");
    EXPECT_EQ(sweep.at("sizes").front(), 1 << 10);
    EXPECT_EQ(sweep.at("sizes").back(), 1 << 30);
    EXPECT_EQ(sweep.at("sizes").size(), 19u);  // 2^10 .. 2^30 but the main sizes 2^22 and 2^28
    EXPECT_EQ(sweep.at("footprint").at("bytes_per_n"), 4.0);
    EXPECT_EQ(stepwise::testing::registry_step(chapter, "17_single_pass").at("sizes").size(), 21u);
    EXPECT_EQ(stepwise::testing::registry_step(chapter, "01_neighbored_pairs").at("sizes").size(), 2u);
}

TEST(ReductionRegistry, StepFieldsComeFromTheRegistryAtTheRowsSize)
{
    const auto chapters = make_chapters();
    const auto found = std::find_if(chapters.begin(), chapters.end(),
                                    [](const auto& c) { return c->entry().id == "reduction"; });
    ASSERT_NE(found, chapters.end());
    const ChapterEntry& reduction = (*found)->entry();
    const StepEntry& step = find_step(reduction, "17_single_pass");
    nlohmann::json row = {{"n", 268435456}};
    add_step_fields(row, step, TestCounts{7, 0, 1});
    EXPECT_EQ(row.at("id"), "17_single_pass");
    EXPECT_EQ(row.at("file"), "snippets/reduction/17_single_pass.cuh");
    EXPECT_EQ(row.at("source_sha256"), source_sha256(step.file));
    EXPECT_EQ(row.at("problem"), "2^28 int");
    EXPECT_EQ(row.at("beyond_article"), true);
    EXPECT_EQ(row.at("tests").at("passed"), 7);
    EXPECT_EQ(row.at("tests").at("skipped"), 1);
    nlohmann::json unknown_size = {{"n", 3}};
    EXPECT_THROW(add_step_fields(unknown_size, step, TestCounts{}), std::out_of_range);
    EXPECT_THROW(find_step(reduction, "99_nothing"), std::out_of_range);
}

TEST(ReductionRegistry, RacecheckLeavesOutTheRaceShownOnPurpose)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("reduction");
    ASSERT_FALSE(chapter.is_null());
    ASSERT_EQ(chapter.at("racecheck_exclude").size(), 1u);
    EXPECT_EQ(chapter.at("racecheck_exclude").at(0).at("tests"), chapter.at("profile").at("race_demonstration_tests"));
}

}  // namespace
}  // namespace stepwise::reduction
