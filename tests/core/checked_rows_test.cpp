// CPU tests of checked_rows(): which rows of a matrix a row-wise check compares with its reference.
#include "core/step_loop.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace stepwise {
namespace {

TEST(CheckedRows, EveryRowWhileTheyFitTheBudget)
{
    EXPECT_EQ(checked_rows(5, 10, 100), (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_EQ(checked_rows(1, 1, 1 << 22), (std::vector<int>{0}));
}

TEST(CheckedRows, EvenlySpacedWithTheFirstAndLastBeyondIt)
{
    const std::vector<int> rows = checked_rows(1024, 131072, std::int64_t{1} << 22);  // 32 rows of 131072
    ASSERT_EQ(rows.size(), 32u);
    EXPECT_EQ(rows.front(), 0);
    EXPECT_EQ(rows.back(), 1023);
    EXPECT_EQ(rows[1], 33);  // 1023 / 31
}

TEST(CheckedRows, AtLeastOneRowWhereOneIsLongerThanTheBudget)
{
    EXPECT_EQ(checked_rows(3, 300000, 1000), (std::vector<int>{0}));
}

}  // namespace
}  // namespace stepwise
