// The dynamic-parallelism chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

namespace stepwise::dynamic_parallelism {
namespace {

TEST(DynamicParallelismRegistry, TheFirstStepAloneIsNotTimed)
{
    // It shows what nested launches print.
    const nlohmann::json chapter = stepwise::testing::registry_chapter("dynamic_parallelism");
    ASSERT_FALSE(chapter.is_null());
    for (const auto& step : chapter.at("steps")) {
        EXPECT_EQ(step.at("sizes").empty(), step.at("id") == "01_nested_hello_world") << step.at("id");
    }
}

TEST(DynamicParallelismRegistry, RacecheckLeavesTheChapterOut)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("dynamic_parallelism");
    ASSERT_FALSE(chapter.is_null());
    ASSERT_EQ(chapter.at("racecheck_exclude").size(), 1u);
    EXPECT_EQ(chapter.at("racecheck_exclude").at(0).at("tests"), chapter.at("gtest_prefix").get<std::string>() + "*");
}

}  // namespace
}  // namespace stepwise::dynamic_parallelism
