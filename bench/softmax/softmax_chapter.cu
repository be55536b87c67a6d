// The softmax chapter of the timing program: registry entry, the copy ceiling, cuDNN's softmax and the step rows, in
// fp32 and bf16, at the main shapes, at odd shapes and over row lengths at a fixed total.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/step_loop.hpp"
#include "softmax/softmax_cudnn.hpp"
#include "softmax/softmax_reference.hpp"
#include "softmax/softmax_steps.hpp"

#include <algorithm>
#include <functional>

namespace stepwise {
namespace {

using bf16 = __nv_bfloat16;

//! A rows x cols problem in fp32 (4-byte elements) or bf16 (2-byte).
struct Shape {
    int rows, cols, element_bytes;
};

//! The main shapes: rows of 128 to 131072 values, 16 MiB to 512 MiB of fp32 (from the PyTorch figures the chapter
//! starts from). Every step is measured at them in fp32, the final step and the libraries in bf16 too.
constexpr Shape main_shapes[] = {{65536, 128, 4}, {32768, 1024, 4}, {8192, 4096, 4},
                                 {16384, 8192, 4}, {4096, 32768, 4}, {1024, 131072, 4}};
//! Shapes that are multiples of nothing, a single value, and rows of three values or of 100000: the final step and
//! the libraries, in both types.
constexpr Shape odd_shapes[] = {{1000, 1000, 4}, {4097, 4095, 4}, {3, 100000, 4}, {100000, 3, 4}, {1, 1, 4}};
//! The sweep: bf16 rows of every power of two from 32 to 131072 values, 256 MiB in all.
constexpr int sweep_min_log2 = 5;
constexpr int sweep_max_log2 = 17;
constexpr std::int64_t sweep_bytes = std::int64_t{256} << 20;
const std::vector<std::string> sweep_rows = {"08_bf16", "cudnn_softmax", "device_copy"};
constexpr const char* final_step = "08_bf16";

//! The rows compared with the double reference at one size: all of them up to this many values, else evenly spaced
//! rows (the first and last among them) of about this many values.
constexpr std::int64_t checked_values = std::int64_t{1} << 22;

//! The registry's n of a shape: element bytes * 10^15 + rows * 10^7 + cols (a key; the size's `shape` gives rows
//! and cols, its problem text the type).
std::int64_t size_key(Shape s)
{
    return s.element_bytes * std::int64_t{1000000000000000} + s.rows * std::int64_t{10000000} + s.cols;
}

Shape shape_of(std::int64_t key)
{
    return {static_cast<int>(key % 1000000000000000 / 10000000), static_cast<int>(key % 10000000),
            static_cast<int>(key / 1000000000000000)};
}

Shape in_bf16(Shape s) { return {s.rows, s.cols, 2}; }

std::string size_text(Shape s)
{
    return std::to_string(s.rows) + " x " + std::to_string(s.cols) + (s.element_bytes == 2 ? " bf16" : " fp32");
}

ProblemSize problem_size(Shape s) { return {size_key(s), size_text(s), {s.rows, s.cols}}; }

std::int64_t values_of(Shape s) { return std::int64_t{s.rows} * s.cols; }

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
            for (const Shape& shape : main_shapes) {
                step.sizes.push_back(problem_size(shape));
            }
            if (s.bf16 != nullptr) {
                for (const Shape& shape : main_shapes) {
                    step.sizes.push_back(problem_size(in_bf16(shape)));
                }
                for (const Shape& shape : odd_shapes) {
                    step.sizes.push_back(problem_size(shape));
                    step.sizes.push_back(problem_size(in_bf16(shape)));
                }
            }
            entry_.steps.push_back(step);
        }
        Sweep sweep{{}, sweep_rows, 0, 1, 1, "row length (values per row, bf16, 256 MiB in all)"};
        for (int k = sweep_min_log2; k <= sweep_max_log2; ++k) {
            const int cols = 1 << k;
            sweep.sizes.push_back(problem_size({static_cast<int>(sweep_bytes / 2 / cols), cols, 2}));
        }
        add_sweep(entry_, std::move(sweep));
        entry_.headline = Headline{size_key({16384, 8192, 4}), "single_cold", entry_.steps.front().id, final_step};
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
        constexpr std::size_t guard_bytes = 256;  // after the output: must stay poisoned
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
                row.prepare_check = [&] { d_out.fill_bytes(0xFF, context.stream); };
                row.check = [&, bytes] {
                    std::vector<unsigned char> out(bytes + guard_bytes);
                    STEPWISE_CUDA_CHECK(cudaMemcpy(out.data(), d_out.data(), out.size(), cudaMemcpyDeviceToHost));
                    const bool guard_kept = std::all_of(out.begin() + static_cast<std::ptrdiff_t>(bytes), out.end(),
                                                        [](unsigned char b) { return b == 0xFF; });
                    softmax::Comparison c;
                    for (std::size_t i = 0; i < rows.size(); ++i) {
                        const std::size_t first = static_cast<std::size_t>(rows[i]) * shape.cols;
                        const std::vector<float> got =
                            widen(out.data() + first * shape.element_bytes, shape.cols, is_bf16);
                        softmax::compare_row(got.data(), expected.data() + i * shape.cols, shape.cols, rows[i],
                                             tolerance, c);
                    }
                    const bool passed = c.passed(tolerance) && guard_kept;
                    return Validation{passed,
                                      c.describe(tolerance) + (guard_kept ? "" : "; wrote past the output"),
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
                std::size_t temp_bytes = 0;
                STEPWISE_CUDA_CHECK(run(nullptr, temp_bytes));
                DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));
                add_step_rows(chapter, context, entry_, step.id,
                              checked([&] { return run(d_temp.data(), temp_bytes); }));
            }
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_softmax_chapter() { return std::make_unique<SoftmaxChapter>(); }

}  // namespace stepwise
