// The normalization backward chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stepwise::normalization_backward {
namespace {

TEST(NormBackwardRegistry, EveryStepInBothOperationsAndTypesAtTheMainShapesAndAnOddOne)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("normalization_backward");
    ASSERT_FALSE(chapter.is_null());
    ASSERT_EQ(chapter.at("ceilings").size(), 1u);
    EXPECT_EQ(chapter.at("share_of"), "device_copy");
    ASSERT_GE(chapter.at("steps").size(), 1u);
    for (const nlohmann::json& step : chapter.at("steps")) {
        std::set<std::string> problems;
        for (const nlohmann::json& size : step.at("sizes")) {
            problems.insert(size.at("problem").get<std::string>());
        }
        // Six main shapes and 4097 x 4095, each in two operations and two types.
        EXPECT_EQ(problems.size(), 28u) << step.at("id");
        EXPECT_EQ(problems.count("16384 x 8192 LayerNorm fp32"), 1u) << step.at("id");
        EXPECT_EQ(problems.count("4097 x 4095 RMSNorm bf16"), 1u) << step.at("id");
    }
}

}  // namespace
}  // namespace stepwise::normalization_backward
