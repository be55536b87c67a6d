// What a chapter's tests of its own registry entry share: the entry, as the timing program builds it and as
// `--list --json` writes it.
#pragma once

#include "core/chapter.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
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

}  // namespace stepwise::testing
