// CPU tests of how a tuned library baseline picks its candidate at a problem, and how its row records the pick.
#include "core/pick.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace stepwise {
namespace {

TEST(LibraryPick, KeepsTheSmallestMedianAndTheFirstOfEqualOnes)
{
    EXPECT_EQ(index_of_fastest({0.31, 0.30, 0.32}), 1u);
    EXPECT_EQ(index_of_fastest({0.5}), 0u);
    EXPECT_EQ(index_of_fastest({0.4, 0.2, 0.2, 0.3}), 1u);
}

TEST(LibraryPick, RefusesToPickFromNothing)
{
    EXPECT_THROW(index_of_fastest({}), std::invalid_argument);
    EXPECT_THROW(pick_fastest({}, PickRule{}, nullptr, 0, nullptr), std::invalid_argument);
}

TEST(LibraryPick, FinalistsAreTheFastestFirstAndTheEarlierOfEqualOnes)
{
    EXPECT_EQ(fastest_indices({0.5, 0.2, 0.4, 0.2, 0.3}, 3), (std::vector<std::size_t>{1, 3, 4}));
    EXPECT_EQ(fastest_indices({0.5, 0.2}, 3), (std::vector<std::size_t>{1, 0}));
    EXPECT_TRUE(fastest_indices({}, 3).empty());
}

TEST(LibraryPick, NamesEachCandidateWithItsMediansAndRefusesAMismatch)
{
    const PickTimes times{{0.30, 0.25}, {-1.0, 0.24}, 1};
    const std::vector<PickedCandidate> candidates = picked_candidates({"engine 3", "engine 7"}, times);
    ASSERT_EQ(candidates.size(), 2u);
    EXPECT_EQ(candidates[1].config, "engine 7");
    EXPECT_DOUBLE_EQ(candidates[1].median_ms, 0.25);
    EXPECT_DOUBLE_EQ(candidates[1].final_median_ms, 0.24);
    EXPECT_THROW(picked_candidates({"engine 3"}, times), std::invalid_argument);
}

TEST(LibraryPick, TheRowNamesTheKeptCandidateEveryMedianAndTheRule)
{
    const std::vector<PickedCandidate> candidates = {{"engine 3", 0.30, -1.0}, {"engine 7", 0.25, 0.24}};
    nlohmann::json row = nlohmann::json::object();
    add_pick(row, candidates, 1, library_pick_rule);
    EXPECT_EQ(row["config"], "engine 7");
    ASSERT_EQ(row["pick_candidates"].size(), 2u);
    EXPECT_FALSE(row["pick_candidates"][0].contains("final_median_ms"));  // not a finalist
    EXPECT_DOUBLE_EQ(row["pick_candidates"][1]["final_median_ms"].get<double>(), 0.24);
    EXPECT_EQ(row["pick_rule"], describe(library_pick_rule));
    EXPECT_NE(describe(library_pick_rule).find("10 rounds"), std::string::npos);
    EXPECT_THROW(add_pick(row, candidates, 2, library_pick_rule), std::out_of_range);
}

}  // namespace
}  // namespace stepwise
