// The attention backward chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace stepwise::attention_backward {
namespace {

TEST(AttnBackwardRegistry, EveryStepAtTheMainShapeCausalAndNotSamplesKeptAtAnyClock)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("attention_backward");
    ASSERT_FALSE(chapter.is_null());
    EXPECT_EQ(chapter.at("share_of"), "tensor_peak");
    for (const auto& timing : chapter.at("timings")) {
        EXPECT_EQ(timing.at("throttle_threshold"), 0.0);  // sustained tensor-core work: every sample kept
    }
    for (const nlohmann::json& step : chapter.at("steps")) {
        int main_sizes = 0;
        for (const nlohmann::json& size : step.at("sizes")) {
            const std::string problem = size.at("problem");
            main_sizes += problem == "4 x 16 x 4096, head dim 128, non-causal" ||
                          problem == "4 x 16 x 4096, head dim 128, causal";
        }
        EXPECT_EQ(main_sizes, 2) << step.at("id");
    }
}

TEST(AttnBackwardRegistry, PytorchsRowIsTimedAtEverySizeOfTheFinalStep)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("attention_backward");
    ASSERT_FALSE(chapter.is_null());
    ASSERT_EQ(chapter.at("pytorch").size(), 1u);
    const nlohmann::json& row = chapter.at("pytorch").at(0);
    EXPECT_EQ(row.at("id"), "pytorch_sdpa_backward_bf16");
    const nlohmann::json& sizes = chapter.at("steps").back().at("sizes");
    ASSERT_EQ(row.at("sizes").size(), sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        EXPECT_EQ(row.at("sizes").at(i).at("n"), sizes.at(i).at("n"));
        EXPECT_EQ(row.at("sizes").at(i).at("causal"), sizes.at(i).at("problem").get<std::string>().find(", causal") !=
                                                          std::string::npos);
    }
}

}  // namespace
}  // namespace stepwise::attention_backward
