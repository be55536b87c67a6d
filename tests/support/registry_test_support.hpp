// What a chapter's tests of its own registry entry share: the entry, as the timing program builds it and as
// `--list --json` writes it.
#pragma once

#include "core/chapter.hpp"
#include "core/row_shapes.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::testing {

//! @brief Chapter `id`'s object of the registry's JSON (registry_json(make_chapters())); null, with a failure,
//!        where the registry has no such chapter.
inline nlohmann::json registry_chapter(const std::string& id)
{
    const nlohmann::json registry = registry_json(make_chapters());
    for (const nlohmann::json& chapter : registry.at("chapters")) {
        if (chapter.at("id") == id) {
            return chapter;
        }
    }
    ADD_FAILURE() << "the registry has no chapter " << id;
    return nullptr;
}

//! @brief The step `step_id` of a chapter's registry JSON; null, with a failure, where it has none.
inline nlohmann::json registry_step(const nlohmann::json& chapter, const std::string& step_id)
{
    for (const nlohmann::json& step : chapter.at("steps")) {
        if (step.at("id") == step_id) {
            return step;
        }
    }
    ADD_FAILURE() << "chapter " << chapter.at("id") << " has no step " << step_id;
    return nullptr;
}

//! @brief A row-wise chapter's PyTorch rows are `row_ids`, in order, each timed at the main shapes
//!        (core/row_shapes.hpp) in fp32 and bf16, and each size passes `check(size)` (the call's other arguments).
template <class Check>
void expect_pytorch_rows_at_the_main_shapes(const std::string& chapter_id, const std::vector<std::string>& row_ids,
                                           Check check)
{
    const nlohmann::json chapter = registry_chapter(chapter_id);
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
            const std::string problem = size.at("problem"), dtype = size.at("dtype");
            got.insert({size.at("shape").get<std::vector<int>>(), dtype});
            EXPECT_NE(problem.find(dtype), std::string::npos) << problem;
            check(size);
        }
        EXPECT_EQ(got, wanted) << row.at("id");
        EXPECT_EQ(row.at("sizes").size(), wanted.size()) << row.at("id");
    }
    EXPECT_EQ(ids, row_ids);
}

}  // namespace stepwise::testing
