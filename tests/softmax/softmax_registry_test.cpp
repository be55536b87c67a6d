// The softmax chapter's registry entry (no GPU needed).
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

namespace stepwise::softmax {
namespace {

TEST(SoftmaxRegistry, PytorchsRowIsTimedAtTheMainShapesInBothTypes)
{
    stepwise::testing::expect_pytorch_rows_at_the_main_shapes("softmax", {"pytorch_softmax"},
                                                              [](const nlohmann::json&) {});
}

}  // namespace
}  // namespace stepwise::softmax
