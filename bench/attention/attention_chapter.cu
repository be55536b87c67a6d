// The attention chapter of the timing program: registry entry, the tensor cores' ceiling, cuDNN's SDPA and the step
// rows, at the main shape (causal and not), at the other shapes of the chapter's bar and at three sequence lengths of
// 16k tokens. cuDNN and the steps are sampled in turn at each size, as in the tensor-core chapter.
#include "attention/attention_cudnn.hpp"
#include "attention/attention_reference.hpp"
#include "attention/attention_sizes.hpp"
#include "attention/attention_steps.hpp"
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
namespace tc = tensor_core_gemm;
using at::problem_of;
using at::problem_size;
using at::size_key;
using at::size_text;

//! The main shape, causal and not: every step is measured there.
constexpr at::Problem main_problems[] = {{4, 16, 16, 4096, 128, false}, {4, 16, 16, 4096, 128, true}};
//! The final step, the one before it and cuDNN, besides the sweep: head dim 64, 32 heads, grouped K/V (32 heads of Q,
//! 8 of K and V), and sequences that are multiples of no tile.
constexpr at::Problem other_problems[] = {{8, 16, 16, 2048, 64, false},  {16, 32, 32, 1024, 128, false},
                                          {4, 32, 8, 4096, 128, false},  {16, 16, 16, 1000, 128, false},
                                          {4, 16, 16, 4095, 128, false}};
//! Rows compared with the double reference at each size, spread over every batch, head and position (and the last).
constexpr std::int64_t checked_rows = 256;

//! The bf16 bits of the inputs and the values the GPU reads (a prefix of each serves every size).
struct Inputs {
    std::vector<float> q, k, v;
    std::vector<std::uint16_t> q_bits, k_bits, v_bits;
};

//! The reference at the checked rows of one problem.
struct Reference {
    std::vector<std::int64_t> rows;  //!< flat row ids: (batch * heads + head) * seq + position
    std::vector<double> o, lse, largest_v, largest_score;
};

Reference make_reference(const at::Problem& p, float scale, const Inputs& in)
{
    Reference r;
    const std::int64_t total = std::int64_t{p.batch} * p.heads * p.seq;
    for (std::int64_t i = 0; i < std::min(total, checked_rows); ++i) {
        r.rows.push_back(i * total / std::min(total, checked_rows));
    }
    if (r.rows.back() != total - 1) {
        r.rows.push_back(total - 1);
    }
    r.o.resize(r.rows.size() * p.head_dim);
    r.lse.resize(r.rows.size());
    r.largest_v.resize(r.rows.size());
    r.largest_score.resize(r.rows.size());
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        const int position = static_cast<int>(r.rows[i] % p.seq);
        const int head = static_cast<int>(r.rows[i] / p.seq % p.heads);
        const int batch = static_cast<int>(r.rows[i] / p.seq / p.heads);
        at::reference_row(p, scale, in.q.data(), in.k.data(), in.v.data(), batch, head, position,
                          r.o.data() + i * p.head_dim, &r.lse[i], &r.largest_score[i]);
        r.largest_v[i] = at::largest_value(p, in.v.data(), batch, head);
    }
    return r;
}

class AttentionChapter final : public ChapterBase {
public:
    AttentionChapter()
        : ChapterBase("attention", "Attention: from three kernels to TMA and wgmma", "tensor_peak",
                      "Attention")
    {
        entry_.profile = {"AttentionProfile.*", "regex:attention_kernel|scores_kernel|softmax_kernel|output_kernel", ""};
        entry_.timings = {{"single_cold",
                           "events around one launch; L2 flushed before each sample; samples kept at any SM clock; "
                           "at each size cuDNN and the steps sampled in turn",
                           true, 1, 0.0}};
        entry_.ceilings = {{"tensor_peak", "the counted FLOPs as bf16 multiply-adds by wgmma from shared memory on "
                                           "every SM (the tensor cores alone; the tensor-core chapter's ceiling)"}};
        entry_.baselines = {{"cudnn_sdpa_bf16",
                             "cuDNN's SDPA forward through the cudnn-frontend graph API, its fastest engine "
                             "configuration at each size: bf16 Q, K, V, O, fp32 log-sum-exp, the same layout, scale, "
                             "mask and grouping"}};
        const std::vector<at::Step>& steps = at::steps();
        for (std::size_t i = 0; i < steps.size(); ++i) {
            const at::Step& s = steps[i];
            StepEntry step{s.id, s.title, s.file, s.name_space, "attention", true, true, {}, s.kernels};
            step.needs = s.needs;
            for (const at::Problem& p : main_problems) {
                step.sizes.push_back(problem_size(p));
            }
            if (i + 2 >= steps.size()) {  // the last two: what the final step changed shows at head dim 64
                for (const at::Problem& p : other_problems) {
                    step.sizes.push_back(problem_size(p));
                }
            }
            entry_.steps.push_back(step);
        }
        // The last three steps: step 8's persistent grid is what differs from step 7 at short sequences (step 9 runs
        // step 8's code at head dim 128).
        const std::vector<std::string> sweep_rows = {steps[steps.size() - 3].id, steps[steps.size() - 2].id,
                                                     steps.back().id, "cudnn_sdpa_bf16", "tensor_peak"};
        add_sweep(entry_, at::sequence_sweep(sweep_rows));
        entry_.headline = Headline{size_key(main_problems[0]), "single_cold", entry_.steps.front().id,
                                   entry_.steps.back().id};
        // PyTorch's scaled_dot_product_attention beside the final step, at each of its sizes.
        entry_.pytorch = {at::pytorch_row("pytorch_sdpa_bf16", entry_.steps.back().sizes)};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        const std::vector<std::string> runnable =
            runnable_steps(at::steps(), step_ids, at::unsupported_reason, chapter["unsupported"]);
        const std::string peak_reason = tc::tensor_peak_unsupported(chapter["unsupported"]);
        at::CudnnSdpa cudnn;
        if (!cudnn.available()) {
            chapter["unsupported"].push_back({{"id", "cudnn_sdpa_bf16"}, {"reason", cudnn.reason()}});
        }
        const auto [most_q, most_kv] = at::largest_elements(all_sizes(entry_));
        Inputs in{at::random_inputs(most_q, context.seed), at::random_inputs(most_kv, context.seed + 1),
                  at::random_inputs(most_kv, context.seed + 2), {}, {}, {}};
        in.q_bits = to_bf16(in.q);
        in.k_bits = to_bf16(in.k);
        in.v_bits = to_bf16(in.v);
        for (const std::int64_t key : all_sizes(entry_)) {
            measure_size(context, runnable, peak_reason.empty(), cudnn, in, key, chapter);
        }
    }

private:
    void measure_size(MeasureContext& context, const std::vector<std::string>& runnable, bool peak_supported,
                      at::CudnnSdpa& cudnn, const Inputs& in, std::int64_t key, nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const TimingMode& mode = entry_.timings.front();
        const at::Problem p = problem_of(key);
        const float scale = at::default_scale(p.head_dim);
        const std::int64_t flops = static_cast<std::int64_t>(at::counted_flops(p));
        const std::size_t q_count = at::q_elements(p), kv_count = at::kv_elements(p);
        const std::size_t rows = q_count / p.head_dim;
        DeviceBuffer<std::uint16_t> d_q(q_count), d_k(kv_count), d_v(kv_count);
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_q.data(), in.q_bits.data(), q_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_k.data(), in.k_bits.data(), kv_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaMemcpy(d_v.data(), in.v_bits.data(), kv_count * 2, cudaMemcpyHostToDevice));
        STEPWISE_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may return before they land
        DeviceBuffer<unsigned char> d_o(q_count * 2 + guard_bytes), d_lse(rows * sizeof(float) + guard_bytes);
        const auto* q = reinterpret_cast<const at::bf16*>(d_q.data());
        const auto* k = reinterpret_cast<const at::bf16*>(d_k.data());
        const auto* v = reinterpret_cast<const at::bf16*>(d_v.data());
        auto* o = reinterpret_cast<at::bf16*>(d_o.data());
        auto* lse = reinterpret_cast<float*>(d_lse.data());

        if (peak_supported && measured_at(entry_, "tensor_peak", key)) {
            DeviceBuffer<float> d_sink(tc::tensor_peak_threads());
            const auto peak = [&] { return tc::tensor_peak(static_cast<double>(flops) / 2, d_sink.data(), stream); };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[0], {peak, key, std::nullopt, flops});
        }

        const Reference reference = make_reference(p, scale, in);  // from the prefix of each input this size reads
        const at::Tolerance tolerance = at::tolerance(p);
        // O and the log-sum-exp are poisoned before the checking call; the guards after them must stay so.
        const auto validate = [&](const std::function<cudaError_t()>& launch) {
            d_o.fill_bytes(poison_byte, stream);
            d_lse.fill_bytes(poison_byte, stream);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const std::vector<unsigned char> o_bytes = d_o.download(), lse_bytes = d_lse.download();
            const bool guards_kept = guard_kept(o_bytes, q_count * 2) && guard_kept(lse_bytes, rows * sizeof(float));
            at::Comparison c;
            std::vector<std::uint16_t> row_bits(static_cast<std::size_t>(p.head_dim));
            for (std::size_t i = 0; i < reference.rows.size(); ++i) {
                const std::size_t row = static_cast<std::size_t>(reference.rows[i]);
                std::memcpy(row_bits.data(), o_bytes.data() + row * p.head_dim * 2, row_bits.size() * 2);
                const std::vector<float> got = from_bf16(row_bits);
                float got_lse = 0;
                std::memcpy(&got_lse, lse_bytes.data() + row * sizeof(float), sizeof(float));
                at::compare_row(got.data(), got_lse, reference.o.data() + i * p.head_dim, reference.lse[i], p.head_dim,
                                p.seq, reference.largest_v[i], reference.largest_score[i], reference.rows[i], tolerance,
                                c);
            }
            return Validation{c.passed() && guards_kept,
                              c.describe() + " (the double reference at " + std::to_string(reference.rows.size()) +
                                  " rows)" + (guards_kept ? "" : "; wrote past O or the log-sum-exp"),
                              {{"max_rel", c.max_error}, {"max_lse_error", c.max_lse_error}}};  // max_rel: of the head's largest |v|
        };

        // cuDNN and the steps are sampled in turn (see the timing mode), then each is validated. cuDNN's plan is picked
        // first, with L2 flushed before every sample as the rows are timed (no candidate: cuDNN refused the problem,
        // and last_status() says why).
        std::optional<PickedLibraryCall> library;
        if (cudnn.available() && measured_at(entry_, "cudnn_sdpa_bf16", key)) {
            DeviceBuffer<unsigned char>& flush = context.sampler.l2_flush();
            auto [candidates, picked] =
                cudnn.pick(q, k, v, o, lse, p, scale, library_pick_rule, flush.data(), flush.size(), stream);
            if (candidates.empty()) {
                chapter["unsupported"].push_back(
                    {{"id", "cudnn_sdpa_bf16"}, {"reason", "at " + size_text(p) + ": " + cudnn.last_status()}});
            } else {
                library = PickedLibraryCall{&entry_.baselines[0],
                                            {"cudnn_sdpa_bf16 at " + problem_text(entry_, key),
                                             [&] { return cudnn.run(q, k, v, o, lse, p, scale, stream); }},
                                            cudnn.version(),
                                            std::move(candidates),
                                            picked};
            }
        }
        std::vector<std::pair<std::string, Sampler::TimedCall>> step_calls;
        std::vector<DeviceBuffer<unsigned char>> workspaces;
        workspaces.reserve(at::steps().size());
        for (const at::Step& step : at::steps()) {
            if (!measures_step(entry_, runnable, step.id, key)) {
                continue;
            }
            std::size_t temp_bytes = 0;
            STEPWISE_CUDA_CHECK(step.attention(nullptr, temp_bytes, q, k, v, o, lse, p, scale, stream));
            workspaces.emplace_back(temp_bytes);
            step_calls.push_back(
                {step.id,
                 {std::string(step.id) + " at " + problem_text(entry_, key),
                  [&, temp = workspaces.back().data(), temp_bytes, attention = step.attention]() mutable {
                      return attention(temp, temp_bytes, q, k, v, o, lse, p, scale, stream);
                  }}});
        }
        add_rows_sampled_in_turn(chapter, context, entry_, mode, key, flops, library, step_calls, validate);
    }
};

}  // namespace

std::unique_ptr<Chapter> make_attention_chapter() { return std::make_unique<AttentionChapter>(); }

}  // namespace stepwise
