// The SGEMM chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <string>

namespace stepwise::sgemm {
namespace {

TEST(SgemmRegistry, Steps9To11NeedSm80)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("sgemm");
    ASSERT_FALSE(chapter.is_null());
    for (const auto& step : chapter.at("steps")) {
        const std::string id = step.at("id");
        if (id < "09") {  // fp32 FMAs and plain loads: any GPU CUDA 13 supports
            EXPECT_FALSE(step.contains("needs")) << id;
        } else if (id < "12") {  // cp.async, TF32 WMMA
            EXPECT_EQ(step.value("needs", ""), "sm_80") << id;
        }
    }
}

}  // namespace
}  // namespace stepwise::sgemm
