// GPU tests of the attention backward chapter: every step's dQ, dK and dV against the double-precision CPU reference
// at every row of small and odd problems (grouped K and V, causal and not), at sampled rows of the main shape, with a
// NaN in dO, the same bits on every run, and invalid arguments. The forward's O and log-sum-exp are the reference's,
// rounded as the forward writes them (O to bf16, the LSE to fp32); at the main shape, the forward chapter's first
// step's.
#include "attention/attention_reference.hpp"
#include "attention/attention_steps.hpp"
#include "attention_backward/attention_backward_reference.hpp"
#include "attention_backward/attention_backward_steps.hpp"
#include "core/bf16.hpp"
#include "core/device_buffer.hpp"
#include "support/gpu_test_support.hpp"
#include "support/guarded_buffer.hpp"
#include "support/large_problem.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::attention_backward {

//! Test names and failure messages show a step by its id.
void PrintTo(const Step& step, std::ostream* os) { *os << step.id; }

namespace {

using attention::default_scale;
using attention::kv_elements;
using attention::q_elements;
using stepwise::testing::fresh_seed;
using stepwise::testing::launch_with_poisoned_workspace;
using stepwise::testing::under_sanitizer;

using stepwise::testing::Guarded;
constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

//! The small and odd problems every step is compared at, every row: one row; rows that are not a multiple of 64 (65:
//! one row past a tile); two query heads to each K/V head, four to one, and four to each of two.
const std::vector<Problem> small_problems = {{1, 1, 1, 1, 64, false},   {2, 3, 3, 127, 128, true},
                                            {1, 4, 2, 200, 64, false},  {1, 4, 1, 133, 128, true},
                                            {2, 2, 2, 65, 64, true},    {1, 2, 2, 17, 128, false},
                                            {1, 8, 2, 100, 64, true}};

//! The chapter's main shape, causal or not (the timing program's), compared at every 97th row of two heads.
Problem main_problem(bool causal) { return {4, 16, 16, 4096, 128, causal}; }
constexpr int main_row_step = 97;
constexpr int profile_row_step = 1024;  //!< the profiling run at a few rows of one head

std::string step_name(const ::testing::TestParamInfo<Step>& info) { return info.param.id; }

//! "2 x 8 (2 K/V heads) x 200 x 64 causal": a problem in failure messages.
std::string text(const Problem& p)
{
    return std::to_string(p.batch) + " x " + std::to_string(p.heads) + " (" + std::to_string(p.kv_heads) +
           " K/V heads) x " + std::to_string(p.seq) + " x " + std::to_string(p.head_dim) + (p.causal ? " causal" : "");
}

//! Q, K, V and dO of a problem as floats that hold bf16 values, and the forward's O (rounded to bf16) and
//! log-sum-exp (rounded to fp32) from the reference.
struct Inputs {
    std::vector<float> q, k, v, d_o, o, lse;
};

//! The forward's outputs of `in`, as a forward step writes them.
void add_forward_outputs(const Problem& p, Inputs& in)
{
    in.o.assign(q_elements(p), 0.0f);
    in.lse.assign(q_elements(p) / p.head_dim, 0.0f);
    std::vector<double> o(p.head_dim);
    std::size_t id = 0;
    for (int b = 0; b < p.batch; ++b) {
        for (int h = 0; h < p.heads; ++h) {
            for (int row = 0; row < p.seq; ++row, ++id) {
                double lse = 0;
                attention::reference_row(p, default_scale(p.head_dim), in.q.data(), in.k.data(), in.v.data(), b, h,
                                         row, o.data(), &lse);
                std::copy(o.begin(), o.end(), in.o.begin() + static_cast<std::ptrdiff_t>(id * p.head_dim));
                in.lse[id] = static_cast<float>(lse);
            }
        }
    }
    in.o = round_to_bf16(in.o);
}

//! The forward's outputs of `in` from the forward chapter's first step on the GPU (a problem too large for the
//! reference at every row).
void add_forward_outputs_of_the_first_forward_step(const Problem& p, Inputs& in)
{
    const attention::Step& forward = attention::steps().front();
    ASSERT_EQ(attention::unsupported_reason(forward), "");
    DeviceBuffer<bf16> d_q(q_elements(p)), d_k(kv_elements(p)), d_v(kv_elements(p)), d_o(q_elements(p));
    DeviceBuffer<float> d_lse(q_elements(p) / p.head_dim);
    for (const auto& [to, from] : {std::pair{&d_q, &in.q}, std::pair{&d_k, &in.k}, std::pair{&d_v, &in.v}}) {
        const std::vector<unsigned char> bits = narrow(*from, true);
        STEPWISE_CUDA_CHECK(cudaMemcpy(to->data(), bits.data(), bits.size(), cudaMemcpyHostToDevice));
    }
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        return forward.attention(d_temp, temp_bytes, d_q.data(), d_k.data(), d_v.data(), d_o.data(), d_lse.data(), p,
                                 default_scale(p.head_dim), 0);
    };
    ASSERT_EQ(launch_with_poisoned_workspace(call), cudaSuccess);
    std::vector<unsigned char> o_bytes(q_elements(p) * sizeof(bf16));
    STEPWISE_CUDA_CHECK(cudaMemcpy(o_bytes.data(), d_o.data(), o_bytes.size(), cudaMemcpyDeviceToHost));
    in.o = widen(o_bytes.data(), q_elements(p), true);
    in.lse = d_lse.download();
}

//! Random Q, K, V and dO, and the forward's outputs: the reference's, else (`on_the_gpu`) the first forward step's.
Inputs random_problem_inputs(const Problem& p, std::uint64_t seed, bool on_the_gpu = false)
{
    Inputs in{attention::random_inputs(q_elements(p), seed), attention::random_inputs(kv_elements(p), seed + 1),
              attention::random_inputs(kv_elements(p), seed + 2), attention::random_inputs(q_elements(p), seed + 3),
              {}, {}};
    if (on_the_gpu) {
        add_forward_outputs_of_the_first_forward_step(p, in);
    } else {
        add_forward_outputs(p, in);
    }
    return in;
}

//! The index of (`row`, `col`) of head `head` of batch 0, in a tensor of query heads or of K/V heads.
std::size_t index_of(const Problem& p, int head, int row, int col)
{
    return (static_cast<std::size_t>(head) * p.seq + row) * p.head_dim + col;
}

//! What a run found: dQ ([batch, heads, seq, head_dim]), dK and dV ([batch, kv_heads, seq, head_dim]) as floats,
//! and their bytes (to compare runs bit for bit): dQ's, and dK's followed by dV's.
struct StepRun {
    cudaError_t launch = cudaErrorUnknown;
    std::vector<float> dq, dk, dv;
    std::vector<unsigned char> dq_bytes, dk_dv_bytes;
};

//! Runs `step` on `p` into poisoned dQ, dK and dV, each followed by a poisoned guard, with a poisoned workspace.
//! Checks that no error is left, that the guards were kept and that no input was changed.
StepRun run_step(const Step& step, const Problem& p, const Inputs& in)
{
    StepRun r;
    const std::vector<unsigned char> q = narrow(in.q, true), k = narrow(in.k, true), v = narrow(in.v, true),
                                     o = narrow(in.o, true), d_o = narrow(in.d_o, true), lse = narrow(in.lse, false);
    const Guarded d_q(q), d_k(k), d_v(v), d_out(o), d_lse(lse), d_grad_out(d_o);
    const Guarded d_dq(q.size()), d_dk(k.size()), d_dv(v.size());
    const auto call = [&](void* d_temp, std::size_t& temp_bytes) {
        return step.backward(d_temp, temp_bytes, d_q.as<bf16>(), d_k.as<bf16>(), d_v.as<bf16>(), d_out.as<bf16>(),
                             d_lse.as<float>(), d_grad_out.as<bf16>(), d_dq.as<bf16>(), d_dk.as<bf16>(),
                             d_dv.as<bf16>(), p, default_scale(p.head_dim), 0);
    };
    r.launch = launch_with_poisoned_workspace(call);
    if (r.launch != cudaSuccess) {
        return r;
    }
    const std::vector<unsigned char> dq = d_dq.read("dQ"), dk = d_dk.read("dK"), dv = d_dv.read("dV");
    r.dq = widen(dq.data(), q_elements(p), true);
    r.dk = widen(dk.data(), kv_elements(p), true);
    r.dv = widen(dv.data(), kv_elements(p), true);
    r.dq_bytes = dq;
    r.dk_dv_bytes = dk;
    r.dk_dv_bytes.insert(r.dk_dv_bytes.end(), dv.begin(), dv.end());
    EXPECT_TRUE(d_q.read("Q") == q && d_k.read("K") == k && d_v.read("V") == v && d_out.read("O") == o &&
                d_lse.read("LSE") == lse && d_grad_out.read("dO") == d_o)
        << "the step changed an input";
    return r;
}

//! The device memory `step` takes at `p`: the tensors and its workspace.
std::size_t device_bytes(const Step& step, const Problem& p)
{
    DeviceBuffer<unsigned char> any(256);  // asked for the workspace's size, a launcher only checks the pointers
    bf16* b = reinterpret_cast<bf16*>(any.data());
    std::size_t temp_bytes = 0;
    STEPWISE_CUDA_CHECK(step.backward(nullptr, temp_bytes, b, b, b, b, reinterpret_cast<float*>(any.data()), b, b, b,
                                      b, p, default_scale(p.head_dim), 0));
    return (4 * q_elements(p) + 4 * kv_elements(p)) * sizeof(bf16) + q_elements(p) / p.head_dim * sizeof(float) +
           temp_bytes;
}

//! Compares every `row_step`-th row (and the last) of dQ of the query heads in `heads`, and of dK and dV of their
//! K/V heads, with the reference; all heads where `heads` is empty. The reference recomputes the forward, or with
//! `from_the_forward` takes its O and log-sum-exp as the step read them (the backward pass alone, at O(seq
//! head_dim) a head where recomputing costs O(seq^2 head_dim)).
void expect_matches_reference(const Problem& p, const Inputs& in, const StepRun& r, int row_step = 1,
                              std::vector<int> heads = {}, bool from_the_forward = false)
{
    if (heads.empty()) {
        for (int h = 0; h < p.heads; ++h) {
            heads.push_back(h);
        }
    }
    const float scale = default_scale(p.head_dim);
    const int group = p.heads / p.kv_heads;
    const Tolerance t = attention_backward::tolerance(p);  // not the forward's, which Problem's namespace offers
    Comparison dq, dk, dv;
    const auto sampled = [&](int row) { return row % row_step == 0 || row == p.seq - 1; };
    for (int b = 0; b < p.batch; ++b) {
        std::vector<int> kv_heads;
        for (const int h : heads) {
            if (kv_heads.empty() || kv_heads.back() != h / group) {
                kv_heads.push_back(h / group);
            }
        }
        for (const int kv : kv_heads) {
            std::vector<RowStatistics> stats;
            for (int g = 0; g < group; ++g) {
                const int h = kv * group + g;
                stats.push_back(from_the_forward
                                    ? row_statistics_from_forward(p, in.o.data(), in.lse.data(), in.d_o.data(), b, h)
                                    : row_statistics(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), b,
                                                     h));
            }
            for (int g = 0; g < group; ++g) {
                const int h = kv * group + g;
                if (std::find(heads.begin(), heads.end(), h) == heads.end()) {
                    continue;
                }
                for (int row = 0; row < p.seq; ++row) {
                    if (sampled(row)) {
                        const std::size_t id = (static_cast<std::size_t>(b) * p.heads + h) * p.seq + row;
                        compare_row(r.dq.data() + id * p.head_dim,
                                    reference_dq(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(),
                                                 stats[g], b, h, row),
                                    static_cast<std::int64_t>(id), t, dq);
                    }
                }
            }
            for (int key = 0; key < p.seq; ++key) {
                if (!sampled(key)) {
                    continue;
                }
                Gradient expected_dk, expected_dv;
                reference_dk_dv(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), stats, b, kv, key,
                                expected_dk, expected_dv);
                const std::size_t id = (static_cast<std::size_t>(b) * p.kv_heads + kv) * p.seq + key;
                compare_row(r.dk.data() + id * p.head_dim, expected_dk, static_cast<std::int64_t>(id), t, dk);
                compare_row(r.dv.data() + id * p.head_dim, expected_dv, static_cast<std::int64_t>(id), t, dv);
            }
        }
    }
    EXPECT_TRUE(dq.passed()) << text(p) << ": " << dq.describe("dQ");
    EXPECT_TRUE(dk.passed()) << text(p) << ": " << dk.describe("dK");
    EXPECT_TRUE(dv.passed()) << text(p) << ": " << dv.describe("dV");
}

class AttnBackwardStepTest : public ::testing::TestWithParam<Step> {
protected:
    void SetUp() override
    {
        STEPWISE_SKIP_WITHOUT_GPU();
        if (const std::string reason = unsupported_reason(GetParam()); !reason.empty()) {
            GTEST_SKIP() << GetParam().id << " " << reason;
        }
    }

    void expect_every_row(const Problem& p, const Inputs& in)
    {
        const StepRun r = run_step(GetParam(), p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p);
        expect_matches_reference(p, in, r);
    }
};

TEST_P(AttnBackwardStepTest, MatchesTheReferenceAtEveryRowOfSmallAndOddShapes)
{
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (std::size_t i = 0; i < small_problems.size(); ++i) {
        expect_every_row(small_problems[i], random_problem_inputs(small_problems[i], seed + 4 * i));
    }
}

TEST_P(AttnBackwardStepTest, ANaNInDoReachesItsRowsDqAndItsKeysDkAndDv)
{
    // Head 1 of 2 (each its own K/V head), column 3. Without the mask: row 40's dQ, every key's dK, column 3 of every
    // key's dV. Under it, row 63, the last of its tile of 64 (a hidden P of 0 times the NaN would reach the keys after
    // a row within its tile): keys 0 to 63.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool causal : {false, true}) {
        const Problem p{1, 2, 2, 150, 64, causal};
        Inputs in = random_problem_inputs(p, seed);
        in.d_o[index_of(p, 1, causal ? 63 : 40, 3)] = nan_value;
        expect_every_row(p, in);
    }
}

TEST_P(AttnBackwardStepTest, TheSameBitsOnEveryRunWhereTheStepPromisesThem)
{
    // dK and dV always (each key's sums are one block's, in a fixed order); dQ where no atomics add into it.
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Problem p{2, 4, 2, 300, 128, true};
    const Inputs in = random_problem_inputs(p, seed);
    const StepRun first = run_step(GetParam(), p, in), second = run_step(GetParam(), p, in);
    ASSERT_EQ(first.launch, cudaSuccess);
    ASSERT_EQ(second.launch, cudaSuccess);
    EXPECT_TRUE(first.dk_dv_bytes == second.dk_dv_bytes) << "dK or dV differ between two runs";
    if (GetParam().dq_same_bits) {
        EXPECT_TRUE(first.dq_bytes == second.dq_bytes) << "dQ differs between two runs";
    }
}

TEST_P(AttnBackwardStepTest, MainShapeAtSampledRowsOfTwoHeads)
{
    if (under_sanitizer()) {
        GTEST_SKIP() << "4 x 16 x 4096 x 128 under compute-sanitizer would take minutes; the sanitizers check the "
                        "smaller shapes";
    }
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (const bool causal : {false, true}) {
        const Problem p = main_problem(causal);
        if (const std::string why = stepwise::testing::large_problem_skip_reason(device_bytes(GetParam(), p));
            !why.empty()) {
            GTEST_SKIP() << text(p) << " " << why;
        }
        const Inputs in = random_problem_inputs(p, seed, true);
        const StepRun r = run_step(GetParam(), p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << text(p);
        expect_matches_reference(p, in, r, main_row_step, {0, p.heads - 1}, true);
    }
}

TEST_P(AttnBackwardStepTest, RejectsInvalidArguments)
{
    const BackwardFunction backward = GetParam().backward;
    const Problem good{1, 4, 2, 64, 64, false};
    DeviceBuffer<bf16> q(q_elements(good)), k(kv_elements(good)), v(kv_elements(good)), o(q_elements(good)),
        d_o(q_elements(good)), dq(q_elements(good)), dk(kv_elements(good)), dv(kv_elements(good));
    DeviceBuffer<float> lse(q_elements(good) / good.head_dim);
    const float scale = default_scale(good.head_dim);
    std::size_t temp_bytes = 0;
    ASSERT_EQ(backward(nullptr, temp_bytes, q.data(), k.data(), v.data(), o.data(), lse.data(), d_o.data(), dq.data(),
                       dk.data(), dv.data(), good, scale, 0),
              cudaSuccess);
    DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));
    struct Invalid {
        const char* what;
        Problem p;
        const bf16 *q, *k, *v, *o;
        const float* lse;
        const bf16* d_o;
        bf16 *dq, *dk, *dv;
    };
    const float* const lse_off = reinterpret_cast<const float*>(reinterpret_cast<unsigned char*>(lse.data()) + 2);
    const Problem too_many_heads{65535, 32769, 32769, 64, 64, false};  // batch * heads of 2^31 + 32767
    const Invalid base{"", good, q.data(), k.data(), v.data(), o.data(), lse.data(), d_o.data(), dq.data(), dk.data(),
                       dv.data()};
    std::vector<Invalid> cases;
    const auto with = [&](const char* what, auto change) {
        Invalid c = base;
        c.what = what;
        change(c);
        cases.push_back(c);
    };
    with("head_dim 96", [](Invalid& c) { c.p.head_dim = 96; });
    with("3 K/V heads for 4 heads", [](Invalid& c) { c.p.kv_heads = 3; });
    with("seq 0", [](Invalid& c) { c.p.seq = 0; });
    with("batch * heads of 2^31 and more", [&](Invalid& c) { c.p = too_many_heads; });
    with("no Q", [](Invalid& c) { c.q = nullptr; });
    with("no K", [](Invalid& c) { c.k = nullptr; });
    with("no V", [](Invalid& c) { c.v = nullptr; });
    with("no O", [](Invalid& c) { c.o = nullptr; });
    with("no LSE", [](Invalid& c) { c.lse = nullptr; });
    with("no dO", [](Invalid& c) { c.d_o = nullptr; });
    with("no dQ", [](Invalid& c) { c.dq = nullptr; });
    with("no dK", [](Invalid& c) { c.dk = nullptr; });
    with("no dV", [](Invalid& c) { c.dv = nullptr; });
    with("the LSE 2 bytes past a 4-byte boundary", [&](Invalid& c) { c.lse = lse_off; });
    with("dO 8 bytes past a 16-byte boundary", [&](Invalid& c) { c.d_o = d_o.data() + 4; });
    with("dK 8 bytes past a 16-byte boundary", [&](Invalid& c) { c.dk = dk.data() + 4; });
    for (const Invalid& c : cases) {
        std::size_t asked = 0;
        EXPECT_EQ(backward(nullptr, asked, c.q, c.k, c.v, c.o, c.lse, c.d_o, c.dq, c.dk, c.dv, c.p, scale, 0),
                  cudaErrorInvalidValue)
            << c.what;
        std::size_t given = d_temp.size();
        EXPECT_EQ(backward(d_temp.data(), given, c.q, c.k, c.v, c.o, c.lse, c.d_o, c.dq, c.dk, c.dv, c.p, scale, 0),
                  cudaErrorInvalidValue)
            << c.what << ", with a workspace";
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    stepwise::testing::expect_refuses_a_workspace_one_byte_short([&](void* d_temp_storage, std::size_t& bytes) {
        return backward(d_temp_storage, bytes, q.data(), k.data(), v.data(), o.data(), lse.data(), d_o.data(),
                        dq.data(), dk.data(), dv.data(), good, scale, 0);
    });
}

INSTANTIATE_TEST_SUITE_P(AttnBackward, AttnBackwardStepTest, ::testing::ValuesIn(steps()), step_name);

TEST(AttnBackwardProfile, EveryStepOnceAtOneMainShape)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (under_sanitizer()) {
        GTEST_SKIP() << "the profiling test is for Nsight Compute; the other tests run under the sanitizers";
    }
    const Problem p = main_problem(false);
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Inputs in = random_problem_inputs(p, seed, true);
    int ran = 0;
    for (const Step& step : steps()) {
        if (!unsupported_reason(step).empty()) {
            continue;
        }
        const StepRun r = run_step(step, p, in);
        ASSERT_EQ(r.launch, cudaSuccess) << step.id;
        expect_matches_reference(p, in, r, profile_row_step, {0}, true);
        ++ran;
    }
    if (ran == 0) {
        GTEST_SKIP() << "no step of the chapter runs on this GPU";
    }
}

}  // namespace
}  // namespace stepwise::attention_backward
