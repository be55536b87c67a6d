// CPU tests of the tensor-core GEMM chapter's CUTLASS baseline: which configurations the build compiled in, their
// names, and the shapes they take (nothing here touches a GPU).
#include "tensor_core_gemm/tensor_core_gemm_cutlass.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stepwise::tensor_core_gemm {
namespace {

TEST(TensorCoreGemmCutlass, HasConfigurationsExactlyWhereTheBuildHasCutlassAndSm90a)
{
#if STEPWISE_CUTLASS && STEPWISE_CUTLASS_SM90A
    EXPECT_FALSE(cutlass_gemms().empty());
    EXPECT_EQ(cutlass_unavailable_reason(), "");
    EXPECT_FALSE(cutlass_version().empty());
#else
    EXPECT_TRUE(cutlass_gemms().empty());
    EXPECT_NE(cutlass_unavailable_reason(), "");
    EXPECT_EQ(cutlass_version(), "");
#endif
}

TEST(TensorCoreGemmCutlass, IdsAreUniqueAndEveryConfigurationIsComplete)
{
    std::set<std::string> ids;
    for (const CutlassGemm& config : cutlass_gemms()) {
        EXPECT_TRUE(ids.insert(config.id).second) << config.id;
        EXPECT_FALSE(config.id.empty());
        EXPECT_FALSE(config.description.empty()) << config.id;
        EXPECT_NE(config.accepts, nullptr) << config.id;
        EXPECT_NE(config.workspace_bytes, nullptr) << config.id;
        EXPECT_NE(config.gemm, nullptr) << config.id;
    }
}

TEST(TensorCoreGemmCutlass, TakesAnyMButNAndKOnlyInWholeSixteenByteRows)
{
    for (const CutlassGemm& config : cutlass_gemms()) {
        EXPECT_TRUE(config.accepts(4096, 14336, 4096)) << config.id;
        EXPECT_TRUE(config.accepts(4095, 4096, 4096)) << config.id;
        EXPECT_TRUE(config.accepts(1, 8, 8)) << config.id;
        EXPECT_FALSE(config.accepts(4096, 4095, 4096)) << config.id;
        EXPECT_FALSE(config.accepts(4096, 4096, 4095)) << config.id;
        EXPECT_FALSE(config.accepts(0, 4096, 4096)) << config.id;
        EXPECT_FALSE(config.accepts(4096, 0, 4096)) << config.id;
        EXPECT_FALSE(config.accepts(4096, 4096, 0)) << config.id;
        EXPECT_FALSE(config.accepts(-8, 8, 8)) << config.id;
    }
}

}  // namespace
}  // namespace stepwise::tensor_core_gemm
