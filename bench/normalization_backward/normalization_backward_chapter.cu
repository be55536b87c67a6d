// The normalization backward chapter of the timing program: registry entry, the copy ceiling and the step rows of
// LayerNorm's and RMSNorm's backward pass, in fp32 and bf16, at the forward chapter's main shapes and 4097 x 4095,
// beside cuDNN's; PyTorch's backward passes are timed beside the final step (conf/pytorch_baselines.py, after the
// timing program).
#include "core/bf16.hpp"
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/row_shapes.hpp"
#include "core/step_loop.hpp"
#include "normalization/norm_shapes.hpp"
#include "normalization_backward/normalization_backward_cudnn.hpp"
#include "normalization_backward/normalization_backward_reference.hpp"
#include "normalization_backward/normalization_backward_steps.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <random>

namespace stepwise {
namespace {

using bf16 = __nv_bfloat16;

using namespace norm_shapes;  // Norm, Shape and the registry's key and text of a shape

//! The shapes: the forward chapter's six main shapes, and rows of a length that is a multiple of nothing.
constexpr row_shapes::RowsCols odd_shape{4097, 4095};
constexpr double epsilon = 1e-5;  //!< the forward's, which the saved rstd holds

//! The bytes one call must move: x and dy read, dx written; gamma read and dgamma written (and dbeta), fp32; each
//! row's saved statistics read (LayerNorm's mean and rstd, RMSNorm's rstd).
std::int64_t moved_bytes(Shape s)
{
    const bool layer = s.norm == Norm::layer;
    return 3 * values_of(s) * s.element_bytes + (layer ? 3 : 2) * std::int64_t{s.cols} * 4 +
           (layer ? 2 : 1) * std::int64_t{s.rows} * 4;
}

class NormalizationBackwardChapter final : public ChapterBase {
public:
    NormalizationBackwardChapter()
        : ChapterBase("normalization_backward", "LayerNorm and RMSNorm backward: dx and the parameters' gradients",
                      "device_copy", "NormBackward")
    {
        entry_.profile = {"NormBackwardProfile.*", "regex:row_terms|dx_|parameter_|partials|row_pass", ""};
        entry_.timings = {single_cold_timing()};
        entry_.ceilings = {{"device_copy", "cudaMemcpyAsync device to device of one and a half times x's bytes (reads "
                                           "and writes them: the bytes of x and dy read and dx written)"}};
        for (const normalization_backward::Step& s : normalization_backward::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "layer_norm_backward, rms_norm_backward", true, true,
                           {}, s.kernels};
            for (const Norm norm : {Norm::layer, Norm::rms}) {
                for (const int element_bytes : {4, 2}) {
                    for (const auto& [rows, cols] : row_shapes::main_shapes) {
                        step.sizes.push_back(problem_size({norm, rows, cols, element_bytes}));
                    }
                    step.sizes.push_back(problem_size({norm, odd_shape.rows, odd_shape.cols, element_bytes}));
                }
            }
            entry_.steps.push_back(step);
        }
        std::vector<std::int64_t> layer_sizes, rms_sizes;
        for (const ProblemSize& size : entry_.steps.back().sizes) {
            (shape_of(size.n).norm == Norm::layer ? layer_sizes : rms_sizes).push_back(size.n);
        }
        entry_.baselines = {
            {"cudnn_layer_norm_backward", "cuDNN graph API LayerNorm backward (from the saved mean and 1/std)",
             layer_sizes},
            {"cudnn_rms_norm_backward", "cuDNN graph API RMSNorm backward (from the saved 1/rms)", rms_sizes}};
        entry_.headline = Headline{size_key({Norm::layer, 16384, 8192, 4}), "single_cold", entry_.steps.front().id,
                                   entry_.steps.back().id};
        // PyTorch's backward passes beside the final step at the main shapes, in both types.
        for (const Norm norm : {Norm::layer, Norm::rms}) {
            PytorchRow pytorch{norm == Norm::layer ? "pytorch_layer_norm_backward" : "pytorch_rms_norm_backward", {}};
            for (const int element_bytes : {4, 2}) {
                for (const auto& [rows, cols] : row_shapes::main_shapes) {
                    pytorch.sizes.push_back(pytorch_size(problem_size({norm, rows, cols, element_bytes}),
                                                         element_bytes == 2 ? "bf16" : "fp32",
                                                         {{"epsilon", epsilon}}));
                }
            }
            entry_.pytorch.push_back(pytorch);
        }
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        normalization_backward::CudnnNormBackward cudnn;
        std::map<std::string, std::string> cudnn_refused;  // baseline id: the shapes cuDNN refuses, and why
        if (!cudnn.available()) {
            for (const char* id : {"cudnn_layer_norm_backward", "cudnn_rms_norm_backward"}) {
                chapter["unsupported"].push_back({{"id", id}, {"reason", cudnn.reason()}});
            }
        }
        const std::vector<std::int64_t> keys = all_sizes(entry_);
        const Largest most = largest_of(keys);
        // One x and one dy for every size: each uses a prefix of them (in bf16, rounded). x spreads over [-3, 5).
        std::mt19937_64 gen(context.seed);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<float> x(static_cast<std::size_t>(most.values)), dy(x.size()),
            gamma(static_cast<std::size_t>(most.cols));
        for (float& v : x) {
            v = 1.0f + 4.0f * u(gen);
        }
        for (float& v : dy) {
            v = u(gen);
        }
        for (float& v : gamma) {
            v = 1.0f + 0.5f * u(gen);
        }
        const std::vector<float> x_bf16 = round_to_bf16(x), dy_bf16 = round_to_bf16(dy);
        const std::size_t most_bytes = static_cast<std::size_t>(most.values) * sizeof(float);
        // x and dx hold one and a half of the largest x: the copy ceiling copies that much from one to the other.
        const std::size_t ceiling_bytes = most_bytes / 2 * 3;
        DeviceBuffer<unsigned char> d_x(ceiling_bytes), d_dy(most_bytes), d_dx(ceiling_bytes + guard_bytes);
        DeviceBuffer<float> d_gamma(static_cast<std::size_t>(most.cols));
        DeviceBuffer<float> d_mean(static_cast<std::size_t>(most.rows)), d_rstd(static_cast<std::size_t>(most.rows));
        DeviceBuffer<unsigned char> d_dgamma(static_cast<std::size_t>(most.cols) * 4 + guard_bytes);
        DeviceBuffer<unsigned char> d_dbeta(static_cast<std::size_t>(most.cols) * 4 + guard_bytes);
        d_gamma.upload(gamma);

        for (const std::int64_t key : keys) {
            const Shape shape = shape_of(key);
            const bool is_bf16 = shape.element_bytes == 2, layer = shape.norm == Norm::layer;
            const std::size_t n = static_cast<std::size_t>(values_of(shape)), cols = static_cast<std::size_t>(shape.cols);
            const std::size_t bytes = n * shape.element_bytes;
            const std::vector<float>& xs = is_bf16 ? x_bf16 : x;
            const std::vector<float>& dys = is_bf16 ? dy_bf16 : dy;
            const auto upload = [&](DeviceBuffer<unsigned char>& to, const std::vector<float>& from) {
                const std::vector<unsigned char> held =
                    narrow(std::vector<float>(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n)), is_bf16);
                STEPWISE_CUDA_CHECK(cudaMemcpy(to.data(), held.data(), held.size(), cudaMemcpyHostToDevice));
            };
            upload(d_x, xs);
            upload(d_dy, dys);
            // The forward's statistics, as it saves them (fp32), from the values the GPU reads.
            std::vector<float> mean(static_cast<std::size_t>(shape.rows)), rstd(mean.size());
            normalization_backward::saved_statistics(xs.data(), shape.rows, shape.cols, layer, epsilon, mean.data(),
                                                     rstd.data());
            // Only this shape's rows: the buffers hold the most rows of any shape.
            STEPWISE_CUDA_CHECK(cudaMemcpy(d_mean.data(), mean.data(), mean.size() * sizeof(float),
                                           cudaMemcpyHostToDevice));
            STEPWISE_CUDA_CHECK(cudaMemcpy(d_rstd.data(), rstd.data(), rstd.size() * sizeof(float),
                                           cudaMemcpyHostToDevice));
            // The reference: dx at the checked rows, dgamma and dbeta over every row, and their terms' magnitudes.
            const std::vector<int> rows = checked_rows(shape.rows, shape.cols, row_shapes::checked_values);
            std::vector<double> expected_dx(rows.size() * cols), row_dx(cols), dgamma(cols, 0.0), dbeta(cols, 0.0);
            for (int i = 0, next = 0; i < shape.rows; ++i) {
                const std::size_t first = static_cast<std::size_t>(i) * cols;
                if (layer) {
                    normalization_backward::layer_norm_backward_row(xs.data() + first, dys.data() + first,
                                                                    gamma.data(), mean[i], rstd[i], shape.cols,
                                                                    row_dx.data(), dgamma.data(), dbeta.data());
                } else {
                    normalization_backward::rms_norm_backward_row(xs.data() + first, dys.data() + first, gamma.data(),
                                                                  rstd[i], shape.cols, row_dx.data(), dgamma.data());
                }
                if (next < static_cast<int>(rows.size()) && rows[next] == i) {
                    std::copy(row_dx.begin(), row_dx.end(), expected_dx.begin() + static_cast<std::ptrdiff_t>(next * cols));
                    ++next;
                }
            }
            std::vector<double> magnitude_g(cols), magnitude_b(cols);
            normalization_backward::parameter_magnitudes(xs.data(), dys.data(), layer ? mean.data() : nullptr,
                                                         rstd.data(), shape.rows, shape.cols, magnitude_g.data(),
                                                         layer ? magnitude_b.data() : nullptr);
            const double dx_tol = normalization_backward::dx_tolerance(shape.cols, is_bf16);
            const double parameter_tol = normalization_backward::parameter_tolerance(shape.rows);

            if (measured_at(entry_, "device_copy", key)) {
                const std::size_t copied = bytes / 2 * 3 / 16 * 16;  // x, dy and dx: one and a half x, read and written
                const auto copy = [&] {
                    return cudaMemcpyAsync(d_dx.data(), d_x.data(), copied, cudaMemcpyDeviceToDevice, context.stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.front(),
                                   {copy, key, 2 * static_cast<std::int64_t>(copied)});
            }

            // A row: timed, then a fresh call on poisoned outputs compared with the reference.
            const auto checked = [&](const std::function<cudaError_t()>& launch) {
                TimedRow row{launch, key, moved_bytes(shape)};
                row.prepare_check = [&] {
                    d_dx.fill_bytes(poison_byte, context.stream);
                    d_dgamma.fill_bytes(poison_byte, context.stream);
                    d_dbeta.fill_bytes(poison_byte, context.stream);
                };
                row.check = [&, bytes] {
                    std::vector<unsigned char> dx(bytes + guard_bytes), dg(cols * 4 + guard_bytes), db(dg.size());
                    STEPWISE_CUDA_CHECK(cudaMemcpy(dx.data(), d_dx.data(), dx.size(), cudaMemcpyDeviceToHost));
                    STEPWISE_CUDA_CHECK(cudaMemcpy(dg.data(), d_dgamma.data(), dg.size(), cudaMemcpyDeviceToHost));
                    STEPWISE_CUDA_CHECK(cudaMemcpy(db.data(), d_dbeta.data(), db.size(), cudaMemcpyDeviceToHost));
                    const bool guards_kept = guard_kept(dx, bytes) && guard_kept(dg, cols * 4) &&
                                            guard_kept(db, layer ? cols * 4 : 0);
                    normalization_backward::Comparison c;
                    for (std::size_t i = 0; i < rows.size(); ++i) {
                        const std::size_t first = static_cast<std::size_t>(rows[i]) * cols;
                        const std::vector<float> got = widen(dx.data() + first * shape.element_bytes, cols, is_bf16);
                        normalization_backward::compare_dx_row(xs.data() + first, dys.data() + first, gamma.data(),
                                                               mean[rows[i]], rstd[rows[i]], layer, got.data(),
                                                               expected_dx.data() + i * cols, shape.cols, rows[i],
                                                               dx_tol, c);
                    }
                    const double dx_error = c.max_relative;
                    normalization_backward::Comparison p;
                    const std::vector<float> got_dgamma = widen(dg.data(), cols, false);
                    normalization_backward::compare_parameter_gradient("dgamma", got_dgamma.data(), dgamma.data(),
                                                                       magnitude_g.data(), shape.cols,
                                                                       parameter_tol, p);
                    if (layer) {
                        const std::vector<float> got_dbeta = widen(db.data(), cols, false);
                        normalization_backward::compare_parameter_gradient("dbeta", got_dbeta.data(), dbeta.data(),
                                                                           magnitude_b.data(), shape.cols,
                                                                           parameter_tol, p);
                    }
                    const bool passed = c.passed() && p.passed() && guards_kept;
                    return Validation{passed,
                                      "dx: " + c.describe(dx_tol) + "; parameters: " + p.describe(parameter_tol) +
                                          (guards_kept ? "" : "; wrote past an output"),
                                      {{"max_rel", std::max(dx_error, p.max_relative)},
                                       {"max_dx_error", dx_error},
                                       {"max_parameter_error", p.max_relative}}};
                };
                return row;
            };

            float* dgamma_out = reinterpret_cast<float*>(d_dgamma.data());
            float* dbeta_out = reinterpret_cast<float*>(d_dbeta.data());
            const char* cudnn_id = layer ? "cudnn_layer_norm_backward" : "cudnn_rms_norm_backward";
            if (cudnn.available() && measured_at(entry_, cudnn_id, key)) {
                if (cudnn.prepare(layer, shape.rows, shape.cols, is_bf16) != cudaSuccess) {
                    std::string& refused = cudnn_refused[cudnn_id];
                    refused += (refused.empty() ? "" : "; ") + size_text(shape) + ": " + cudnn.last_status();
                } else {
                    const auto call = [&] {
                        return layer ? cudnn.layer_norm_backward(d_x.data(), d_dy.data(), d_gamma.data(),
                                                                 d_mean.data(), d_rstd.data(), d_dx.data(), dgamma_out,
                                                                 dbeta_out, shape.rows, shape.cols, is_bf16,
                                                                 context.stream)
                                     : cudnn.rms_norm_backward(d_x.data(), d_dy.data(), d_gamma.data(), d_rstd.data(),
                                                               d_dx.data(), dgamma_out, shape.rows, shape.cols,
                                                               is_bf16, context.stream);
                    };
                    TimedRow row = checked(call);
                    row.fields["library"] = cudnn.version();  // which cuDNN, from where
                    add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines[layer ? 0 : 1], row);
                }
            }

            for (const normalization_backward::Step& step : normalization_backward::steps()) {
                if (!measures_step(entry_, step_ids, step.id, key)) {
                    continue;
                }
                const auto run = [&](void* d_temp, std::size_t& temp_bytes) {
                    if (is_bf16) {
                        const auto* xb = reinterpret_cast<const bf16*>(d_x.data());
                        const auto* dyb = reinterpret_cast<const bf16*>(d_dy.data());
                        auto* dxb = reinterpret_cast<bf16*>(d_dx.data());
                        return layer ? step.layer_norm_bf16(d_temp, temp_bytes, xb, dyb, d_gamma.data(), d_mean.data(),
                                                            d_rstd.data(), dxb, dgamma_out, dbeta_out, shape.rows,
                                                            shape.cols, context.stream)
                                     : step.rms_norm_bf16(d_temp, temp_bytes, xb, dyb, d_gamma.data(), d_rstd.data(),
                                                          dxb, dgamma_out, shape.rows, shape.cols, context.stream);
                    }
                    const auto* xf = reinterpret_cast<const float*>(d_x.data());
                    const auto* dyf = reinterpret_cast<const float*>(d_dy.data());
                    auto* dxf = reinterpret_cast<float*>(d_dx.data());
                    return layer ? step.layer_norm_fp32(d_temp, temp_bytes, xf, dyf, d_gamma.data(), d_mean.data(),
                                                        d_rstd.data(), dxf, dgamma_out, dbeta_out, shape.rows,
                                                        shape.cols, context.stream)
                                 : step.rms_norm_fp32(d_temp, temp_bytes, xf, dyf, d_gamma.data(), d_rstd.data(), dxf,
                                                      dgamma_out, shape.rows, shape.cols, context.stream);
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

std::unique_ptr<Chapter> make_normalization_backward_chapter()
{
    return std::make_unique<NormalizationBackwardChapter>();
}

}  // namespace stepwise
