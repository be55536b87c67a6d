// The attention chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace stepwise::attention {
namespace {

TEST(AttentionRegistry, SamplesAreKeptAtAnyClock)
{
    // Sustained tensor-core work runs where the power limit puts the clock: every sample is kept.
    const nlohmann::json chapter = stepwise::testing::registry_chapter("attention");
    ASSERT_FALSE(chapter.is_null());
    for (const auto& timing : chapter.at("timings")) {
        EXPECT_EQ(timing.at("throttle_threshold"), 0.0);
    }
}

TEST(AttentionRegistry, PytorchsRowIsTimedAtEverySizeOfTheFinalStep)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("attention");
    ASSERT_FALSE(chapter.is_null());
    ASSERT_EQ(chapter.at("pytorch").size(), 1u);
    const nlohmann::json& row = chapter.at("pytorch").at(0);
    const nlohmann::json& sizes = chapter.at("steps").back().at("sizes");
    ASSERT_EQ(row.at("sizes").size(), sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(row.at("sizes").at(i).at("n"), sizes.at(i).at("n"));
        EXPECT_EQ(row.at("sizes").at(i).at("dtype"), "bf16");
        EXPECT_EQ(row.at("sizes").at(i).at("causal"), sizes.at(i).at("problem").get<std::string>().find(", causal") !=
                                                          std::string::npos);
    }
}

}  // namespace
}  // namespace stepwise::attention
