// The cross-entropy chapter of the timing program: registry entry, the copy ceiling and the step rows, in fp32 and
// bf16, at the main shapes (token counts and vocabularies of language models) and at odd shapes. No library baseline
// here: cuDNN has no cross-entropy operation; PyTorch's F.cross_entropy with its gradient is timed beside the chapter
// (conf/pytorch_baselines.py, after the timing program).
#include "core/bf16.hpp"
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/row_shapes.hpp"
#include "core/step_loop.hpp"
#include "cross_entropy/cross_entropy_reference.hpp"
#include "cross_entropy/cross_entropy_steps.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>

namespace stepwise {
namespace {

using bf16 = __nv_bfloat16;

using Shape = row_shapes::TypedShape;  // tokens x vocabulary here

//! The main shapes: tokens x vocabulary of language models (GPT-2's 50257, Llama 3's 128256, Qwen 2's 151936,
//! Gemma 3's 262144, Llama 2's 32000), 1.3 GB to 4.2 GB of fp32 logits.
constexpr std::pair<int, int> main_shapes[] = {{8192, 50257}, {4096, 128256}, {4096, 151936}, {2048, 262144},
                                               {32768, 32000}};
//! Odd shapes: one value, three rows of 100000, 100000 rows of three.
constexpr std::pair<int, int> odd_shapes[] = {{1, 1}, {3, 100000}, {100000, 3}};
//! About one token in this many is ignored (padding): the timed labels.
constexpr int ignored_one_in = 16;
constexpr float dloss = 1.0f;

using row_shapes::checked_values;
using row_shapes::problem_size;
using row_shapes::size_key;
using row_shapes::shape_of;
using row_shapes::values_of;

//! @brief The reference mean loss, its rows shared among the host's threads (a billion logits at the largest shape).
double parallel_mean_loss(const std::vector<float>& x, const std::vector<int>& labels, Shape s, int ignore_index)
{
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<double> sums(threads, 0.0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (int i = t; i < s.rows; i += threads) {
                if (!cross_entropy::is_ignored(labels[i], s.cols, ignore_index)) {
                    sums[t] += cross_entropy::row_loss(x.data() + static_cast<std::size_t>(i) * s.cols, s.cols,
                                                       labels[i]);
                }
            }
        });
    }
    for (std::thread& t : pool) {
        t.join();
    }
    double sum = 0;
    for (const double v : sums) {
        sum += v;
    }
    return sum / static_cast<double>(cross_entropy::count_not_ignored(labels.data(), s.rows, s.cols, ignore_index));
}

class CrossEntropyChapter final : public ChapterBase {
public:
    CrossEntropyChapter()
        : ChapterBase("cross_entropy", "Cross-entropy: the loss and its gradient in one read and one write",
                      "device_copy", "CrossEntropy")
    {
        entry_.profile = {"CrossEntropyProfile.*", "regex:row_stats|loss_|gradient_|rows_kernel|count_|mean_", ""};
        entry_.timings = {single_cold_timing()};
        entry_.ceilings = {{"device_copy", "cudaMemcpyAsync device to device of the logits' bytes (reads and writes "
                                           "them: the logits read once, the gradient written once)"}};
        entry_.baselines = {};  // cuDNN has no cross-entropy operation
        for (const cross_entropy::Step& s : cross_entropy::steps()) {
            // Both `cross_entropy` overloads (fp32, bf16) call the template `cross_entropy_of`, which the page shows.
            StepEntry step{s.id, s.title, s.file, s.name_space, "cross_entropy_of", true, true, {}, s.kernels};
            for (const int element_bytes : {4, 2}) {
                for (const auto& [rows, cols] : main_shapes) {
                    step.sizes.push_back(problem_size({rows, cols, element_bytes}));
                }
            }
            for (const auto& [rows, cols] : odd_shapes) {
                step.sizes.push_back(problem_size({rows, cols, 4}));
                step.sizes.push_back(problem_size({rows, cols, 2}));
            }
            entry_.steps.push_back(step);
        }
        entry_.headline = Headline{size_key({8192, 50257, 2}), "single_cold", entry_.steps.front().id,
                                   entry_.steps.back().id};
        // PyTorch's loss and gradient beside the final step at the main shapes, in both types, with as many labels
        // ignored as the timed rows have.
        PytorchRow pytorch{"pytorch_cross_entropy", {}};
        for (const int element_bytes : {4, 2}) {
            for (const auto& [rows, cols] : main_shapes) {
                pytorch.sizes.push_back(pytorch_size(problem_size({rows, cols, element_bytes}),
                                                     element_bytes == 2 ? "bf16" : "fp32",
                                                     {{"ignored_one_in", ignored_one_in}}));
            }
        }
        entry_.pytorch = {pytorch};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        const std::vector<std::int64_t> keys = all_sizes(entry_);
        std::int64_t most_values = 0;
        int most_rows = 0;
        for (const std::int64_t key : keys) {
            most_values = std::max(most_values, values_of(shape_of(key)));
            most_rows = std::max(most_rows, shape_of(key).rows);
        }
        // One input for every size: each uses a prefix of it (in bf16, rounded).
        const std::vector<float> logits =
            cross_entropy::random_logits(static_cast<std::size_t>(most_values), context.seed);
        const std::vector<std::uint16_t> logits_bf16 = to_bf16(logits);
        constexpr int ignore_index = cross_entropy::default_ignore_index;
        DeviceBuffer<unsigned char> d_in(static_cast<std::size_t>(most_values) * sizeof(float));
        DeviceBuffer<unsigned char> d_out(static_cast<std::size_t>(most_values) * sizeof(float) + guard_bytes);
        DeviceBuffer<int> d_labels(static_cast<std::size_t>(most_rows));
        DeviceBuffer<float> d_loss(1);

        for (const std::int64_t key : keys) {
            const Shape shape = shape_of(key);
            const bool is_bf16 = shape.element_bytes == 2;
            const std::size_t bytes = static_cast<std::size_t>(values_of(shape)) * shape.element_bytes;
            STEPWISE_CUDA_CHECK(cudaMemcpy(d_in.data(), is_bf16 ? static_cast<const void*>(logits_bf16.data())
                                                                : static_cast<const void*>(logits.data()),
                                           bytes, cudaMemcpyHostToDevice));
            const std::vector<int> labels =
                cross_entropy::random_labels(shape.rows, shape.cols, ignore_index, ignored_one_in, context.seed + key);
            STEPWISE_CUDA_CHECK(cudaMemcpy(d_labels.data(), labels.data(), labels.size() * sizeof(int),
                                           cudaMemcpyHostToDevice));
            // The values the GPU reads, as floats (the rows checked, and the loss over every row).
            const std::vector<float> seen =
                is_bf16 ? from_bf16(std::vector<std::uint16_t>(logits_bf16.begin(),
                                                               logits_bf16.begin() + values_of(shape)))
                        : std::vector<float>(logits.begin(), logits.begin() + values_of(shape));
            const std::int64_t not_ignored =
                cross_entropy::count_not_ignored(labels.data(), shape.rows, shape.cols, ignore_index);
            const double scale = cross_entropy::gradient_scale(dloss, not_ignored);
            std::optional<double> expected_loss;  // taken at the first check, for every row of this size
            const std::vector<int> rows = checked_rows(shape.rows, shape.cols, checked_values);
            const cross_entropy::Tolerance loss_t = cross_entropy::loss_tolerance(shape.rows, shape.cols);
            const cross_entropy::Tolerance grad_t = cross_entropy::gradient_tolerance(shape.cols, is_bf16);
            // Read once, written once; the labels read once.
            const std::int64_t moved = 2 * static_cast<std::int64_t>(bytes) + std::int64_t{shape.rows} * 4;

            if (measured_at(entry_, "device_copy", key)) {
                const auto copy = [&] {
                    return cudaMemcpyAsync(d_out.data(), d_in.data(), bytes, cudaMemcpyDeviceToDevice, context.stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.front(), {copy, key, moved});
            }

            // A row: timed, then a fresh call on poisoned outputs compared with the reference.
            const auto checked = [&](const std::function<cudaError_t()>& launch) {
                TimedRow row{launch, key, moved};
                row.prepare_check = [&] {
                    d_out.fill_bytes(poison_byte, context.stream);
                    d_loss.fill_bytes(poison_byte, context.stream);
                };
                row.check = [&, bytes] {
                    if (!expected_loss) {
                        expected_loss = parallel_mean_loss(seen, labels, shape, ignore_index);
                    }
                    float loss = 0;
                    STEPWISE_CUDA_CHECK(cudaMemcpy(&loss, d_loss.data(), sizeof(float), cudaMemcpyDeviceToHost));
                    std::vector<unsigned char> out(bytes + guard_bytes);
                    STEPWISE_CUDA_CHECK(cudaMemcpy(out.data(), d_out.data(), out.size(), cudaMemcpyDeviceToHost));
                    const bool guards_kept = guard_kept(out, bytes);
                    cross_entropy::Comparison c;
                    std::vector<double> expected(static_cast<std::size_t>(shape.cols));
                    for (const int r : rows) {
                        const std::size_t first = static_cast<std::size_t>(r) * shape.cols;
                        const bool ignored = cross_entropy::is_ignored(labels[r], shape.cols, ignore_index);
                        cross_entropy::row_gradient(seen.data() + first, shape.cols, labels[r], ignored, scale,
                                                    expected.data());
                        const std::vector<float> got =
                            widen(out.data() + first * shape.element_bytes, shape.cols, is_bf16);
                        cross_entropy::compare_gradient_row(got.data(), expected.data(), shape.cols, labels[r], scale,
                                                            r, grad_t, c);
                    }
                    const bool loss_ok = cross_entropy::loss_matches(loss, *expected_loss, loss_t);
                    const double loss_error = std::abs(loss - *expected_loss) / (std::abs(*expected_loss) + 1.0);
                    const bool passed = c.passed() && loss_ok && guards_kept;
                    return Validation{passed,
                                      "loss " + std::to_string(loss) + " against " + std::to_string(*expected_loss) +
                                          (loss_ok ? "" : " (beyond tolerance)") + "; " + c.describe(grad_t) +
                                          (guards_kept ? "" : "; wrote past the gradient"),
                                      // max_rel: the larger of the loss's error over |loss| + 1 and the
                                      // gradient's largest error over its scale, dloss / tokens not ignored.
                                      {{"max_rel", std::max(loss_error, c.max_error_over_scale)},
                                       {"loss_error", loss_error},
                                       {"max_gradient_error_over_scale", c.max_error_over_scale}}};
                };
                return row;
            };

            for (const cross_entropy::Step& step : cross_entropy::steps()) {
                if (!measures_step(entry_, step_ids, step.id, key)) {
                    continue;
                }
                const auto run = [&](void* d_temp, std::size_t& temp_bytes) {
                    return is_bf16 ? step.bf16(d_temp, temp_bytes, reinterpret_cast<const bf16*>(d_in.data()),
                                               d_labels.data(), reinterpret_cast<bf16*>(d_out.data()), d_loss.data(),
                                               shape.rows, shape.cols, ignore_index, dloss, context.stream)
                                   : step.fp32(d_temp, temp_bytes, reinterpret_cast<const float*>(d_in.data()),
                                               d_labels.data(), reinterpret_cast<float*>(d_out.data()), d_loss.data(),
                                               shape.rows, shape.cols, ignore_index, dloss, context.stream);
                };
                add_step_rows_with_workspace(chapter, context, entry_, step.id, run, checked);
            }
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_cross_entropy_chapter() { return std::make_unique<CrossEntropyChapter>(); }

}  // namespace stepwise
