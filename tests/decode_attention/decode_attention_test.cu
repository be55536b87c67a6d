// GPU tests of the decode attention chapter, every step of its registry: every row against the double-precision CPU
// reference over the same pages (shuffled in the pool, a prefix shared by two sequences, lengths of 0, 1, 17 and 4095,
// page sizes 16 to 256, one and four new tokens), poisoned outputs, a NaN kept to its sequence, tables that point
// outside the pool, and invalid arguments.
#include "attention/attention_reference.hpp"
#include "core/bf16.hpp"
#include "core/device_buffer.hpp"
#include "decode_attention/decode_attention_reference.hpp"
#include "decode_attention/decode_attention_sizes.hpp"
#include "decode_attention/decode_attention_steps.hpp"
#include "support/gpu_test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace stepwise::decode_attention {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::expect_refuses_a_workspace_one_byte_short;
using stepwise::testing::fresh_seed;
using stepwise::testing::launch_with_poisoned_workspace;
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

//! The device pages of `d`: its pools, table and lengths.
DevicePages pages_of(const DeviceProblem& d)
{
    return {reinterpret_cast<const bf16*>(d.k.data()), reinterpret_cast<const bf16*>(d.v.data()), d.table.data(),
            d.lengths.data()};
}

//! `step` on `p`'s buffers `d`, as a program calls it (a poisoned workspace of the size it asks for).
cudaError_t run(const Step& step, const Problem& p, DeviceProblem& d, float scale)
{
    return launch_with_poisoned_workspace([&](void* d_temp, std::size_t& bytes) {
        return step.decode(d_temp, bytes, reinterpret_cast<const bf16*>(d.q.data()), pages_of(d),
                           reinterpret_cast<bf16*>(d.o.data()), d.lse.data(), p, scale, 0);
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

//! A step's tests, skipped with the reason on a GPU that lacks what the step needs.
class DecodeAttentionStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(GetParam()); !reason.empty()) {
            GTEST_SKIP() << GetParam().id << " " << reason;
        }
    }
};

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

TEST_P(DecodeAttentionStepTest, EveryRowMatchesTheReference)
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
        ASSERT_EQ(run(GetParam(), p, d, scale), cudaSuccess);
        expect_matches_reference(p, in, d, scale);
    }
}

//! A NaN in one key of sequence 1 makes NaN the rows of sequence 1 that see it and nothing else; a NaN in a value of
//! sequence 2 the column it is in, in the rows that see it.
TEST_P(DecodeAttentionStepTest, ANaNStaysInItsSequence)
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
    ASSERT_EQ(run(GetParam(), p, d, scale), cudaSuccess);
    expect_matches_reference(p, in, d, scale);  // the reference has NaN exactly where the NaNs reach
}

//! Lengths beyond a sequence's pages and pages outside the pool make that sequence's rows NaN; the GPU reads nothing
//! outside the pool (memcheck runs this test), and the other sequences are right.
TEST_P(DecodeAttentionStepTest, TablesOutsideThePoolGiveNaNRows)
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
    ASSERT_EQ(run(GetParam(), p, d, 0.125f), cudaSuccess);
    std::vector<float> lse(d.lse.size());
    ASSERT_EQ(cudaMemcpy(lse.data(), d.lse.data(), lse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            EXPECT_EQ(std::isnan(lse[static_cast<std::size_t>(b) * p.heads + h]), b != 0) << "sequence " << b;
        }
    }
}

TEST_P(DecodeAttentionStepTest, RefusesInvalidArguments)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Step& step = GetParam();
    const Problem p = problem({20}, 1, 4, 2, 64, 16, 1);
    const Inputs in = inputs_of(p, 1);
    DeviceProblem d = upload(p, in);
    const bf16* q = reinterpret_cast<const bf16*>(d.q.data());
    bf16* o = reinterpret_cast<bf16*>(d.o.data());
    const DevicePages c = pages_of(d);
    const auto call = [&](const bf16* q_, const DevicePages& c_, bf16* o_, float* lse_, const Problem& p_) {
        std::size_t bytes = 0;
        return step.decode(nullptr, bytes, q_, c_, o_, lse_, p_, 0.125f, 0);
    };
    // `p` with one of its sizes changed by `change`.
    const auto changed = [&](auto change) {
        Problem other = p;
        change(other);
        return other;
    };
    EXPECT_EQ(call(q, c, o, d.lse.data(), p), cudaSuccess);
    EXPECT_EQ(call(nullptr, c, o, d.lse.data(), p), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, nullptr, d.lse.data(), p), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, nullptr, p), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, d.lse.data(), changed([](Problem& x) { x.kv_heads = 3; })),  // 3 does not divide 4
              cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, d.lse.data(), changed([](Problem& x) { x.head_dim = 96; })), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, d.lse.data(), changed([](Problem& x) { x.batch = 0; })), cudaErrorInvalidValue);
    EXPECT_EQ(call(reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(q) + 1), c, o, d.lse.data(), p),
              cudaErrorInvalidValue);
    DevicePages no_table = c;
    no_table.d_page_table = nullptr;
    EXPECT_EQ(call(q, no_table, o, d.lse.data(), p), cudaErrorInvalidValue);
    EXPECT_EQ(call(q, c, o, d.lse.data(), changed([](Problem& x) { x.page_size = 0; })), cudaErrorInvalidValue);
    if (step.pool_alignment == 16) {  // 16-byte reads of the pools
        DevicePages shifted = c;
        shifted.d_k = reinterpret_cast<const bf16*>(reinterpret_cast<const char*>(c.d_k) + 2);
        EXPECT_EQ(call(q, shifted, o, d.lse.data(), p), cudaErrorInvalidValue);
    }
    if (step.uses_workspace) {
        expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& bytes) {
            return step.decode(d_temp, bytes, q, c, o, d.lse.data(), p, 0.125f, 0);
        });
    }
}

INSTANTIATE_TEST_SUITE_P(DecodeAttention, DecodeAttentionStepTest, ::testing::ValuesIn(steps()), step_name);

//! What `make profile` runs under Nsight Compute: every step once at a main size of the chapter with fewer sequences
//! (Llama 3 8B's heads, pages of 16, 8 sequences of 4096 tokens, one new token each).
TEST(DecodeAttentionProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Problem p = problem_of({8, 1, 4096, false}, seed);
    const Inputs in = inputs_of(p, seed);
    const float scale = attention::default_scale(p.head_dim);
    for (const Step& step : steps()) {
        if (!unsupported_reason(step).empty()) {
            continue;  // a step this GPU cannot run is not profiled
        }
        DeviceProblem d = upload(p, in);
        ASSERT_EQ(run(step, p, d, scale), cudaSuccess) << step.id;
    }
}

}  // namespace
}  // namespace stepwise::decode_attention
