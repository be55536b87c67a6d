// The read floor on a GPU: every 16-byte word is read (a word the fold turns into the marker is seen wherever it
// lies, the tail past the last full round of loads included), nothing is written otherwise, bad arguments refused.
#include "support/gpu_test_support.hpp"
#include "core/device_buffer.hpp"
#include "core/floor_kernels.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace {

using stepwise::DeviceBuffer;
using stepwise::read_floor;
using stepwise::read_floor_marker;  // a word {marker, 0, 0, 0} among zeros folds to it in the thread that reads it
constexpr unsigned untouched = 0xFFFFFFFFu;

unsigned sink_after_read(const std::vector<unsigned>& words)
{
    DeviceBuffer<unsigned> d_words(words.size()), d_sink(1);
    d_words.upload(words);
    d_sink.upload(std::vector<unsigned>{untouched});
    EXPECT_EQ(read_floor(d_words.data(), words.size() * sizeof(unsigned), d_sink.data(), 0), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return d_sink.download()[0];
}

TEST(ReadFloor, ReadsEveryWordOnce)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    // Words of 16 bytes: more than one round of the grid's loads, and a count that is a multiple of nothing.
    constexpr std::size_t num_words = 3 * 1000 * 1000 + 7;
    for (const std::size_t marked : {std::size_t{0}, std::size_t{1234567}, num_words - 1}) {
        std::vector<unsigned> words(4 * num_words, 0u);
        words[4 * marked] = read_floor_marker;
        EXPECT_EQ(sink_after_read(words), read_floor_marker) << "the word at " << marked << " was not read";
    }
    EXPECT_EQ(sink_after_read(std::vector<unsigned>(4 * num_words, 1u)), untouched);
}

TEST(ReadFloor, RefusesBadArguments)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    DeviceBuffer<unsigned> d_words(64), d_sink(1);
    EXPECT_EQ(read_floor(nullptr, 64, d_sink.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(read_floor(d_words.data(), 64, nullptr, 0), cudaErrorInvalidValue);
    EXPECT_EQ(read_floor(d_words.data() + 1, 64, d_sink.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(read_floor(d_words.data(), 0, d_sink.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(read_floor(d_words.data(), 72, d_sink.data(), 0), cudaErrorInvalidValue);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
