// The transpose chapter of the timing program: registry entry, ceilings, the cuBLAS baseline and step rows.
#include "core/chapter.hpp"
#include "core/device_buffer.hpp"
#include "core/floor_kernels.hpp"
#include "core/step_loop.hpp"
#include "transpose/transpose_reference.hpp"
#include "transpose/transpose_steps.hpp"

#include <algorithm>
#include <cmath>

namespace stepwise {
namespace {

//! The sizes measured: the source's 1024 x 1024 (4 MiB, launch-bound) and 8192 x 8192 (256 MiB, DRAM-bound).
constexpr int measured_dims[] = {1024, 8192};
//! The one-thread step is timed at the source's size only: at 8192 x 8192 a launch would take seconds.
constexpr int one_thread_max_dim = 1024;

//! The sweep: square sizes from 256 x 256 (256 KiB) to 4096 x 4096 (64 MiB) besides the two above, and one shape
//! whose rows start on no float4 boundary (the final step's single-float kernel), for the rows below.
constexpr int sweep_dims[] = {256, 512, 2048, 4096};
struct Shape {
    int rows, cols;
};
constexpr Shape odd_shape{8191, 8193};
const std::vector<std::string> sweep_rows = {"10_output_order", "07_tile_32x8", "05_tile_16x16", "cublas_sgeam",
                                             "device_copy"};

std::string size_text(Shape s) { return std::to_string(s.rows) + " x " + std::to_string(s.cols) + " float"; }
std::string size_text(int dim) { return size_text(Shape{dim, dim}); }

//! @brief The shape measured at size n (its element count): the odd shape, else a square.
Shape shape_of(std::int64_t n)
{
    if (n == static_cast<std::int64_t>(odd_shape.rows) * odd_shape.cols) {
        return odd_shape;
    }
    const int dim = static_cast<int>(std::lround(std::sqrt(static_cast<double>(n))));
    return {dim, dim};
}

class TransposeChapter final : public ChapterBase {
public:
    TransposeChapter()
        : ChapterBase("transpose", "Matrix transpose: from one thread to the copy ceiling", "device_copy", "Transpose")
    {
        entry_.profile = {"TransposeProfile.*", "regex:transpose_kernel", ""};
        entry_.timings = {
            single_cold_timing(),
            batch_warm_timing(),
        };
        entry_.ceilings = {
            {"device_copy", "cudaMemcpyAsync device to device of the same matrix (reads and writes its bytes)"},
            empty_launch_ceiling(),
        };
        entry_.baselines = {{"cublas_sgeam", "cublasSgeam, transpose mode (cuBLAS, CUDA 13)"}};
        for (const transpose::Step& s : transpose::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "transpose", true, s.beyond_article, {}, s.kernels};
            for (const int dim : measured_dims) {
                if (!s.one_thread || dim <= one_thread_max_dim) {
                    step.sizes.push_back({static_cast<std::int64_t>(dim) * dim, size_text(dim)});
                }
            }
            entry_.steps.push_back(step);
        }
        Sweep sweep{{}, sweep_rows, 2 * sizeof(float), 1};  // the matrix and its transpose
        for (const int dim : sweep_dims) {
            sweep.sizes.push_back({static_cast<std::int64_t>(dim) * dim, size_text(dim)});
        }
        sweep.sizes.push_back({static_cast<std::int64_t>(odd_shape.rows) * odd_shape.cols, size_text(odd_shape)});
        add_sweep(entry_, std::move(sweep));
        // The serial step runs at 1024 x 1024 only: the first step at the DRAM-bound size is step 2.
        entry_.headline = Headline{std::int64_t{8192} * 8192, "single_cold", "02_thread_per_row", entry_.steps.back().id};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        const cudaStream_t stream = context.stream;
        const transpose::CublasTranspose cublas;

        for (const std::int64_t n : all_sizes(entry_)) {
            const Shape shape = shape_of(n);
            const int rows = shape.rows;
            const int cols = shape.cols;
            const std::int64_t bytes = 2 * n * static_cast<std::int64_t>(sizeof(float));  // read once, written once
            const std::vector<float> input = transpose::random_matrix(rows, cols, context.seed + rows);
            const std::vector<float> expected = transpose::reference_transpose(input, rows, cols);
            DeviceBuffer<float> d_in(input.size());
            DeviceBuffer<float> d_out(input.size());
            d_in.upload(input);

            for (const ReferenceEntry& ceiling : entry_.ceilings) {
                if (!measured_at(entry_, ceiling.id, n)) {
                    continue;
                }
                const bool copy = ceiling.id == "device_copy";
                const auto launch = [&] {
                    return copy ? cudaMemcpyAsync(d_out.data(), d_in.data(), d_in.bytes(), cudaMemcpyDeviceToDevice,
                                                  stream)
                                : empty_launch(stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, ceiling,
                                   {launch, n, copy ? std::optional(bytes) : std::nullopt});
            }

            // Each timing mode's samples are checked on the buffers they used: poisoned, one launch, compared bit
            // for bit with the transpose.
            const auto checked = [&](const std::function<cudaError_t()>& launch) {
                TimedRow row{launch, n, bytes};
                row.prepare_check = [&] { d_out.fill_bytes(0xFF, stream); };
                row.check = [&] {
                    const transpose::BitComparison c = transpose::compare_bits(d_out.download(), expected);
                    return Validation{c.identical(), c.describe(rows),
                                      {{"max_rel", c.identical() ? nlohmann::json(0.0) : nlohmann::json(nullptr)}}};
                };
                row.check_each_timing = true;
                return row;
            };

            if (measured_at(entry_, "cublas_sgeam", n)) {
                const auto sgeam = [&] { return cublas(d_in.data(), d_out.data(), rows, cols, stream); };
                add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines.front(), checked(sgeam));
            }

            for (const transpose::Step& step : transpose::steps()) {
                if (!measures_step(entry_, step_ids, step.id, n)) {
                    continue;
                }
                const auto launch = [&] { return step.transpose(d_in.data(), d_out.data(), rows, cols, stream); };
                add_step_rows(chapter, context, entry_, step.id, checked(launch));
            }
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_transpose_chapter() { return std::make_unique<TransposeChapter>(); }

}  // namespace stepwise
