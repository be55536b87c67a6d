// GPU tests of the attention chapter: every step against the double-precision CPU reference at every row of small
// and odd problems (grouped K and V, equal and huge scores), at sampled rows of the main shape, with NaN in Q, K and V
// with and without the causal mask, and with invalid arguments; the final step's usage example.
#include "attention/attention_reference.hpp"
#include "attention/attention_steps.hpp"
#include "core/bf16.hpp"
#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "support/guarded_buffer.hpp"
#include "support/large_problem.hpp"

#include "../../snippets/attention/10_output_through_shared_memory.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace stepwise::attention {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using stepwise::testing::fresh_seed;
using stepwise::testing::expect_refuses_a_workspace_one_byte_short;
using stepwise::testing::launch_with_poisoned_workspace;
using stepwise::testing::under_sanitizer;

using stepwise::testing::Guarded;
constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

//! Every step multiplies whole tiles of P by V on the tensor cores. Under the causal mask a row's P is 0 at the keys it
//! does not see, and 0 x NaN is NaN: a NaN in row j of V also reaches the rows i < j of j's tile of keys, [t floor(j /
//! t), j), in its column (cuDNN does the same over 128 keys), where the reference has a number. t is 64 keys up to
//! step 5 and 128 from step 6 on (from step 7 both warpgroups of a block, 128 rows, multiply every tile it loads).
int pv_tile(const Step& step) { return std::string(step.id) < "06_lean_softmax" ? 64 : 128; }

//! The first row that a NaN in row `j` of V may reach under the causal mask: the first of j's tile of keys (pv_tile),
//! or, from step 9 at head_dim 64, where a block's 192 rows need not start at a tile, the first row of the block that
//! holds that tile's first key: all three warpgroups of a block multiply every tile it loads, even one that lies
//! wholly past a warpgroup's rows.
int nan_v_first_row(const Step& step, const Problem& p, int j)
{
    const int tile_start = j / pv_tile(step) * pv_tile(step);
    const bool blocks_of_192 = std::string(step.id) >= "09_three_consumer_groups" && p.head_dim == 64;
    return blocks_of_192 ? tile_start / 192 * 192 : tile_start;
}

//! The small and odd problems every step is compared at, every row: one row; rows that are not a multiple of 64 (a
//! partial last tile; 65: one row past a tile); two heads of Q to each K/V head, four to one, and four to each of two
//! (the grouping h / 4, not h % 2).
const std::vector<Problem> small_problems = {{1, 1, 1, 1, 64, false},    {2, 3, 3, 127, 128, true},
                                             {1, 4, 2, 1000, 64, false}, {1, 4, 1, 333, 128, true},
                                             {2, 2, 2, 65, 64, true},    {1, 2, 2, 17, 128, false},
                                             {2, 8, 2, 200, 64, false}};

//! The chapter's main shape, causal or not (the timing program's).
Problem main_problem(bool causal) { return {4, 16, 16, 4096, 128, causal}; }
constexpr int main_row_step = 97;       //!< the main shape is compared at every 97th row of each head, and the last
constexpr int profile_row_step = 1024;  //!< the profiling run at a few rows

//! Where the NaN tests put their NaN: in head 1 of 2 (each its own K/V head) of 150 rows, column 3; row 40 of Q, row
//! 70 of K or V (with rows of its tile of keys before it: 64 to 69 for tiles of 64 keys, 0 to 69 for 128).
constexpr int nan_head = 1, nan_col = 3, nan_q_row = 40, nan_kv_row = 70;
Problem nan_problem(bool causal) { return {1, 2, 2, 150, 64, causal}; }

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

//! "2 x 8 (2 K/V heads) x 200 x 64 causal": a problem in failure messages.
std::string text(const Problem& p)
{
    return std::to_string(p.batch) + " x " + std::to_string(p.heads) + " (" + std::to_string(p.kv_heads) +
           " K/V heads) x " + std::to_string(p.seq) + " x " + std::to_string(p.head_dim) + (p.causal ? " causal" : "");
}

//! Q, K and V of a problem, as floats that hold bf16 values (what the GPU reads).
struct Inputs {
    std::vector<float> q, k, v;
};

Inputs random_problem_inputs(const Problem& p, std::uint64_t seed)
{
    return {random_inputs(q_elements(p), seed), random_inputs(kv_elements(p), seed + 1),
            random_inputs(kv_elements(p), seed + 2)};
}

//! The index of (`row`, `col`) of head `head` of batch 0, in Q (a head of Q) or in K and V (a K/V head).
std::size_t index_of(const Problem& p, int head, int row, int col)
{
    return (static_cast<std::size_t>(head) * p.seq + row) * p.head_dim + col;
}

//! What a run found: O ([batch, heads, seq, head_dim]) and lse ([batch, heads, seq]) as floats.
struct StepRun {
    cudaError_t launch = cudaErrorUnknown;
    std::vector<float> o, lse;
};

//! Runs `step` on `p` (with `scale`) into a poisoned O and lse, each followed by a poisoned guard, with a
//! poisoned workspace. Checks that no error is left, that the guards were kept and that Q, K and V were not changed.
StepRun run_step(const Step& step, const Problem& p, const Inputs& in, float scale)
{
    StepRun r;
    const std::vector<unsigned char> q = narrow(in.q, true), k = narrow(in.k, true), v = narrow(in.v, true);
    const Guarded d_q(q), d_k(k), d_v(v);
    const std::size_t rows = q_elements(p) / p.head_dim;
    const Guarded d_o(q.size()), d_lse(rows * sizeof(float));
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        return step.attention(d_temp, temp_bytes, d_q.as<bf16>(), d_k.as<bf16>(), d_v.as<bf16>(), d_o.as<bf16>(),
                              d_lse.as<float>(), p, scale, 0);
    };
    r.launch = launch_with_poisoned_workspace(call);
    if (r.launch != cudaSuccess) {
        return r;
    }
    r.o = widen(d_o.read("O").data(), q_elements(p), true);
    r.lse = widen(d_lse.read("lse").data(), rows, false);
    EXPECT_TRUE(d_q.read("Q") == q) << "the step changed Q";
    EXPECT_TRUE(d_k.read("K") == k) << "the step changed K";
    EXPECT_TRUE(d_v.read("V") == v) << "the step changed V";
    return r;
}

//! run_step with the usual scale, 1 / sqrt(head_dim).
StepRun run_step(const Step& step, const Problem& p, const Inputs& in)
{
    return run_step(step, p, in, default_scale(p.head_dim));
}

//! The device memory `step` takes at `p`: Q, K, V, O, lse and its workspace.
std::size_t device_bytes(const Step& step, const Problem& p)
{
    DeviceBuffer<unsigned char> any(256);  // asked for the workspace's size, a launcher only checks the pointers
    bf16* b = reinterpret_cast<bf16*>(any.data());
    std::size_t temp_bytes = 0;
    STEPWISE_CUDA_CHECK(step.attention(nullptr, temp_bytes, b, b, b, b, reinterpret_cast<float*>(any.data()), p,
                                       default_scale(p.head_dim), 0));
    return (2 * q_elements(p) + 2 * kv_elements(p)) * sizeof(bf16) + q_elements(p) / p.head_dim * sizeof(float) +
           temp_bytes;
}

//! Whether a step may give NaN at (batch, head, row, col) where the reference has a number.
using NanAllowed = std::function<bool(int b, int h, int row, int col)>;

//! Compares every `row_step`-th row of each head, and the last, with the reference (O and lse) at `given_scale` (else
//! 1 / sqrt(head_dim)), and checks them. A NaN that `nan_allowed` lets pass counts as the reference's value; a number
//! there must still match it.
void expect_matches_reference(const Problem& p, const Inputs& in, const StepRun& r, int row_step = 1,
                              const NanAllowed& nan_allowed = nullptr, std::optional<float> given_scale = {})
{
    const float scale = given_scale.value_or(default_scale(p.head_dim));
    const Tolerance t = tolerance(p);
    Comparison c;
    std::size_t let_pass = 0;
    std::vector<double> expected(p.head_dim);
    std::vector<float> got(p.head_dim);
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            const double largest_v = largest_value(p, in.v.data(), b, h);
            for (int row = 0; row < p.seq; ++row) {
                if (row % row_step != 0 && row != p.seq - 1) {
                    continue;
                }
                const std::size_t id = (static_cast<std::size_t>(b) * p.heads + h) * p.seq + row;
                double lse = 0, largest_score = 0;
                reference_row(p, scale, in.q.data(), in.k.data(), in.v.data(), b, h, row, expected.data(), &lse,
                              &largest_score);
                std::copy_n(r.o.data() + id * p.head_dim, p.head_dim, got.data());
                for (int d = 0; d < p.head_dim && nan_allowed; ++d) {
                    if (std::isnan(got[d]) && !std::isnan(expected[d]) && nan_allowed(b, h, row, d)) {
                        got[d] = static_cast<float>(expected[d]);
                        ++let_pass;
                    }
                }
                compare_row(got.data(), r.lse[id], expected.data(), lse, p.head_dim, p.seq, largest_v, largest_score,
                            static_cast<std::int64_t>(id), t, c);
            }
        }
    }
    EXPECT_TRUE(c.passed()) << text(p) << ": " << c.describe() << " (" << let_pass << " NaN let pass)";
}

class AttentionStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(GetParam()); !reason.empty()) {
            GTEST_SKIP() << GetParam().id << " " << reason;
        }
    }

    //! Runs the step on `p` and `in` and compares every `row_step`-th row of each head (and the last) with the
    //! reference.
    void expect_every_row(const Problem& p, const Inputs& in, int row_step = 1)
    {
        const StepRun r = run_step(GetParam(), p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p);
        expect_matches_reference(p, in, r, row_step);
    }
};

TEST_P(AttentionStepTest, MatchesTheReferenceAtEveryRowOfSmallAndOddShapes)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (std::size_t i = 0; i < small_problems.size(); ++i) {
        expect_every_row(small_problems[i], random_problem_inputs(small_problems[i], seed + 3 * i));
    }
}

TEST_P(AttentionStepTest, EqualScoresAndScoresOf1e4)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Problem equal{1, 2, 1, 200, 64, false};  // Q = 0: every score 0, each row the mean of V
    Inputs in = random_problem_inputs(equal, seed);
    std::fill(in.q.begin(), in.q.end(), 0.0f);
    expect_every_row(equal, in);
    // In every row one score of 1e4 after scaling (100 x 800 / sqrt(64)), the others near 0: their exponentials
    // underflow, O is row 5 of V and lse about 1e4.
    const Problem huge{1, 1, 1, 100, 64, false};
    in = random_problem_inputs(huge, seed + 3);
    for (int row = 0; row < huge.seq; ++row) {
        in.q[index_of(huge, 0, row, 0)] = 100.0f;
    }
    in.k[index_of(huge, 0, 5, 0)] = 800.0f;
    expect_every_row(huge, in);
}

TEST_P(AttentionStepTest, NaNInQReachesOnlyItsRow)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool causal : {false, true}) {
        const Problem p = nan_problem(causal);
        Inputs in = random_problem_inputs(p, seed);
        in.q[index_of(p, nan_head, nan_q_row, nan_col)] = nan_value;
        expect_every_row(p, in);
    }
}

TEST_P(AttentionStepTest, NaNInKReachesTheRowsThatSeeItsKey)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool causal : {false, true}) {  // every row of the head; under the mask rows 70 and later
        const Problem p = nan_problem(causal);
        Inputs in = random_problem_inputs(p, seed);
        in.k[index_of(p, nan_head, nan_kv_row, nan_col)] = nan_value;
        expect_every_row(p, in);
    }
}

TEST_P(AttentionStepTest, NaNInVWithoutTheMaskReachesItsColumnOfEveryRow)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Problem p = nan_problem(false);
    Inputs in = random_problem_inputs(p, seed);
    in.v[index_of(p, nan_head, nan_kv_row, nan_col)] = nan_value;
    expect_every_row(p, in);
}

TEST_P(AttentionStepTest, NaNInVUnderTheCausalMaskAlsoReachesEarlierRowsOfItsTileOrBlock)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    // Row 70 of 150 (in the first tile of keys) and row 200 of 400 (in the second: 128 to 255, which the first block
    // of 192 rows loads too).
    const std::pair<Problem, int> cases[] = {{nan_problem(true), nan_kv_row}, {{1, 2, 2, 400, 64, true}, 200}};
    for (const auto& [p, nan_row] : cases) {
        const int j = nan_row;  // a lambda captures a variable, not a structured binding (C++17)
        Inputs in = random_problem_inputs(p, seed);
        in.v[index_of(p, nan_head, j, nan_col)] = nan_value;
        const StepRun r = run_step(GetParam(), p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p);
        // Rows j and later of the head: NaN in column 3, as the reference says; rows before nan_v_first_row: the
        // reference's; rows from there to j - 1 (0 x NaN): column 3 may be NaN, their other columns and lse are the
        // reference's.
        const int first = nan_v_first_row(GetParam(), p, j);
        expect_matches_reference(p, in, r, 1, [&](int, int h, int row, int col) {
            return h == nan_head && col == nan_col && row >= first && row < j;
        });
    }
}

TEST_P(AttentionStepTest, ScalesOfEitherSignAndZero)
{
    // A negative scale turns the largest scores into the smallest (from step 6 on the steps negate Q K^T in the
    // product instead), and 0 gives every key seen the same weight (where masked keys must still weigh 0, not
    // -inf x 0).
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Problem p{2, 2, 1, 300, 128, true};
    const Inputs in = random_problem_inputs(p, seed);
    for (const float scale : {-0.2f, 0.0f}) {
        const StepRun r = run_step(GetParam(), p, in, scale);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p) << ", scale " << scale;
        SCOPED_TRACE("scale " + std::to_string(scale));
        expect_matches_reference(p, in, r, 1, nullptr, scale);
    }
}

TEST_P(AttentionStepTest, ManyWorkItemsABlock)
{
    // More work items than a GPU has SMs, at sequences short enough for the persistent grid of steps 8 and later (320
    // items at head_dim 128, 256 at 64): each of its blocks takes several, so that it loads its buffers of Q (and the
    // item beside each) again after its warps read them, and from step 10 writes its regions of O again after the TMA
    // read them.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Problem& p : {Problem{4, 16, 4, 600, 128, true}, Problem{4, 16, 4, 600, 64, false}}) {
        expect_every_row(p, random_problem_inputs(p, seed), 7);
    }
}

TEST_P(AttentionStepTest, MainShapeAtSampledRows)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "4 x 16 x 4096 x 128 under compute-sanitizer would take minutes; the sanitizers check the "
                        "smaller shapes";
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Inputs in = random_problem_inputs(main_problem(false), seed);
    for (const bool causal : {false, true}) {
        const Problem p = main_problem(causal);
        if (const std::string why = stepwise::testing::large_problem_skip_reason(device_bytes(GetParam(), p));
            !why.empty()) {
            GTEST_SKIP() << text(p) << " " << why;
        }
        const StepRun r = run_step(GetParam(), p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p);
        expect_matches_reference(p, in, r, main_row_step);
    }
}

//! Checks that `attention` refuses each invalid argument with cudaErrorInvalidValue, both when asked for the
//! workspace's size and when given one, and leaves no error behind. `o_by_tma`: O is written by the TMA, 16 bytes at
//! a time, and an O 4 bytes past a 16-byte boundary is refused too (steps 1 to 9 take it).
void expect_rejects_invalid_arguments(AttentionFunction attention, bool o_by_tma = false)
{
    const Problem good{1, 4, 2, 64, 64, false};
    DeviceBuffer<bf16> q(q_elements(good)), k(kv_elements(good)), v(kv_elements(good)), o(q_elements(good) + 8);
    DeviceBuffer<float> lse(q_elements(good) / good.head_dim);
    const float scale = default_scale(good.head_dim);
    std::size_t temp_bytes = 0;
    ASSERT_EQ(attention(nullptr, temp_bytes, q.data(), k.data(), v.data(), o.data(), lse.data(), good, scale, 0),
              cudaSuccess);
    DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));
    struct Invalid {
        const char* what;
        Problem p;
        const bf16 *q, *k, *v;
        bf16* o;
        float* lse;
    };
    float* const lse_off = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(lse.data()) + 2);
    // 65535 x 32769 heads: batch * heads is 2^31 + 32767 (K and V's 32769 heads: one a query head)
    const Problem too_many_heads{65535, 32769, 32769, 64, 64, false};
    std::vector<Invalid> cases = {
        {"head_dim 96", {1, 4, 2, 64, 96, false}, q.data(), k.data(), v.data(), o.data(), lse.data()},
        {"3 K/V heads for 4 heads", {1, 4, 3, 64, 64, false}, q.data(), k.data(), v.data(), o.data(), lse.data()},
        {"seq 0", {1, 4, 2, 0, 64, false}, q.data(), k.data(), v.data(), o.data(), lse.data()},
        {"batch * heads of 2^31 and more", too_many_heads, q.data(), k.data(), v.data(), o.data(), lse.data()},
        {"no Q", good, nullptr, k.data(), v.data(), o.data(), lse.data()},
        {"no K", good, q.data(), nullptr, v.data(), o.data(), lse.data()},
        {"no V", good, q.data(), k.data(), nullptr, o.data(), lse.data()},
        {"no O", good, q.data(), k.data(), v.data(), nullptr, lse.data()},
        {"no lse", good, q.data(), k.data(), v.data(), o.data(), nullptr},
        {"the LSE 2 bytes past a 4-byte boundary", good, q.data(), k.data(), v.data(), o.data(), lse_off},
        {"Q 8 bytes past a 16-byte boundary", good, q.data() + 4, k.data(), v.data(), o.data(), lse.data()}};
    if (o_by_tma) {
        cases.push_back({"O 4 bytes past a 16-byte boundary", good, q.data(), k.data(), v.data(), o.data() + 2,
                         lse.data()});
    }
    for (const Invalid& c : cases) {
        std::size_t asked = 0;
        EXPECT_EQ(attention(nullptr, asked, c.q, c.k, c.v, c.o, c.lse, c.p, scale, 0), cudaErrorInvalidValue)
            << c.what;
        std::size_t given = d_temp.size();
        EXPECT_EQ(attention(d_temp.data(), given, c.q, c.k, c.v, c.o, c.lse, c.p, scale, 0), cudaErrorInvalidValue)
            << c.what << ", with a workspace";
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_P(AttentionStepTest, RejectsInvalidArguments)
{
    const bool o_by_tma = std::string(GetParam().id) >= "10_output_through_shared_memory";
    expect_rejects_invalid_arguments(GetParam().attention, o_by_tma);
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionStepTest, ::testing::ValuesIn(steps()), step_name);

// ---- the first step's workspace, the final step's own launcher ----

//! Checks that `step`, which needs a workspace of more than a byte, refuses one a byte short.
void expect_rejects_a_workspace_one_byte_short(const Step& step)
{
    const Problem p{1, 2, 2, 100, 64, false};
    DeviceBuffer<bf16> q(q_elements(p)), k(kv_elements(p)), v(kv_elements(p)), o(q_elements(p));
    DeviceBuffer<float> lse(q_elements(p) / p.head_dim);
    expect_refuses_a_workspace_one_byte_short([&](void* d_temp, std::size_t& temp_bytes) {
        return step.attention(d_temp, temp_bytes, q.data(), k.data(), v.data(), o.data(), lse.data(), p,
                              default_scale(p.head_dim), 0);
    });
}

TEST(AttentionFirstStep, RejectsAWorkspaceOneByteShort)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    const Step& step = steps().front();  // S and P lie in the caller's workspace
    ASSERT_STREQ(step.id, "01_three_kernels");
    if (const std::string reason = unsupported_reason(step); !reason.empty()) {
        GTEST_SKIP() << step.id << " " << reason;
    }
    expect_rejects_a_workspace_one_byte_short(step);
}

class AttentionFinalStepTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(steps().back()); !reason.empty()) {
            GTEST_SKIP() << steps().back().id << " " << reason;
        }
    }
};

TEST_F(AttentionFinalStepTest, ItsOwnLauncherRejectsInvalidArguments)
{
    expect_rejects_invalid_arguments([](void* d_temp, std::size_t& temp_bytes, const bf16* d_q, const bf16* d_k,
                                        const bf16* d_v, bf16* d_o, float* d_lse, const Problem& p, float scale,
                                        cudaStream_t stream) {
        namespace fa = output_through_shared_memory;
        const fa::Shape shape{p.batch, p.heads, p.kv_heads, p.seq, p.head_dim, p.causal};
        return fa::attention(d_temp, temp_bytes, d_q, d_k, d_v, d_o, d_lse, shape, scale, stream);
    }, true);
}

TEST_F(AttentionFinalStepTest, RejectsAWorkspaceOneByteShort)
{
    expect_rejects_a_workspace_one_byte_short(steps().back());  // its count of the work items taken
}

TEST_F(AttentionFinalStepTest, BothSchedulesAtTheirBoundary)
{
    // 2048 keys: the persistent grid; 2049: a block an item (blocks of 192 rows at head_dim 64, of 128 at 128).
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const Problem& p : {Problem{1, 4, 2, 2048, 64, true}, Problem{1, 4, 2, 2049, 64, true},
                             Problem{1, 2, 1, 2049, 128, false}}) {
        const Inputs in = random_problem_inputs(p, seed);
        const StepRun r = run_step(steps().back(), p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p);
        expect_matches_reference(p, in, r);
    }
}

TEST_F(AttentionFinalStepTest, UsageWithGroupedHeadsAndTheCausalMask)
{
    const int batch = 2, heads = 8, kv_heads = 2, seq = 1000, head_dim = 64;
    const bool causal = true;
    const Problem p{batch, heads, kv_heads, seq, head_dim, causal};
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Inputs in = random_problem_inputs(p, seed);
    const auto to_device_type = [](const std::vector<float>& values) {
        const std::vector<unsigned char> bytes = narrow(values, true);
        std::vector<__nv_bfloat16> out(values.size());
        std::memcpy(static_cast<void*>(out.data()), bytes.data(), bytes.size());
        return out;
    };
    const std::vector<__nv_bfloat16> h_q = to_device_type(in.q), h_k = to_device_type(in.k),
                                     h_v = to_device_type(in.v);
    std::vector<__nv_bfloat16> h_o(h_q.size());
    std::vector<float> h_lse(h_q.size() / head_dim);
    // example-begin attention-usage
    namespace fa = stepwise::attention::output_through_shared_memory;
    const fa::Shape shape{batch, heads, kv_heads, seq, head_dim, causal};  // heads / kv_heads heads share K and V
    const std::size_t q_bytes = h_q.size() * sizeof(__nv_bfloat16), kv_bytes = h_k.size() * sizeof(__nv_bfloat16);
    __nv_bfloat16 *d_q = nullptr, *d_k = nullptr, *d_v = nullptr, *d_o = nullptr;  // 16-byte aligned
    float* d_lse = nullptr;  // each row's log-sum-exp, kept for the backward pass
    ASSERT_EQ(cudaMalloc(&d_q, q_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_k, kv_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_v, kv_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_o, q_bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_lse, h_lse.size() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_q, h_q.data(), q_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_k, h_k.data(), kv_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_v, h_v.data(), kv_bytes, cudaMemcpyHostToDevice), cudaSuccess);

    std::size_t temp_bytes = 0;  // first ask for the workspace's size, then run
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    ASSERT_EQ(fa::attention(nullptr, temp_bytes, d_q, d_k, d_v, d_o, d_lse, shape, scale), cudaSuccess);
    void* d_temp = nullptr;
    ASSERT_EQ(cudaMalloc(&d_temp, temp_bytes), cudaSuccess);
    ASSERT_EQ(fa::attention(d_temp, temp_bytes, d_q, d_k, d_v, d_o, d_lse, shape, scale), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(h_o.data(), d_o, q_bytes, cudaMemcpyDeviceToHost), cudaSuccess);  // waits for it
    ASSERT_EQ(cudaMemcpy(h_lse.data(), d_lse, h_lse.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);

    for (void* d : {static_cast<void*>(d_q), static_cast<void*>(d_k), static_cast<void*>(d_v),
                    static_cast<void*>(d_o), static_cast<void*>(d_lse), d_temp}) {
        ASSERT_EQ(cudaFree(d), cudaSuccess);
    }
    // example-end attention-usage
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    StepRun r;
    r.o = widen(reinterpret_cast<const unsigned char*>(h_o.data()), h_o.size(), true);
    r.lse = h_lse;
    expect_matches_reference(p, in, r);  // its scale, 1 / 8 exactly, is default_scale(64)
}

// ---- what `make profile` runs under Nsight Compute ----

TEST(AttentionProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (under_sanitizer()) {
        GTEST_SKIP() << "the profiling test is for Nsight Compute; the other tests run under the sanitizers";
    }
    const Problem p = main_problem(false);
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Inputs in = random_problem_inputs(p, seed);
    int ran = 0;
    for (const Step& step : steps()) {
        if (!unsupported_reason(step).empty()) {
            continue;
        }
        const StepRun r = run_step(step, p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << step.id;
        expect_matches_reference(p, in, r, profile_row_step);
        ++ran;
    }
    if (ran == 0) {
        GTEST_SKIP() << "no step of the chapter runs on this GPU";
    }
}

}  // namespace
}  // namespace stepwise::attention
