// GPU tests of the decode attention chapter: every row against the double-precision CPU reference over the same
// pages (shuffled in the pool, a prefix shared by two sequences, lengths of 0, 1, 17 and 4095, page sizes 16 to 256,
// one and four new tokens), poisoned outputs, a NaN kept to its sequence, tables that point outside the pool, and
// invalid arguments.
#include "attention/attention_reference.hpp"
#include "core/bf16.hpp"
#include "core/device_buffer.hpp"
#include "decode_attention/decode_attention_reference.hpp"
#include "support/gpu_test_support.hpp"

#include "../../snippets/decode_attention/01_three_passes.cuh"
#include "../../snippets/decode_attention/02_online_softmax.cuh"
#include "../../snippets/decode_attention/03_grouped_heads.cuh"
#include "../../snippets/decode_attention/04_split_kv.cuh"
#include "../../snippets/decode_attention/05_wide_loads.cuh"
#include "../../snippets/decode_attention/06_loads_ahead.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace stepwise::decode_attention {
namespace {

using stepwise::testing::expect_refuses_a_workspace_one_byte_short;
using stepwise::testing::fresh_seed;
using stepwise::testing::launch_with_poisoned_workspace;
using bf16 = __nv_bfloat16;

constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

//! A problem's inputs as the GPU reads them (bf16 values, kept as floats for the reference) and its device copies.
struct Inputs {
    std::vector<float> q, k_pool, v_pool;
};

struct DeviceProblem {
    DeviceBuffer<std::uint16_t> q, k, v, o;
    DeviceBuffer<float> lse;
    DeviceBuffer<int> table, lengths;
};

DeviceProblem upload(const Problem& p, const Inputs& in)
{
    DeviceProblem d{DeviceBuffer<std::uint16_t>(in.q.size()), DeviceBuffer<std::uint16_t>(std::max<std::size_t>(in.k_pool.size(), 1)),
                    DeviceBuffer<std::uint16_t>(std::max<std::size_t>(in.v_pool.size(), 1)),
                    DeviceBuffer<std::uint16_t>(in.q.size() + 1), DeviceBuffer<float>(std::size_t(p.batch) * p.q_len * p.heads + 1),
                    DeviceBuffer<int>(std::max<std::size_t>(p.page_table.size(), 1)), DeviceBuffer<int>(p.lengths.size())};
    const auto copy = [](auto& to, const auto& from) {
        if (!from.empty()) {
            EXPECT_EQ(cudaMemcpy(to.data(), from.data(), from.size() * sizeof(from[0]), cudaMemcpyHostToDevice), cudaSuccess);
        }
    };
    copy(d.q, to_bf16(in.q));
    copy(d.k, to_bf16(in.k_pool));
    copy(d.v, to_bf16(in.v_pool));
    copy(d.table, p.page_table);
    copy(d.lengths, p.lengths);
    d.o.fill_bytes(0xFF, 0);    // NaN in bf16: a row the step does not write shows
    d.lse.fill_bytes(0xFF, 0);
    return d;
}

//! A step of the chapter: its namespace's Cache, Shape and launcher (every step's have the same members).
#define STEPWISE_DECODE_STEP(Name, ns)                                                                             \
    struct Name {                                                                                                  \
        static constexpr const char* id = #ns;                                                                     \
        using Cache = ns::Cache;                                                                                   \
        using Shape = ns::Shape;                                                                                   \
        static cudaError_t call(void* d_temp, std::size_t& bytes, const bf16* q, const Cache& c, bf16* o,         \
                                float* lse, const Shape& s, float scale)                                           \
        {                                                                                                          \
            return ns::decode_attention(d_temp, bytes, q, c, o, lse, s, scale);                                    \
        }                                                                                                          \
    };
STEPWISE_DECODE_STEP(ThreePasses, three_passes)
STEPWISE_DECODE_STEP(OnlineSoftmax, online_softmax)
STEPWISE_DECODE_STEP(GroupedHeads, grouped_heads)
STEPWISE_DECODE_STEP(SplitKv, split_kv)
STEPWISE_DECODE_STEP(WideLoads, wide_loads)
STEPWISE_DECODE_STEP(LoadsAhead, loads_ahead)
#undef STEPWISE_DECODE_STEP

template <typename Step>
typename Step::Cache cache_of(const Problem& p, const DeviceProblem& d)
{
    return {reinterpret_cast<const bf16*>(d.k.data()), reinterpret_cast<const bf16*>(d.v.data()), d.table.data(),
            d.lengths.data(), p.num_pages, p.max_pages, p.page_size};
}

template <typename Step>
typename Step::Shape shape_of(const Problem& p)
{
    return {p.batch, p.q_len, p.heads, p.kv_heads, p.head_dim};
}

template <typename Step>
cudaError_t run(const Problem& p, DeviceProblem& d, float scale)
{
    return launch_with_poisoned_workspace([&](void* d_temp, std::size_t& bytes) {
        return Step::call(d_temp, bytes, reinterpret_cast<const bf16*>(d.q.data()), cache_of<Step>(p, d),
                          reinterpret_cast<bf16*>(d.o.data()), d.lse.data(), shape_of<Step>(p), scale);
    });
}

//! Every row of the result against reference_row(): the attention chapter's comparison with its tolerance for the
//! longest row (the output in units of the largest |v| of the pool), a row that sees no key exactly o = 0 and lse =
//! -inf, and the element past the output untouched.
void expect_matches_reference(const Problem& p, const Inputs& in, DeviceProblem& d, float scale)
{
    std::vector<std::uint16_t> o_bits(d.o.size());
    std::vector<float> lse(d.lse.size());
    ASSERT_EQ(cudaMemcpy(o_bits.data(), d.o.data(), o_bits.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(lse.data(), d.lse.data(), lse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(o_bits.back(), 0xFFFF) << "written past o";
    int longest = 1;
    for (const int length : p.lengths) {
        longest = std::max(longest, length);
    }
    attention::Problem shape;
    shape.seq = longest;
    const attention::Tolerance t = attention::tolerance(shape);
    double largest_v = 0;
    for (const float v : in.v_pool) {
        largest_v = std::max(largest_v, std::abs(static_cast<double>(v)));
    }
    attention::Comparison c;
    std::vector<double> expected(p.head_dim);
    std::vector<float> got(p.head_dim);
    for (int b = 0; b < p.batch; ++b) {
        for (int i = 0; i < p.q_len; ++i) {
            for (int h = 0; h < p.heads; ++h) {
                const std::size_t row = (static_cast<std::size_t>(b) * p.q_len + i) * p.heads + h;
                double expected_lse = 0, largest_score = 0;
                reference_row(p, scale, in.q.data(), in.k_pool.data(), in.v_pool.data(), b, i, h, expected.data(),
                              &expected_lse, &largest_score);
                for (int e = 0; e < p.head_dim; ++e) {
                    got[e] = from_bf16_bits(o_bits[row * p.head_dim + e]);
                }
                if (visible_keys(p, b, i) == 0) {
                    for (int e = 0; e < p.head_dim; ++e) {
                        EXPECT_EQ(got[e], 0.0f) << "row " << row << " sees no key";
                    }
                    EXPECT_EQ(lse[row], -std::numeric_limits<float>::infinity()) << "row " << row << " sees no key";
                    continue;
                }
                attention::compare_row(got.data(), lse[row], expected.data(), expected_lse, p.head_dim,
                                       visible_keys(p, b, i), largest_v, largest_score,
                                       static_cast<std::int64_t>(row), t, c);
            }
        }
    }
    EXPECT_EQ(c.out_of_tolerance + c.nan_mismatches, 0u) << c.describe();
}

Problem problem(std::vector<int> lengths, int q_len, int heads, int kv_heads, int head_dim, int page_size,
                std::uint64_t seed, int shared_prefix_pages = 0)
{
    Problem p;
    p.batch = static_cast<int>(lengths.size());
    p.q_len = q_len;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.page_size = page_size;
    p.lengths = std::move(lengths);
    assign_pages(p, seed, shared_prefix_pages);
    return p;
}

Inputs inputs_of(const Problem& p, std::uint64_t seed)
{
    return {attention::random_inputs(q_elements(p), seed), attention::random_inputs(pool_elements(p), seed + 1),
            attention::random_inputs(pool_elements(p), seed + 2)};
}

template <typename Step>
class DecodeAttentionStep : public ::testing::Test {};
using Steps = ::testing::Types<ThreePasses, OnlineSoftmax, GroupedHeads, SplitKv, WideLoads, LoadsAhead>;
struct StepName {
    template <typename Step>
    static std::string GetName(int) { return Step::id; }
};
TYPED_TEST_SUITE(DecodeAttentionStep, Steps, StepName);

TYPED_TEST(DecodeAttentionStep, EveryRowMatchesTheReference)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    struct Case {
        int q_len, heads, kv_heads, head_dim, page_size, shared_prefix_pages;
    };
    for (const Case& k : {Case{1, 8, 2, 128, 16, 0}, Case{4, 8, 2, 128, 16, 1}, Case{1, 16, 2, 64, 64, 1},
                          Case{4, 4, 4, 64, 256, 0}, Case{3, 8, 1, 128, 64, 2}, Case{3, 12, 4, 64, 16, 0},
                          Case{8, 16, 2, 128, 64, 0}}) {
        SCOPED_TRACE("q_len " + std::to_string(k.q_len) + ", heads " + std::to_string(k.heads) + "/" +
                     std::to_string(k.kv_heads) + ", head_dim " + std::to_string(k.head_dim) + ", pages of " +
                     std::to_string(k.page_size));
        const Problem p = problem({17, 0, 4095, 1, 300}, k.q_len, k.heads, k.kv_heads, k.head_dim, k.page_size, seed,
                                  k.shared_prefix_pages);
        ASSERT_TRUE(valid(p));
        const Inputs in = inputs_of(p, seed);
        DeviceProblem d = upload(p, in);
        const float scale = attention::default_scale(p.head_dim);
        ASSERT_EQ(run<TypeParam>(p, d, scale), cudaSuccess);
        expect_matches_reference(p, in, d, scale);
    }
}

//! A NaN in one key of sequence 1 makes NaN the rows of sequence 1 that see it and nothing else; a NaN in a value of
//! sequence 2 the column it is in, in the rows that see it.
TYPED_TEST(DecodeAttentionStep, ANaNStaysInItsSequence)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Problem p = problem({40, 40, 40}, 4, 8, 2, 64, 16, seed);
    Inputs in = inputs_of(p, seed);
    in.k_pool[cache_offset(p, 1, 38, 1) + 5] = nan_value;  // seen by the last three new tokens of sequence 1
    in.v_pool[cache_offset(p, 2, 10, 0) + 7] = nan_value;  // seen by every row of sequence 2
    DeviceProblem d = upload(p, in);
    const float scale = attention::default_scale(p.head_dim);
    ASSERT_EQ(run<TypeParam>(p, d, scale), cudaSuccess);
    expect_matches_reference(p, in, d, scale);  // the reference has NaN exactly where the NaNs reach
}

//! Lengths beyond a sequence's pages and pages outside the pool make that sequence's rows NaN; the GPU reads nothing
//! outside the pool (memcheck runs this test), and the other sequences are right.
TYPED_TEST(DecodeAttentionStep, TablesOutsideThePoolGiveNaNRows)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    Problem p = problem({33, 33, 33}, 1, 4, 2, 64, 16, seed);
    const Inputs in = inputs_of(p, seed);
    DeviceProblem d = upload(p, in);
    std::vector<int> table = p.page_table, lengths = p.lengths;
    table[static_cast<std::size_t>(1) * p.max_pages + 2] = p.num_pages;  // sequence 1's third page: past the pool
    lengths[2] = p.max_pages * p.page_size + 1;                          // sequence 2: longer than its pages hold
    ASSERT_EQ(cudaMemcpy(d.table.data(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d.lengths.data(), lengths.data(), lengths.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(run<TypeParam>(p, d, 0.125f), cudaSuccess);
    std::vector<float> lse(d.lse.size());
    ASSERT_EQ(cudaMemcpy(lse.data(), d.lse.data(), lse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            EXPECT_EQ(std::isnan(lse[static_cast<std::size_t>(b) * p.heads + h]), b != 0) << "sequence " << b;
        }
    }
}

TYPED_TEST(DecodeAttentionStep, RefusesInvalidArguments)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Problem p = problem({20}, 1, 4, 2, 64, 16, 1);
    const Inputs in = inputs_of(p, 1);
    DeviceProblem d = upload(p, in);
    const bf16* q = reinterpret_cast<const bf16*>(d.q.data());
    bf16* o = reinterpret_cast<bf16*>(d.o.data());
    using Cache = typename TypeParam::Cache;
    using Shape = typename TypeParam::Shape;
    const Cache c = cache_of<TypeParam>(p, d);
    const Shape s = shape_of<TypeParam>(p);
    const auto call = [&](const bf16* q_, const Cache& c_, bf16* o_, float* lse_, const Shape& s_) {
        std::size_t bytes = 0;
        return TypeParam::call(nullptr, bytes, q_, c_, o_, lse_, s_, 0.125f);
    };
    EXPECT_EQ(call(q, c, o, d.lse.data(), s), cudaSuccess);
    EXPECT_EQ(call(nullptr, c, o, d.lse.data(), s), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, nullptr, d.lse.data(), s), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, nullptr, s), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, d.lse.data(), Shape{1, 1, 4, 3, 64}), cudaErrorInvalidValue);  // 3 does not divide 4
    EXPECT_EQ(call(q, c, o, d.lse.data(), Shape{1, 1, 4, 2, 96}), cudaErrorInvalidValue);  // head_dim 96
    EXPECT_EQ(call(q, c, o, d.lse.data(), Shape{0, 1, 4, 2, 64}), cudaErrorInvalidValue);
    EXPECT_EQ(call(reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(q) + 1), c, o, d.lse.data(), s),
              cudaErrorInvalidValue);
    Cache no_table = c;
    no_table.d_page_table = nullptr;
    EXPECT_EQ(call(q, no_table, o, d.lse.data(), s), cudaErrorInvalidValue);
    Cache no_pages = c;
    no_pages.page_size = 0;
    EXPECT_EQ(call(q, no_pages, o, d.lse.data(), s), cudaErrorInvalidValue);
    if (std::string(TypeParam::id) == "wide_loads" || std::string(TypeParam::id) == "loads_ahead") {  // 16-byte reads
        Cache shifted = c;
        shifted.d_k = reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(c.d_k) + 2);
        EXPECT_EQ(call(q, shifted, o, d.lse.data(), s), cudaErrorInvalidValue);
    }
    if (std::string(TypeParam::id) != "online_softmax" && std::string(TypeParam::id) != "grouped_heads") {
        // the steps with a workspace
        expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& bytes) {
            return TypeParam::call(d_temp, bytes, q, c, o, d.lse.data(), s, 0.125f);
        });
    }
}

}  // namespace
}  // namespace stepwise::decode_attention
