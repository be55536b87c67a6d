// The cross-entropy chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stepwise::cross_entropy {
namespace {

TEST(CrossEntropyRegistry, EveryStepInBothTypesBesideTheCopyAndNoLibrary)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("cross_entropy");
    ASSERT_FALSE(chapter.is_null());
    EXPECT_TRUE(chapter.at("baselines").empty()) << "cuDNN has no cross-entropy operation";
    ASSERT_EQ(chapter.at("ceilings").size(), 1u);
    EXPECT_EQ(chapter.at("ceilings")[0].at("id"), "device_copy");
    EXPECT_EQ(chapter.at("share_of"), "device_copy");
    ASSERT_EQ(chapter.at("steps").size(), 11u);
    for (const nlohmann::json& step : chapter.at("steps")) {
        std::set<std::string> problems;
        for (const nlohmann::json& size : step.at("sizes")) {
            problems.insert(size.at("problem").get<std::string>());
        }
        // Five main shapes and three odd ones, each in fp32 and bf16.
        EXPECT_EQ(problems.size(), 16u) << step.at("id");
        EXPECT_EQ(problems.count("8192 x 50257 bf16"), 1u) << step.at("id");
        EXPECT_EQ(problems.count("100000 x 3 fp32"), 1u) << step.at("id");
    }
}

}  // namespace
}  // namespace stepwise::cross_entropy
