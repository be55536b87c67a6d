// The attention backward chapter of the timing program: registry entry, the tensor cores' ceiling, cuDNN's SDPA
// backward and the step rows, at the forward chapter's main shape (causal and not), at the other shapes of the
// chapter's bar, at odd sequences and over sequence lengths of 16k tokens. Each size's O and log-sum-exp come from the
// forward chapter's final step (its first where the GPU does not take the final one); cuDNN and the steps are sampled
// in turn at each size.
#include "attention/attention_reference.hpp"
#include "attention/attention_sizes.hpp"
#include "attention/attention_steps.hpp"
#include "attention_backward/attention_backward_cudnn.hpp"
#include "attention_backward/attention_backward_reference.hpp"
#include "attention_backward/attention_backward_steps.hpp"
#include "core/bf16.hpp"
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/pick.hpp"
#include "core/step_loop.hpp"
#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

namespace stepwise {
namespace {

namespace at = attention;
namespace ab = attention_backward;
namespace tc = tensor_core_gemm;
using at::problem_of;
using at::problem_size;
using at::size_key;
using at::size_text;

//! The main shape, causal and not: every step is measured there.
constexpr at::Problem main_problems[] = {{4, 16, 16, 4096, 128, false}, {4, 16, 16, 4096, 128, true}};
//! Every step and cuDNN, besides the sweep: head dim 64, 32 heads, grouped K/V (32 heads of Q, 8 of K and V), and
//! sequences that are multiples of no tile (1, 63, 1000, 4095).
constexpr at::Problem other_problems[] = {{8, 16, 16, 2048, 64, false}, {16, 32, 32, 1024, 128, false},
                                          {4, 32, 8, 4096, 128, false}, {16, 16, 16, 1000, 128, false},
                                          {4, 16, 16, 4095, 128, false}, {64, 16, 16, 63, 128, false},
                                          {16, 16, 16, 1, 128, false}};
//! Rows of dQ, and rows of dK and dV, compared with the double reference at each size, spread over every batch, head
//! and position (and the last).
constexpr std::int64_t checked_rows = 256;
//! The backward pass's work, counted as FlashAttention's papers count it: 2.5 times the forward's (five products of
//! the forward's size against two).
constexpr double backward_work = 2.5;

//! Every `total / count`-th of `total` ids, and the last.
std::vector<std::int64_t> spread(std::int64_t total, std::int64_t count)
{
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < std::min(total, count); ++i) {
        ids.push_back(i * total / std::min(total, count));
    }
    if (ids.back() != total - 1) {
        ids.push_back(total - 1);
    }
    return ids;
}

//! The inputs' values (a prefix of each serves every size): Q, K, V and dO as the GPU reads them, and their bf16 bits.
struct Inputs {
    std::vector<float> q, k, v, d_o;
    std::vector<std::uint16_t> q_bits, k_bits, v_bits, d_o_bits;
};

//! The reference at the checked rows of one problem, from the forward's O and log-sum-exp as the steps read them.
struct Reference {
    std::vector<std::int64_t> q_rows, kv_rows;  //!< flat row ids of dQ, and of dK and dV
    std::vector<ab::Gradient> dq, dk, dv;
};

Reference make_reference(const at::Problem& p, float scale, const Inputs& in, const std::vector<float>& o,
                         const std::vector<float>& lse)
{
    Reference r;
    r.q_rows = spread(std::int64_t{p.batch} * p.heads * p.seq, checked_rows);
    r.kv_rows = spread(std::int64_t{p.batch} * p.kv_heads * p.seq, checked_rows);
    const int group = p.heads / p.kv_heads;
    // Each head's statistics, as they are needed: D from the forward's O, and its log-sum-exp.
    std::vector<ab::RowStatistics> stats(static_cast<std::size_t>(p.batch) * p.heads);
    const auto stats_of = [&](int b, int h) -> const ab::RowStatistics& {
        ab::RowStatistics& s = stats[static_cast<std::size_t>(b) * p.heads + h];
        if (s.lse.empty()) {
            s = ab::row_statistics_from_forward(p, o.data(), lse.data(), in.d_o.data(), b, h);
        }
        return s;
    };
    for (const std::int64_t id : r.q_rows) {
        const int row = static_cast<int>(id % p.seq), h = static_cast<int>(id / p.seq % p.heads);
        const int b = static_cast<int>(id / p.seq / p.heads);
        r.dq.push_back(ab::reference_dq(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), stats_of(b, h),
                                        b, h, row));
    }
    for (const std::int64_t id : r.kv_rows) {
        const int key = static_cast<int>(id % p.seq), kv = static_cast<int>(id / p.seq % p.kv_heads);
        const int b = static_cast<int>(id / p.seq / p.kv_heads);
        std::vector<ab::RowStatistics> group_stats;
        for (int g = 0; g < group; ++g) {
            group_stats.push_back(stats_of(b, kv * group + g));
        }
        ab::Gradient dk, dv;
        ab::reference_dk_dv(p, scale, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), group_stats, b, kv, key, dk,
                            dv);
        r.dk.push_back(std::move(dk));
        r.dv.push_back(std::move(dv));
    }
    return r;
}

class AttentionBackwardChapter final : public ChapterBase {
public:
    AttentionBackwardChapter()
        : ChapterBase("attention_backward", "Attention backward: dQ, dK and dV", "tensor_peak", "AttnBackward")
    {
        // The backward steps' kernels by name (the profiled test also runs the forward chapter's first step for O and L).
        entry_.profile = {"AttnBackwardProfile.*",
                          "regex:row_dot|probabilities|score_gradients|key_gradient|query_gradient|key_tile|convert_dq", ""};
        entry_.timings = {{"single_cold",
                           "events around one launch; L2 flushed before each sample; samples kept at any SM clock; "
                           "at each size cuDNN and the steps sampled in turn",
                           true, 1, 0.0}};
        entry_.ceilings = {{"tensor_peak", "the counted FLOPs (2.5 times the forward's) as bf16 multiply-adds by "
                                           "wgmma from shared memory on every SM (the tensor-core chapter's "
                                           "ceiling)"}};
        entry_.baselines = {{"cudnn_sdpa_backward_bf16",
                             "cuDNN's SDPA backward through the cudnn-frontend graph API, its fastest engine "
                             "configuration at each size: bf16 Q, K, V, O, dO, dQ, dK, dV, the forward's fp32 "
                             "log-sum-exp, the same layout, scale, mask and grouping"}};
        const std::vector<ab::Step>& steps = ab::steps();
        for (std::size_t i = 0; i < steps.size(); ++i) {
            const ab::Step& s = steps[i];
            StepEntry step{s.id, s.title, s.file, s.name_space, "attention_backward", true, true, {}, s.kernels};
            step.needs = s.needs;
            for (const at::Problem& p : main_problems) {
                step.sizes.push_back(problem_size(p));
            }
            for (const at::Problem& p : other_problems) {
                step.sizes.push_back(problem_size(p));
            }
            entry_.steps.push_back(step);
        }
        std::vector<std::string> sweep_rows;
        for (std::size_t i = steps.size() >= 2 ? steps.size() - 2 : 0; i < steps.size(); ++i) {
            sweep_rows.push_back(steps[i].id);
        }
        sweep_rows.push_back("cudnn_sdpa_backward_bf16");
        sweep_rows.push_back("tensor_peak");
        add_sweep(entry_, at::sequence_sweep(sweep_rows));
        entry_.headline = Headline{size_key(main_problems[0]), "single_cold", entry_.steps.front().id,
                                   entry_.steps.back().id};
        // PyTorch's backward pass beside the final step, at each of its sizes.
        entry_.pytorch = {at::pytorch_row("pytorch_sdpa_backward_bf16", entry_.steps.back().sizes)};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        const std::vector<std::string> runnable =
            runnable_steps(ab::steps(), step_ids, ab::unsupported_reason, chapter["unsupported"]);
        const std::string peak_reason = tc::tensor_peak_unsupported(chapter["unsupported"]);
        ab::CudnnSdpaBackward cudnn;
        if (!cudnn.available()) {
            chapter["unsupported"].push_back({{"id", "cudnn_sdpa_backward_bf16"}, {"reason", cudnn.reason()}});
        }
        // The forward that gives each size its O and log-sum-exp: the forward chapter's final step, else its first.
        const at::Step* forward = &at::steps().back();
        if (!at::unsupported_reason(*forward).empty()) {
            forward = &at::steps().front();
            if (const std::string reason = at::unsupported_reason(*forward); !reason.empty()) {
                throw std::runtime_error("attention_backward: no forward step runs here to give O (" + reason + ")");
            }
        }
        const auto [most_q, most_kv] = at::largest_elements(all_sizes(entry_));
        Inputs in{at::random_inputs(most_q, context.seed), at::random_inputs(most_kv, context.seed + 1),
                  at::random_inputs(most_kv, context.seed + 2), at::random_inputs(most_q, context.seed + 3),
                  {}, {}, {}, {}};
        in.q_bits = to_bf16(in.q);
        in.k_bits = to_bf16(in.k);
        in.v_bits = to_bf16(in.v);
        in.d_o_bits = to_bf16(in.d_o);
        for (const std::int64_t key : all_sizes(entry_)) {
            measure_size(context, runnable, peak_reason.empty(), cudnn, *forward, in, key, chapter);
        }
    }

private:
    void measure_size(MeasureContext& context, const std::vector<std::string>& runnable, bool peak_supported,
                      ab::CudnnSdpaBackward& cudnn, const at::Step& forward, const Inputs& in, std::int64_t key,
                      nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const TimingMode& mode = entry_.timings.front();
        const at::Problem p = problem_of(key);
        const float scale = at::default_scale(p.head_dim);
        const std::int64_t flops = static_cast<std::int64_t>(backward_work * at::counted_flops(p));
        const std::size_t q_count = at::q_elements(p), kv_count = at::kv_elements(p);
        const std::size_t rows = q_count / p.head_dim;
        DeviceBuffer<std::uint16_t> d_q(q_count), d_k(kv_count), d_v(kv_count), d_o(q_count), d_do(q_count);
        DeviceBuffer<float> d_lse(rows);
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_q.data(), in.q_bits.data(), q_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_k.data(), in.k_bits.data(), kv_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_v.data(), in.v_bits.data(), kv_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_do.data(), in.d_o_bits.data(), q_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may return before they land
        const auto* q = reinterpret_cast<const at::bf16*>(d_q.data());
        const auto* k = reinterpret_cast<const at::bf16*>(d_k.data());
        const auto* v = reinterpret_cast<const at::bf16*>(d_v.data());
        const auto* d_out = reinterpret_cast<const at::bf16*>(d_do.data());
        auto* o = reinterpret_cast<at::bf16*>(d_o.data());
        {  // the forward's O and log-sum-exp, once
            std::size_t temp_bytes = 0;
            STEPWISE_CUDA_CHECK(forward.attention(nullptr, temp_bytes, q, k, v, o, d_lse.data(), p, scale, stream));
            DeviceBuffer<unsigned char> temp(std::max<std::size_t>(temp_bytes, 1));
            STEPWISE_CUDA_CHECK(forward.attention(temp.data(), temp_bytes, q, k, v, o, d_lse.data(), p, scale, stream));
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
        }
        DeviceBuffer<unsigned char> d_dq(q_count * 2 + guard_bytes), d_dk(kv_count * 2 + guard_bytes),
            d_dv(kv_count * 2 + guard_bytes);
        auto* dq = reinterpret_cast<at::bf16*>(d_dq.data());
        auto* dk = reinterpret_cast<at::bf16*>(d_dk.data());
        auto* dv = reinterpret_cast<at::bf16*>(d_dv.data());

        if (peak_supported && measured_at(entry_, "tensor_peak", key)) {
            DeviceBuffer<float> d_sink(tc::tensor_peak_threads());
            const auto peak = [&] { return tc::tensor_peak(static_cast<double>(flops) / 2, d_sink.data(), stream); };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[0], {peak, key, std::nullopt, flops});
        }

        // The reference, from the forward's O and log-sum-exp as the steps read them.
        const std::vector<float> o_values = from_bf16(d_o.download()), lse_values = d_lse.download();
        const Reference reference = make_reference(p, scale, in, o_values, lse_values);
        const ab::Tolerance tolerance = ab::tolerance(p);
        // dQ, dK and dV are poisoned before the checking call; the guards after them must stay so.
        const auto validate = [&](const std::function<cudaError_t()>& launch) {
            for (DeviceBuffer<unsigned char>* out : {&d_dq, &d_dk, &d_dv}) {
                out->fill_bytes(poison_byte, stream);
            }
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const std::vector<unsigned char> dq_bytes = d_dq.download(), dk_bytes = d_dk.download(),
                                             dv_bytes = d_dv.download();
            const bool guards_kept = guard_kept(dq_bytes, q_count * 2) && guard_kept(dk_bytes, kv_count * 2) &&
                                     guard_kept(dv_bytes, kv_count * 2);
            ab::Comparison c_dq, c_dk, c_dv;
            const auto compare = [&](const std::vector<unsigned char>& bytes, std::int64_t id,
                                     const ab::Gradient& expected, ab::Comparison& c) {
                std::vector<std::uint16_t> row_bits(static_cast<std::size_t>(p.head_dim));
                std::memcpy(row_bits.data(), bytes.data() + static_cast<std::size_t>(id) * p.head_dim * 2,
                            row_bits.size() * 2);
                ab::compare_row(from_bf16(row_bits).data(), expected, id, tolerance, c);
            };
            for (std::size_t i = 0; i < reference.q_rows.size(); ++i) {
                compare(dq_bytes, reference.q_rows[i], reference.dq[i], c_dq);
            }
            for (std::size_t i = 0; i < reference.kv_rows.size(); ++i) {
                compare(dk_bytes, reference.kv_rows[i], reference.dk[i], c_dk);
                compare(dv_bytes, reference.kv_rows[i], reference.dv[i], c_dv);
            }
            return Validation{c_dq.passed() && c_dk.passed() && c_dv.passed() && guards_kept,
                              c_dq.describe("dQ") + "; " + c_dk.describe("dK") + "; " + c_dv.describe("dV") +
                                  " (the double reference from the forward's O and log-sum-exp)" +
                                  (guards_kept ? "" : "; wrote past a gradient"),
                              {{"max_rel", std::max({c_dq.max_error, c_dk.max_error, c_dv.max_error})},
                               {"max_dq_error", c_dq.max_error},
                               {"max_dk_error", c_dk.max_error},
                               {"max_dv_error", c_dv.max_error}}};  // of the terms' magnitudes
        };

        // cuDNN and the steps are sampled in turn (see the timing mode), then each is validated.
        const ab::BackwardTensors tensors{q, k, v, o, d_lse.data(), d_out, dq, dk, dv};
        std::optional<PickedLibraryCall> library;
        if (cudnn.available() && measured_at(entry_, "cudnn_sdpa_backward_bf16", key)) {
            DeviceBuffer<unsigned char>& flush = context.sampler.l2_flush();
            auto [candidates, picked] =
                cudnn.pick(tensors, p, scale, library_pick_rule, flush.data(), flush.size(), stream);
            if (candidates.empty()) {
                chapter["unsupported"].push_back({{"id", "cudnn_sdpa_backward_bf16"},
                                                  {"reason", "at " + size_text(p) + ": " + cudnn.last_status()}});
            } else {
                library = PickedLibraryCall{&entry_.baselines[0],
                                            {"cudnn_sdpa_backward_bf16 at " + problem_text(entry_, key),
                                             [&] { return cudnn.run(tensors, p, scale, stream); }},
                                            cudnn.version(),
                                            std::move(candidates),
                                            picked};
            }
        }
        std::vector<std::pair<std::string, Sampler::TimedCall>> step_calls;
        std::vector<DeviceBuffer<unsigned char>> workspaces;
        workspaces.reserve(ab::steps().size());
        for (const ab::Step& step : ab::steps()) {
            if (!measures_step(entry_, runnable, step.id, key)) {
                continue;
            }
            std::size_t temp_bytes = 0;
            STEPWISE_CUDA_CHECK(step.backward(nullptr, temp_bytes, q, k, v, o, d_lse.data(), d_out, dq, dk, dv, p, scale,
                                              stream));
            workspaces.emplace_back(std::max<std::size_t>(temp_bytes, 1));
            step_calls.push_back(
                {step.id,
                 {std::string(step.id) + " at " + problem_text(entry_, key),
                  [&, temp = workspaces.back().data(), temp_bytes, backward = step.backward]() mutable {
                      return backward(temp, temp_bytes, q, k, v, o, d_lse.data(), d_out, dq, dk, dv, p, scale, stream);
                  }}});
        }
        add_rows_sampled_in_turn(chapter, context, entry_, mode, key, flops, library, step_calls, validate);
    }
};

}  // namespace

std::unique_ptr<Chapter> make_attention_backward_chapter() { return std::make_unique<AttentionBackwardChapter>(); }

}  // namespace stepwise
