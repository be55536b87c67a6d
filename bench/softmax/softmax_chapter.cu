// The softmax chapter of the timing program: registry entry, the copy ceiling, cuDNN's softmax and the step rows, in
// fp32 and bf16, at the main shapes, at odd shapes and over row lengths at a fixed total.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/row_shapes.hpp"
#include "core/step_loop.hpp"
#include "softmax/softmax_cudnn.hpp"
#include "softmax/softmax_reference.hpp"
#include "softmax/softmax_steps.hpp"

#include <algorithm>
#include <functional>

namespace stepwise {
namespace {

using bf16 = __nv_bfloat16;

using Shape = row_shapes::TypedShape;

using row_shapes::checked_values;
const std::vector<std::string> sweep_rows = {"14_row_ends_staged", "cudnn_softmax", "device_copy"};
constexpr const char* final_step = "14_row_ends_staged";
//! Rows on 16-byte boundaries whose end falls inside a thread's loads: a block's loads do not divide 4088 values,
//! and Llama 2's vocabulary of 32000 leaves the last block of a cluster's row part full.
constexpr row_shapes::RowsCols ragged_end_shapes[] = {{8192, 4088}, {8192, 32000}};

using row_shapes::problem_size;
using row_shapes::size_key;
using row_shapes::shape_of;
using row_shapes::values_of;

class SoftmaxChapter final : public ChapterBase {
public:
    SoftmaxChapter() : ChapterBase("softmax", "Softmax: from three passes to one read and one write", "device_copy",
                                   "Softmax")
    {
        entry_.profile = {"SoftmaxProfile.*", "regex:softmax|row_|normalize|split_", ""};
        entry_.timings = {single_cold_timing()};
        entry_.ceilings = {{"device_copy", "cudaMemcpyAsync device to device of the same bytes (reads and writes them)"}};
        entry_.baselines = {{"cudnn_softmax", "cuDNN cudnnSoftmaxForward, CUDNN_SOFTMAX_ACCURATE, per row"}};
        for (const softmax::Step& s : softmax::steps()) {
            // The final step's two `softmax` overloads (fp32, bf16) call the template `softmax_of`, which the page
            // documents.
            StepEntry step{s.id, s.title, s.file, s.name_space, s.bf16 != nullptr ? "softmax_of" : "softmax", true,
                           true, {}, s.kernels};
            for (const auto& [rows, cols] : row_shapes::main_shapes) {
                step.sizes.push_back(problem_size({rows, cols, 4}));
            }
            if (s.bf16 != nullptr) {
                for (const auto& [rows, cols] : row_shapes::main_shapes) {
                    step.sizes.push_back(problem_size({rows, cols, 2}));
                }
                const auto both_types = [&](const auto& shapes) {
                    for (const auto& [rows, cols] : shapes) {
                        step.sizes.push_back(problem_size({rows, cols, 4}));
                        step.sizes.push_back(problem_size({rows, cols, 2}));
                    }
                };
                both_types(row_shapes::odd_shapes);
                both_types(row_shapes::vocabulary_shapes);
                both_types(ragged_end_shapes);
            }
            entry_.steps.push_back(step);
        }
        Sweep sweep{{}, sweep_rows, 0, 1, 1, "row length (values per row, bf16, 256 MiB in all)"};
        for (int k = row_shapes::sweep_min_log2; k <= row_shapes::sweep_max_log2; ++k) {
            const int cols = 1 << k;
            sweep.sizes.push_back(problem_size({static_cast<int>(row_shapes::sweep_bytes / 2 / cols), cols, 2}));
        }
        add_sweep(entry_, std::move(sweep));
        entry_.headline = Headline{size_key({16384, 8192, 4}), "single_cold", entry_.steps.front().id, final_step};
        // PyTorch's softmax beside the final step at the main shapes, in both types.
        PytorchRow pytorch{"pytorch_softmax", {}};
        for (const int element_bytes : {4, 2}) {
            for (const auto& [rows, cols] : row_shapes::main_shapes) {
                pytorch.sizes.push_back(pytorch_size(problem_size({rows, cols, element_bytes}),
                                                     element_bytes == 2 ? "bf16" : "fp32"));
            }
        }
        entry_.pytorch = {pytorch};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        chapter["unsupported"] = nlohmann::json::array();
        softmax::CudnnSoftmax cudnn;
        if (!cudnn.available()) {
            chapter["unsupported"].push_back({{"id", "cudnn_softmax"}, {"reason", cudnn.reason()}});
        }
        const std::vector<std::int64_t> keys = all_sizes(entry_);
        std::int64_t most_values = 0;
        for (const std::int64_t key : keys) {
            most_values = std::max(most_values, values_of(shape_of(key)));
        }
        // One input for every size: each uses a prefix of it (in bf16, rounded).
        const std::vector<float> logits = softmax::random_logits(static_cast<std::size_t>(most_values), context.seed);
        const std::vector<std::uint16_t> logits_bf16 = to_bf16(logits);
        DeviceBuffer<unsigned char> d_in(static_cast<std::size_t>(most_values) * sizeof(float));
        DeviceBuffer<unsigned char> d_out(static_cast<std::size_t>(most_values) * sizeof(float) + guard_bytes);

        for (const std::int64_t key : keys) {
            const Shape shape = shape_of(key);
            const bool is_bf16 = shape.element_bytes == 2;
            const std::size_t bytes = static_cast<std::size_t>(values_of(shape)) * shape.element_bytes;
            STEPWISE_CUDA_CHECK(cudaMemcpy(d_in.data(), is_bf16 ? static_cast<const void*>(logits_bf16.data())
                                                                : static_cast<const void*>(logits.data()),
                                           bytes, cudaMemcpyHostToDevice));
            // The reference of the checked rows, from the values the GPU reads.
            const std::vector<int> rows = checked_rows(shape.rows, shape.cols, checked_values);
            std::vector<float> row_in(static_cast<std::size_t>(shape.cols));
            std::vector<double> expected(rows.size() * static_cast<std::size_t>(shape.cols));
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const std::size_t first = static_cast<std::size_t>(rows[i]) * shape.cols;
                for (int j = 0; j < shape.cols; ++j) {
                    row_in[j] = is_bf16 ? from_bf16_bits(logits_bf16[first + j]) : logits[first + j];
                }
                softmax::reference_row(row_in.data(), shape.cols, expected.data() + i * shape.cols);
            }
            const softmax::Tolerance tolerance = softmax::tolerance(shape.cols, is_bf16);
            const std::int64_t moved = 2 * static_cast<std::int64_t>(bytes);  // read once, written once

            if (measured_at(entry_, "device_copy", key)) {
                const auto copy = [&] {
                    return cudaMemcpyAsync(d_out.data(), d_in.data(), bytes, cudaMemcpyDeviceToDevice, context.stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.front(), {copy, key, moved});
            }

            // A row: timed, then a fresh call on poisoned outputs compared with the reference at the checked rows.
            const auto checked = [&](const std::function<cudaError_t()>& launch) {
                TimedRow row{launch, key, moved};
                row.prepare_check = [&] { d_out.fill_bytes(poison_byte, context.stream); };
                row.check = [&, bytes] {
                    std::vector<unsigned char> out(bytes + guard_bytes);
                    STEPWISE_CUDA_CHECK(cudaMemcpy(out.data(), d_out.data(), out.size(), cudaMemcpyDeviceToHost));
                    const bool guards_kept = guard_kept(out, bytes);
                    softmax::Comparison c;
                    for (std::size_t i = 0; i < rows.size(); ++i) {
                        const std::size_t first = static_cast<std::size_t>(rows[i]) * shape.cols;
                        const std::vector<float> got =
                            widen(out.data() + first * shape.element_bytes, shape.cols, is_bf16);
                        softmax::compare_row(got.data(), expected.data() + i * shape.cols, shape.cols, rows[i],
                                             tolerance, c);
                    }
                    const bool passed = c.passed(tolerance) && guards_kept;
                    return Validation{passed,
                                      c.describe(tolerance) + (guards_kept ? "" : "; wrote past the output"),
                                      {{"max_rel", c.max_relative}, {"max_row_sum_error", c.max_row_sum_error}}};
                };
                return row;
            };

            if (cudnn.available() && measured_at(entry_, "cudnn_softmax", key)) {
                const auto call = [&] {
                    return is_bf16 ? cudnn(reinterpret_cast<const bf16*>(d_in.data()),
                                           reinterpret_cast<bf16*>(d_out.data()), shape.rows, shape.cols,
                                           context.stream)
                                   : cudnn(reinterpret_cast<const float*>(d_in.data()),
                                           reinterpret_cast<float*>(d_out.data()), shape.rows, shape.cols,
                                           context.stream);
                };
                TimedRow row = checked(call);
                row.fields["library"] = cudnn.version();  // which cuDNN, from where
                add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines.front(), row);
            }

            for (const softmax::Step& step : softmax::steps()) {
                if (!measures_step(entry_, step_ids, step.id, key)) {
                    continue;
                }
                const auto run = [&](void* d_temp, std::size_t& temp_bytes) {
                    return is_bf16 ? step.bf16(d_temp, temp_bytes, reinterpret_cast<const bf16*>(d_in.data()),
                                               reinterpret_cast<bf16*>(d_out.data()), shape.rows, shape.cols,
                                               context.stream)
                                   : step.fp32(d_temp, temp_bytes, reinterpret_cast<const float*>(d_in.data()),
                                               reinterpret_cast<float*>(d_out.data()), shape.rows, shape.cols,
                                               context.stream);
                };
                add_step_rows_with_workspace(chapter, context, entry_, step.id, run, checked);
            }
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_softmax_chapter() { return std::make_unique<SoftmaxChapter>(); }

}  // namespace stepwise
