// The tensor-core GEMM chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

namespace stepwise::tensor_core_gemm {
namespace {

TEST(TensorCoreGemmRegistry, TheFrontPageSetsCublasLtsBestBesideTheFinalStep)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("tensor_core_gemm");
    ASSERT_FALSE(chapter.is_null());
    EXPECT_EQ(chapter.at("headline").at("baseline"), "cublaslt_gemm_bf16_best");
}

TEST(TensorCoreGemmRegistry, SamplesAreKeptAtAnyClockAndTheLibrariesLeftOutOfRacecheck)
{
    // Sustained tensor-core work runs where the power limit puts the clock: every sample is kept.
    const nlohmann::json chapter = stepwise::testing::registry_chapter("tensor_core_gemm");
    ASSERT_FALSE(chapter.is_null());
    for (const auto& timing : chapter.at("timings")) {
        EXPECT_EQ(timing.at("throttle_threshold"), 0.0);
    }
    EXPECT_EQ(chapter.at("racecheck_exclude").size(), 2u);  // cuBLAS's and CUTLASS's kernels, not ours
    EXPECT_TRUE(chapter.at("sass"));                        // the page counts HMMA against HGMMA
}

}  // namespace
}  // namespace stepwise::tensor_core_gemm
