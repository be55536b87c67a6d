// CPU tests of how the tensor-core GEMM chapter picks a tuned library's candidate at a shape.
#include "tensor_core_gemm/tensor_core_gemm_libraries.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace stepwise::tensor_core_gemm {
namespace {

TEST(TensorCoreGemmLibraryPick, KeepsTheSmallestMedianAndTheFirstOfEqualOnes)
{
    EXPECT_EQ(index_of_fastest({0.31, 0.30, 0.32}), 1u);
    EXPECT_EQ(index_of_fastest({0.5}), 0u);
    EXPECT_EQ(index_of_fastest({0.4, 0.2, 0.2, 0.3}), 1u);
}

TEST(TensorCoreGemmLibraryPick, RefusesToPickFromNothing)
{
    EXPECT_THROW(index_of_fastest({}), std::invalid_argument);
    EXPECT_THROW(pick_fastest({}, PickRule{}, nullptr, 0, nullptr), std::invalid_argument);
}

TEST(TensorCoreGemmLibraryPick, FinalistsAreTheFastestFirstAndTheEarlierOfEqualOnes)
{
    EXPECT_EQ(fastest_indices({0.5, 0.2, 0.4, 0.2, 0.3}, 3), (std::vector<std::size_t>{1, 3, 4}));
    EXPECT_EQ(fastest_indices({0.5, 0.2}, 3), (std::vector<std::size_t>{1, 0}));
    EXPECT_TRUE(fastest_indices({}, 3).empty());
}

}  // namespace
}  // namespace stepwise::tensor_core_gemm
