// The softmax chapter's registry entry (no GPU needed).
#include "core/row_shapes.hpp"
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::softmax {
namespace {

TEST(SoftmaxRegistry, PytorchsRowsAreTimedAtTheMainShapesInBothTypes)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("softmax");
    ASSERT_FALSE(chapter.is_null());
    std::set<std::pair<std::vector<int>, std::string>> wanted;
    for (const auto& [rows, cols] : row_shapes::main_shapes) {
        for (const char* dtype : {"fp32", "bf16"}) {
            wanted.insert({{rows, cols}, dtype});
        }
    }
    std::vector<std::string> ids;
    for (const auto& row : chapter.at("pytorch")) {
        ids.push_back(row.at("id"));
        std::set<std::pair<std::vector<int>, std::string>> got;
        for (const auto& size : row.at("sizes")) {
            got.insert({size.at("shape").get<std::vector<int>>(), size.at("dtype").get<std::string>()});
            const std::string problem = size.at("problem"), dtype = size.at("dtype");
            EXPECT_NE(problem.find(dtype), std::string::npos) << problem;
        }
        EXPECT_EQ(got, wanted) << row.at("id");
        EXPECT_EQ(row.at("sizes").size(), wanted.size()) << row.at("id");
    }
    EXPECT_EQ(ids, (std::vector<std::string>{"pytorch_softmax"}));
}

}  // namespace
}  // namespace stepwise::softmax
