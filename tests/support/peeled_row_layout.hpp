// The layout of a row held as its body and ends (the softmax chapter's step 13, the cross-entropy chapter's step 4):
// a row that starts `head` values past a 16-byte boundary keeps its whole 16-byte chunks from the first boundary on
// in the first slots of an aligned row's layout, and the at most Width - 1 values before them and after them, value
// by value, in the slots after the body. Checked on the host, with no GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace stepwise::testing {

//! @brief Every value of the row in exactly one slot, every such slot among the ceil(num_cols / Width) of an aligned
//!        row of that length, and the body's chunks on 16-byte boundaries, for every head and for lengths around the
//!        multiples of a chunk and `more_lengths`. `peel_for(head, num_cols)` is the step's Peel of such a row (its
//!        `lead`, `body` and `tail`); `end_of(peel, k)` the column of position `k` of its ends, negative past them.
template <int Width, typename PeelFor, typename EndOf>
void expect_each_value_in_one_slot(PeelFor peel_for, EndOf end_of, std::initializer_list<int> more_lengths)
{
    std::vector<int> lengths{1, 2, 3, Width - 1, Width, Width + 1, 2 * Width - 1, 2 * Width, 2 * Width + 1,
                             3 * Width + 2};
    lengths.insert(lengths.end(), more_lengths);
    for (int head = 0; head < Width; ++head) {
        for (const int cols : lengths) {
            const auto peel = peel_for(head, cols);
            const int slots = (cols + Width - 1) / Width;
            std::vector<int> held(static_cast<std::size_t>(cols), 0);
            for (int slot = 0; slot < slots + 2; ++slot) {
                for (int i = 0; i < Width; ++i) {
                    const std::int64_t value = slot < peel.body ? peel.lead + std::int64_t{slot} * Width + i
                                                                : std::int64_t{end_of(peel, (slot - peel.body) * Width + i)};
                    if (value >= 0) {
                        ASSERT_LT(value, cols) << "head " << head << ", " << cols << " values, slot " << slot;
                        ASSERT_LT(slot, slots) << "head " << head << ", " << cols << " values, value " << value;
                        ++held[static_cast<std::size_t>(value)];
                    }
                }
            }
            for (int j = 0; j < cols; ++j) {
                ASSERT_EQ(held[static_cast<std::size_t>(j)], 1) << "head " << head << ", " << cols << " values, value " << j;
            }
            if (peel.body > 0) {
                EXPECT_EQ((head + peel.lead) % Width, 0) << "head " << head << ", " << cols << " values";
            }
        }
    }
}

}  // namespace stepwise::testing
