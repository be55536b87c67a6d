// The normalization chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

namespace stepwise::normalization {
namespace {

TEST(NormalizationRegistry, PytorchsRowsAreTimedAtTheMainShapesInBothTypesWithTheStepsEpsilon)
{
    stepwise::testing::expect_pytorch_rows_at_the_main_shapes(
        "normalization", {"pytorch_layer_norm", "pytorch_rms_norm"},
        [](const nlohmann::json& size) { EXPECT_EQ(size.at("epsilon").get<float>(), 1e-5f) << size.at("problem"); });
}

}  // namespace
}  // namespace stepwise::normalization
