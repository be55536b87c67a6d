// The decode attention chapter's registry entry and its sizes (no GPU needed).
#include "decode_attention/decode_attention_sizes.hpp"
#include "support/registry_test_support.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace stepwise::decode_attention {
namespace {

//! The sizes the chapter declares, as the registry writes them: Llama 3 8B's heads at one new token (128k, 8 x 32k,
//! 64 x 4096, 256 x 1024 cached tokens), at four, a ragged batch, three odd sizes, larger pages and other heads.
const std::vector<std::string> declared_problems = {"1 x 131072 tokens, 1 new token",
                                                   "8 x 32768 tokens, 1 new token",
                                                   "64 x 4096 tokens, 1 new token",
                                                   "256 x 1024 tokens, 1 new token",
                                                   "64 x 4096 tokens, 4 new tokens",
                                                   "64 x 128 to 8191 tokens (ragged), 1 new token",
                                                   "1 x 1 token, 1 new token",
                                                   "3 x 1001 tokens, 3 new tokens",
                                                   "7 x 4097 tokens, 1 new token",
                                                   "8 x 32768 tokens, 1 new token, pages of 64",
                                                   "8 x 32768 tokens, 1 new token, pages of 256",
                                                   "64 x 4096 tokens, 1 new token, 64 query heads over 8",
                                                   "64 x 4096 tokens, 1 new token, head_dim 64"};

TEST(DecodeAttentionRegistry, EveryStepWithItsKernelsBesideTheReadCeilingTheCopyAndCudnn)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("decode_attention");
    ASSERT_FALSE(chapter.is_null());
    EXPECT_EQ(chapter.at("share_of"), "device_read");
    EXPECT_EQ(chapter.at("gtest_prefix"), "DecodeAttention");
    ASSERT_EQ(chapter.at("ceilings").size(), 2u);
    EXPECT_EQ(chapter.at("ceilings")[0].at("id"), "device_read");
    EXPECT_EQ(chapter.at("ceilings")[1].at("id"), "device_copy");
    ASSERT_EQ(chapter.at("baselines").size(), 1u);
    EXPECT_EQ(chapter.at("baselines")[0].at("id"), "cudnn_sdpa_paged_bf16");
    const std::vector<std::string> ids = {"01_three_passes", "02_online_softmax", "03_grouped_heads",
                                          "04_split_kv",     "05_wide_loads",     "06_loads_ahead",
                                          "07_tensor_cores", "08_merge_launched_early"};
    const std::vector<std::string> namespaces = {"three_passes", "online_softmax", "grouped_heads",
                                                 "split_kv",     "wide_loads",     "loads_ahead",
                                                 "tensor_cores", "merge_launched_early"};
    const std::vector<std::size_t> kernel_counts = {3, 2, 2, 3, 5, 5, 3, 3};
    ASSERT_EQ(chapter.at("steps").size(), ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const nlohmann::json& step = chapter.at("steps")[i];
        EXPECT_EQ(step.at("id"), ids[i]);
        EXPECT_EQ(step.at("file"), "snippets/decode_attention/" + ids[i] + ".cuh");
        EXPECT_EQ(step.at("namespace"), "stepwise::decode_attention::" + namespaces[i]);
        EXPECT_EQ(step.at("launcher"), "decode_attention");
        EXPECT_FALSE(step.at("title").get<std::string>().empty());
        EXPECT_EQ(step.at("kernels").size(), kernel_counts[i]) << ids[i];
        std::vector<std::string> problems;
        for (const nlohmann::json& size : step.at("sizes")) {
            problems.push_back(size.at("problem"));
            const Size s = size_of(size.at("n").get<std::int64_t>());
            const HeadShape& h = head_shapes[s.heads_index];
            const std::vector<int> shape =
                s.page_size_index == 0 && s.heads_index == 0
                    ? std::vector<int>{s.batch, s.q_len, s.length}
                    : std::vector<int>{s.batch, s.q_len, s.length, page_sizes[s.page_size_index],
                                       h.heads, h.kv_heads, h.head_dim};
            EXPECT_EQ(size.at("shape"), shape) << size.at("problem");
        }
        std::vector<std::string> expected = declared_problems;
        if (i + 1 == ids.size()) {  // the final step is also measured at the sweep's lengths but the longest (a main size)
            for (int length = 1024; length < 131072; length *= 2) {
                expected.push_back("1 x " + std::to_string(length) + " tokens, 1 new token");
            }
        }
        EXPECT_EQ(problems, expected) << ids[i];
    }
    // The sweep: the final step, cuDNN and the read ceiling over one sequence of 1024 to 131072 tokens, drawn against
    // the tokens (the shape's third number).
    const nlohmann::json& sweep = chapter.at("sweep");
    EXPECT_EQ(sweep.at("rows"), (std::vector<std::string>{ids.back(), "cudnn_sdpa_paged_bf16", "device_read"}));
    EXPECT_EQ(sweep.at("sizes").size(), 8u);
    EXPECT_EQ(sweep.at("axis").at("shape_index"), 2);
    // PyTorch's SDPA at the main sizes, with the heads it needs.
    ASSERT_EQ(chapter.at("pytorch").size(), 1u);
    const nlohmann::json& pytorch = chapter.at("pytorch")[0];
    EXPECT_EQ(pytorch.at("id"), "pytorch_sdpa_decode_bf16");
    ASSERT_EQ(pytorch.at("sizes").size(), 5u);
    for (const nlohmann::json& size : pytorch.at("sizes")) {
        EXPECT_EQ(size.at("heads"), 32);
        EXPECT_EQ(size.at("kv_heads"), 8);
        EXPECT_EQ(size.at("head_dim"), 128);
        EXPECT_FALSE(size_of(size.at("n").get<std::int64_t>()).ragged) << size.at("problem");
    }
    ASSERT_TRUE(chapter.contains("headline"));
    EXPECT_EQ(chapter.at("headline").at("n"), size_key({64, 1, 4096, false}));
    EXPECT_EQ(chapter.at("headline").at("first"), ids.front());
    EXPECT_EQ(chapter.at("headline").at("final"), ids.back());
}

TEST(DecodeAttentionRegistry, TheSteps16ByteLoadsAndTheMergeAreListed)
{
    const nlohmann::json chapter = stepwise::testing::registry_chapter("decode_attention");
    ASSERT_FALSE(chapter.is_null());
    const nlohmann::json step = stepwise::testing::registry_step(chapter, "06_loads_ahead");
    ASSERT_FALSE(step.is_null());
    std::vector<std::string> names;
    for (const nlohmann::json& kernel : step.at("kernels")) {
        names.push_back(kernel.at("name"));
    }
    EXPECT_EQ(names, (std::vector<std::string>{"split_kernel<8, 4>", "split_kernel<8, 8>", "split_kernel<16, 4>",
                                               "split_kernel<16, 8>", "merge_kernel"}));
}

TEST(DecodeAttentionSizes, KeysNameTheirSizesAndRaggedBatchesSpreadTheirLengths)
{
    for (const Size s : {Size{1, 1, 131072, false}, Size{256, 4, 1024, false}, Size{64, 1, 8191, true},
                         Size{8, 1, 32768, false, 2}, Size{64, 1, 4096, false, 0, 1}, Size{64, 8, 8191, true, 1, 2}}) {
        const Size back = size_of(size_key(s));
        EXPECT_EQ(back.batch, s.batch);
        EXPECT_EQ(back.q_len, s.q_len);
        EXPECT_EQ(back.length, s.length);
        EXPECT_EQ(back.ragged, s.ragged);
        EXPECT_EQ(back.page_size_index, s.page_size_index);
        EXPECT_EQ(back.heads_index, s.heads_index);
    }
    // Other pages and heads reach the problem: pages of 256, Llama 3 70B's 64 query heads over 8, head_dim 64.
    EXPECT_EQ(problem_of({8, 1, 32768, false, 2}, 1).page_size, 256);
    const Problem wide = problem_of({64, 1, 4096, false, 0, 1}, 1);
    EXPECT_EQ(wide.heads, 64);
    EXPECT_EQ(wide.kv_heads, 8);
    EXPECT_EQ(problem_of({64, 1, 4096, false, 0, 2}, 1).head_dim, 64);
    const std::vector<int> lengths = ragged_lengths(64, 8191);
    ASSERT_EQ(lengths.size(), 64u);
    EXPECT_EQ(lengths.front(), 128);
    EXPECT_EQ(lengths.back(), 8191);
    for (std::size_t b = 1; b < lengths.size(); ++b) {
        EXPECT_GT(lengths[b], lengths[b - 1]);
    }
}

TEST(DecodeAttentionSizes, AProblemHasLlama3sHeadsAndPagesOf16)
{
    const Problem p = problem_of({8, 1, 32768, false}, 3);
    EXPECT_TRUE(valid(p));
    EXPECT_EQ(p.heads, 32);
    EXPECT_EQ(p.kv_heads, 8);
    EXPECT_EQ(p.head_dim, 128);
    EXPECT_EQ(p.page_size, 16);
    EXPECT_EQ(p.num_pages, 8 * 32768 / 16);
    EXPECT_EQ(p.max_pages, 32768 / 16);
    // 4 KiB of keys and values a cached token (8 K/V heads of 128 bf16 values, K and V), the 32 query heads' q and
    // o in bf16 and their log-sum-exps in fp32.
    EXPECT_EQ(bytes_moved(p), 8.0 * 32768 * 4096 + 2.0 * 8 * 32 * 128 * 2 + 4.0 * 8 * 32);
    const Problem ragged = problem_of({64, 1, 8191, true}, 3);
    EXPECT_TRUE(valid(ragged));
    EXPECT_EQ(ragged.max_pages, (8191 + 15) / 16);
}

}  // namespace
}  // namespace stepwise::decode_attention
