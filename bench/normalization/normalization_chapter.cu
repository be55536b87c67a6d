// The normalization chapter of the timing program: registry entry, the copy ceiling, cuDNN's LayerNorm and RMSNorm
// and the step rows, in fp32 and bf16, at the main shapes, at odd shapes and over row lengths at a fixed total.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/row_shapes.hpp"
#include "core/step_loop.hpp"
#include "normalization/norm_shapes.hpp"
#include "normalization/normalization_cudnn.hpp"
#include "normalization/normalization_reference.hpp"
#include "normalization/normalization_steps.hpp"

#include <algorithm>
#include <functional>
#include <map>

namespace stepwise {
namespace {

using bf16 = __nv_bfloat16;

using namespace norm_shapes;  // Norm, Shape and the registry's key and text of a shape

using row_shapes::checked_values;
constexpr float epsilon = 1e-5f;

//! The bytes one call moves: x read, y written, gamma (and beta) read, LayerNorm's mean and rstd written.
std::int64_t moved_bytes(Shape s)
{
    const std::int64_t e = s.element_bytes;
    return s.norm == Norm::layer ? 2 * values_of(s) * e + 2 * std::int64_t{s.cols} * e + 2 * std::int64_t{s.rows} * 4
                                 : 2 * values_of(s) * e + std::int64_t{s.cols} * e;
}

class NormalizationChapter final : public ChapterBase {
public:
    NormalizationChapter()
        : ChapterBase("normalization", "LayerNorm and RMSNorm: one read, one write", "device_copy", "Normalization")
    {
        entry_.profile = {"NormalizationProfile.*", "regex:norm|mean_|rstd_|rms_|normalize|split_", ""};
        entry_.timings = {single_cold_timing()};
        entry_.ceilings = {{"device_copy", "cudaMemcpyAsync device to device of x's bytes (reads and writes them)"}};
        std::vector<std::int64_t> layer_sizes, rms_sizes;
        for (const normalization::Step& s : normalization::steps()) {
            // Both launchers; the final step's overloads (fp32, bf16) call the templates `layer_norm_of` and
            // `rms_norm_of`, which the page documents.
            StepEntry step{s.id,  s.title, s.file, s.name_space,
                           s.layer_norm_bf16 != nullptr ? "layer_norm_of, rms_norm_of" : "layer_norm, rms_norm",
                           true,  true,    {},     s.kernels};
            step.formerly = s.formerly;
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                for (const auto& [rows, cols] : row_shapes::main_shapes) {
                    step.sizes.push_back(problem_size({norm, rows, cols, 4}));
                }
                if (s.layer_norm_bf16 != nullptr) {
                    for (const auto& [rows, cols] : row_shapes::main_shapes) {
                        step.sizes.push_back(problem_size({norm, rows, cols, 2}));
                    }
                    const auto both_types = [&](const auto& shapes) {
                        for (const auto& [rows, cols] : shapes) {
                            step.sizes.push_back(problem_size({norm, rows, cols, 4}));
                            step.sizes.push_back(problem_size({norm, rows, cols, 2}));
                        }
                    };
                    both_types(row_shapes::odd_shapes);
                    both_types(row_shapes::vocabulary_shapes);
                }
            }
            entry_.steps.push_back(step);
        }
        for (const ProblemSize& size : entry_.steps.back().sizes) {
            (shape_of(size.n).norm == Norm::layer ? layer_sizes : rms_sizes).push_back(size.n);
        }
        entry_.baselines = {
            {"cudnn_layer_norm", "cuDNN graph API LayerNorm forward (training phase: writes mean and 1/std)", layer_sizes},
            {"cudnn_rms_norm", "cuDNN graph API RMSNorm forward (inference phase)", rms_sizes}};
        const std::string final_step = entry_.steps.back().id;
        Sweep sweep{{}, {final_step, "cudnn_layer_norm", "device_copy"}, 0, 1, 1,
                    "row length (values per row, LayerNorm, bf16, 256 MiB in all)"};
        for (int k = row_shapes::sweep_min_log2; k <= row_shapes::sweep_max_log2; ++k) {
            const int cols = 1 << k;
            sweep.sizes.push_back(
                problem_size({Norm::layer, static_cast<int>(row_shapes::sweep_bytes / 2 / cols), cols, 2}));
        }
        add_sweep(entry_, std::move(sweep));
        entry_.headline =
            Headline{size_key({Norm::layer, 16384, 8192, 4}), "single_cold", entry_.steps.front().id, final_step};
        // PyTorch's LayerNorm and RMSNorm beside the final step at the main shapes, in both types.
        for (const Norm norm : {Norm::layer, Norm::rms}) {
            PytorchRow pytorch{norm == Norm::layer ? "pytorch_layer_norm" : "pytorch_rms_norm", {}};
            for (const int element_bytes : {4, 2}) {
                for (const auto& [rows, cols] : row_shapes::main_shapes) {
                    pytorch.sizes.push_back(pytorch_size(problem_size({norm, rows, cols, element_bytes}),
                                                         element_bytes == 2 ? "bf16" : "fp32", {{"epsilon", epsilon}}));
                }
            }
            entry_.pytorch.push_back(pytorch);
        }
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        normalization::CudnnNorm cudnn;
        std::map<std::string, std::string> cudnn_refused;  // baseline id: the shapes cuDNN refuses, and why
        if (!cudnn.available()) {
            for (const char* id : {"cudnn_layer_norm", "cudnn_rms_norm"}) {
                chapter["unsupported"].push_back({{"id", id}, {"reason", cudnn.reason()}});
            }
        }
        const std::vector<std::int64_t> keys = all_sizes(entry_);
        const Largest most = largest_of(keys);
        // One input for every size: each uses a prefix of it (in bf16, rounded). x has mean 1 and spread 8.
        const std::vector<float> x = normalization::random_values(static_cast<std::size_t>(most.values), context.seed,
                                                                  -3.0f, 5.0f);
        const std::vector<float> gamma =
            normalization::random_values(static_cast<std::size_t>(most.cols), context.seed + 1, 0.5f, 1.5f);
        const std::vector<float> beta =
            normalization::random_values(static_cast<std::size_t>(most.cols), context.seed + 2, -0.5f, 0.5f);
        const std::vector<float> x_bf16 = round_to_bf16(x), gamma_bf16 = round_to_bf16(gamma),
                                 beta_bf16 = round_to_bf16(beta);
        const std::size_t stats_bytes = static_cast<std::size_t>(most.rows) * sizeof(float);
        DeviceBuffer<unsigned char> d_in(static_cast<std::size_t>(most.values) * sizeof(float));
        DeviceBuffer<unsigned char> d_out(static_cast<std::size_t>(most.values) * sizeof(float) + guard_bytes);
        DeviceBuffer<unsigned char> d_gamma(static_cast<std::size_t>(most.cols) * sizeof(float));
        DeviceBuffer<unsigned char> d_beta(static_cast<std::size_t>(most.cols) * sizeof(float));
        DeviceBuffer<unsigned char> d_mean(stats_bytes + guard_bytes), d_rstd(stats_bytes + guard_bytes);

        for (const std::int64_t key : keys) {
            const Shape shape = shape_of(key);
            const bool is_bf16 = shape.element_bytes == 2, layer = shape.norm == Norm::layer;
            const std::size_t bytes = static_cast<std::size_t>(values_of(shape)) * shape.element_bytes;
            const std::size_t row_bytes = static_cast<std::size_t>(shape.cols) * shape.element_bytes;
            const std::vector<float>& xs = is_bf16 ? x_bf16 : x;
            const std::vector<float>& gs = is_bf16 ? gamma_bf16 : gamma;
            const std::vector<float>& bs = is_bf16 ? beta_bf16 : beta;
            const auto upload = [&](DeviceBuffer<unsigned char>& to, const std::vector<float>& from, std::size_t n) {
                const std::vector<unsigned char> held =
                    narrow(std::vector<float>(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n)), is_bf16);
                STEPWISE_CUDA_CHECK(cudaMemcpy(to.data(), held.data(), held.size(), cudaMemcpyHostToDevice));
            };
            upload(d_in, xs, static_cast<std::size_t>(values_of(shape)));
            upload(d_gamma, gs, static_cast<std::size_t>(shape.cols));
            upload(d_beta, bs, static_cast<std::size_t>(shape.cols));
            // The reference of the checked rows, from the values the GPU reads.
            const std::vector<int> rows = checked_rows(shape.rows, shape.cols, checked_values);
            std::vector<double> expected(rows.size() * static_cast<std::size_t>(shape.cols));
            std::vector<normalization::RowStats> expected_stats(rows.size());
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const float* row_in = xs.data() + static_cast<std::size_t>(rows[i]) * shape.cols;
                double* row_out = expected.data() + i * shape.cols;
                expected_stats[i] = layer ? normalization::layer_norm_row(row_in, gs.data(), bs.data(), shape.cols,
                                                                          epsilon, row_out)
                                          : normalization::rms_norm_row(row_in, gs.data(), shape.cols, epsilon, row_out);
            }
            const double tolerance = normalization::tolerance(shape.cols, is_bf16);
            const std::int64_t moved = moved_bytes(shape);

            if (measured_at(entry_, "device_copy", key)) {
                const auto copy = [&] {
                    return cudaMemcpyAsync(d_out.data(), d_in.data(), bytes, cudaMemcpyDeviceToDevice, context.stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.front(),
                                   {copy, key, 2 * static_cast<std::int64_t>(bytes)});
            }

            // A row: timed, then a fresh call on poisoned outputs compared with the reference at the checked rows.
            const auto checked = [&](const std::function<cudaError_t()>& launch) {
                TimedRow row{launch, key, moved};
                row.prepare_check = [&] {
                    d_out.fill_bytes(poison_byte, context.stream);
                    d_mean.fill_bytes(poison_byte, context.stream);
                    d_rstd.fill_bytes(poison_byte, context.stream);
                };
                row.check = [&, bytes, row_bytes] {
                    std::vector<unsigned char> out(bytes + guard_bytes);
                    STEPWISE_CUDA_CHECK(cudaMemcpy(out.data(), d_out.data(), out.size(), cudaMemcpyDeviceToHost));
                    bool guards_kept = guard_kept(out, bytes);
                    std::vector<float> means, rstds;
                    if (layer) {
                        const std::size_t used = static_cast<std::size_t>(shape.rows) * sizeof(float);
                        for (auto* stats : {&means, &rstds}) {
                            std::vector<unsigned char> held(used + guard_bytes);
                            STEPWISE_CUDA_CHECK(cudaMemcpy(held.data(), (stats == &means ? d_mean : d_rstd).data(),
                                                           held.size(), cudaMemcpyDeviceToHost));
                            guards_kept = guards_kept && guard_kept(held, used);
                            *stats = widen(held.data(), static_cast<std::size_t>(shape.rows), false);
                        }
                    }
                    normalization::Comparison c;
                    for (std::size_t i = 0; i < rows.size(); ++i) {
                        const std::size_t first = static_cast<std::size_t>(rows[i]) * shape.cols;
                        const std::vector<float> got = widen(out.data() + rows[i] * row_bytes, shape.cols, is_bf16);
                        const normalization::RowStats got_stats =
                            layer ? normalization::RowStats{means[rows[i]], rstds[rows[i]]} : normalization::RowStats{};
                        normalization::compare_row(xs.data() + first, gs.data(), layer ? bs.data() : nullptr,
                                                   got.data(), layer ? &got_stats : nullptr,
                                                   expected.data() + i * shape.cols, expected_stats[i], shape.cols,
                                                   epsilon, rows[i], tolerance, c);
                    }
                    const bool passed = c.passed() && guards_kept;
                    return Validation{passed, c.describe(tolerance) + (guards_kept ? "" : "; wrote past an output"),
                                      {{"max_rel", c.max_relative}, {"max_stats_error", c.max_statistics_error}}};
                };
                return row;
            };

            const char* cudnn_id = layer ? "cudnn_layer_norm" : "cudnn_rms_norm";
            if (cudnn.available() && measured_at(entry_, cudnn_id, key)) {
                const cudaError_t prepared = layer ? cudnn.prepare_layer_norm(shape.rows, shape.cols, is_bf16)
                                                   : cudnn.prepare_rms_norm(shape.rows, shape.cols, is_bf16);
                if (prepared != cudaSuccess) {
                    std::string& refused = cudnn_refused[cudnn_id];
                    refused += (refused.empty() ? "" : "; ") + size_text(shape) + ": " + cudnn.last_status();
                } else {
                    const auto call = [&] {
                        return layer ? cudnn.layer_norm(d_in.data(), d_gamma.data(), d_beta.data(), d_out.data(),
                                                        reinterpret_cast<float*>(d_mean.data()),
                                                        reinterpret_cast<float*>(d_rstd.data()), shape.rows,
                                                        shape.cols, epsilon, is_bf16, context.stream)
                                     : cudnn.rms_norm(d_in.data(), d_gamma.data(), d_out.data(), shape.rows,
                                                      shape.cols, epsilon, is_bf16, context.stream);
                    };
                    TimedRow row = checked(call);
                    row.fields["library"] = cudnn.version();  // which cuDNN, from where
                    add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines[layer ? 0 : 1], row);
                }
            }

            for (const normalization::Step& step : normalization::steps()) {
                if (!measures_step(entry_, step_ids, step.id, key)) {
                    continue;
                }
                float* mean = reinterpret_cast<float*>(d_mean.data());
                float* rstd = reinterpret_cast<float*>(d_rstd.data());
                const auto run = [&](void* d_temp, std::size_t& temp_bytes) {
                    if (is_bf16) {
                        const auto* in = reinterpret_cast<const bf16*>(d_in.data());
                        const auto* g = reinterpret_cast<const bf16*>(d_gamma.data());
                        auto* out = reinterpret_cast<bf16*>(d_out.data());
                        return layer ? step.layer_norm_bf16(d_temp, temp_bytes, in, g,
                                                            reinterpret_cast<const bf16*>(d_beta.data()), out, mean,
                                                            rstd, shape.rows, shape.cols, epsilon, context.stream)
                                     : step.rms_norm_bf16(d_temp, temp_bytes, in, g, out, shape.rows, shape.cols,
                                                          epsilon, context.stream);
                    }
                    const auto* in = reinterpret_cast<const float*>(d_in.data());
                    const auto* g = reinterpret_cast<const float*>(d_gamma.data());
                    auto* out = reinterpret_cast<float*>(d_out.data());
                    return layer ? step.layer_norm_fp32(d_temp, temp_bytes, in, g,
                                                        reinterpret_cast<const float*>(d_beta.data()), out, mean, rstd,
                                                        shape.rows, shape.cols, epsilon, context.stream)
                                 : step.rms_norm_fp32(d_temp, temp_bytes, in, g, out, shape.rows, shape.cols, epsilon,
                                                      context.stream);
                };
                add_step_rows_with_workspace(chapter, context, entry_, step.id, run, checked);
            }
        }
        for (const auto& [id, refused] : cudnn_refused) {  // missing at some sizes: listed once, with each refusal
            chapter["unsupported"].push_back({{"id", id}, {"reason", "cuDNN refused " + refused}});
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_normalization_chapter() { return std::make_unique<NormalizationChapter>(); }

}  // namespace stepwise
