// The element-wise chapter of the timing program: registry entry, ceilings and step rows.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "elementwise/elementwise_reference.hpp"
#include "elementwise/elementwise_steps.hpp"
#include "core/floor_kernels.hpp"
#include "core/step_loop.hpp"

#include <algorithm>
#include <cmath>

namespace stepwise {
namespace {

using elementwise::assignment_dimx;
using elementwise::assignment_dimy;

static_assert(assignment_dimx == assignment_dimy, "the chapter's sizes are square");
//! The sweep: square sizes from 256^2 to 16384^2 (1 GiB) besides the assignment's 2048^2, for the rows below.
constexpr int sweep_dims[] = {256, 512, 1024, 4096, 8192, 16384};
const std::vector<std::string> sweep_rows = {"02_block_512x1", "06_float4", "07_fast_intrinsics", "inplace_read_write",
                                             "device_copy"};
//! Above this many elements, a sweep size is validated on evenly spaced rows (the reference of 16384^2 elements in
//! double would cost the timing program many seconds of CPU time per step).
constexpr std::int64_t fully_validated_items = 4096LL * 4096;
constexpr int validated_rows = 256;

std::string size_text(int dim) { return std::to_string(dim) + " x " + std::to_string(dim) + " float"; }

//! The rows `rows` of a row-major matrix of `dimx` columns.
std::vector<float> rows_of(const std::vector<float>& matrix, int dimx, const std::vector<int>& rows)
{
    std::vector<float> out;
    out.reserve(rows.size() * static_cast<std::size_t>(dimx));
    for (const int r : rows) {
        const auto begin = matrix.begin() + static_cast<std::ptrdiff_t>(r) * dimx;
        out.insert(out.end(), begin, begin + dimx);
    }
    return out;
}

class ElementwiseChapter final : public ChapterBase {
public:
    ElementwiseChapter()
        : ChapterBase("elementwise", "Element-wise: one kernel, step by step to the memory floor",
                      "inplace_read_write", "Elementwise")
    {
        entry_.timings = {
            {"batch",
             "events around 10 back-to-back launches, as the assignment times it; time per launch; L2 warm (the data "
             "were just restored by a device copy)",
             false, 10},
            single_cold_timing(),
        };
        entry_.ceilings = {
            {"inplace_read_write", "read and write the same 16 MB in place, float4 (the memory floor)"},
            {"device_copy", "cudaMemcpyAsync device to device, 16 MB (reads 16 MB, writes 16 MB elsewhere)"},
            empty_launch_ceiling(),
        };
        for (const elementwise::Step& s : elementwise::steps()) {
            entry_.steps.push_back({s.id, s.title, s.file, s.name_space, "update", s.same_operation, s.beyond_article,
                                    {{std::int64_t{assignment_dimx} * assignment_dimy, size_text(assignment_dimx)}},
                                    s.kernels});
        }
        Sweep sweep{{}, sweep_rows, sizeof(float), 1};
        for (const int dim : sweep_dims) {
            sweep.sizes.push_back({std::int64_t{dim} * dim, size_text(dim)});
        }
        add_sweep(entry_, std::move(sweep));
        entry_.headline = Headline{std::int64_t{assignment_dimx} * assignment_dimy, "batch", entry_.steps.front().id,
                                   entry_.steps.back().id};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        for (const std::int64_t n : all_sizes(entry_)) {
            measure_size(context, step_ids, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n)))), chapter);
        }
    }

private:
    //! Measures the rows the registry lists at dim x dim, the assignment's input at that size.
    void measure_size(MeasureContext& context, const std::vector<std::string>& step_ids, int dim,
                      nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const std::int64_t num_items = std::int64_t{dim} * dim;
        const std::int64_t bytes_per_launch = 2 * num_items * static_cast<std::int64_t>(sizeof(float));
        const bool main_size = dim == assignment_dimx;
        const std::vector<float> input = elementwise::assignment_input(dim, dim, context.seed + dim);
        // The rows validated: all of them, or evenly spaced ones (first and last included) of a large sweep size.
        std::vector<int> rows;
        const int row_count = num_items <= fully_validated_items ? dim : validated_rows;
        for (int i = 0; i < row_count; ++i) {
            rows.push_back(static_cast<int>(static_cast<std::int64_t>(i) * (dim - 1) / std::max(row_count - 1, 1)));
        }
        const std::vector<float> validated_input = rows_of(input, dim, rows);
        const std::vector<double> once = elementwise::reference_update(validated_input, dim, row_count, 1);
        const std::vector<double> twice =
            main_size ? elementwise::reference_update(input, dim, dim, 2) : std::vector<double>{};

        DeviceBuffer<float> d_input(input.size());
        DeviceBuffer<float> d_data(input.size());
        DeviceBuffer<float> d_copy(input.size());
        d_input.upload(input);
        const auto reset = [&] {
            STEPWISE_CUDA_CHECK(
                cudaMemcpyAsync(d_data.data(), d_input.data(), d_data.bytes(), cudaMemcpyDeviceToDevice, stream));
        };

        const auto ceiling_launch = [&](const std::string& id) -> std::function<cudaError_t()> {
            if (id == "inplace_read_write") {
                return [&] { return inplace_read_write(d_data.data(), d_data.size(), 1.0f, stream); };
            }
            if (id == "device_copy") {
                return [&] {
                    return cudaMemcpyAsync(d_copy.data(), d_data.data(), d_data.bytes(), cudaMemcpyDeviceToDevice,
                                           stream);
                };
            }
            return [&] { return empty_launch(stream); };
        };
        for (const ReferenceEntry& ceiling : entry_.ceilings) {
            if (!measured_at(entry_, ceiling.id, num_items)) {
                continue;
            }
            const bool moves_data = ceiling.id != "empty_launch";
            add_reference_rows(chapter, "ceilings", context, entry_, ceiling,
                               {ceiling_launch(ceiling.id), num_items,
                                moves_data ? std::optional(bytes_per_launch) : std::nullopt, std::nullopt, reset});
        }

        for (const elementwise::Step& step : elementwise::steps()) {
            if (!measures_step(entry_, step_ids, step.id, num_items)) {
                continue;
            }
            DeviceBuffer<unsigned char> d_workspace(step.workspace_bytes);
            if (step.prepare != nullptr) {
                STEPWISE_CUDA_CHECK(step.prepare(d_workspace.data(), stream));
                STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            }
            TimedRow row{[&] { return step.update(d_data.data(), dim, dim, d_workspace.data(), stream); }, num_items,
                         bytes_per_launch, std::nullopt, reset};
            // Check the buffers that were timed: restored, one update, compared; at the main size a second update.
            row.prepare_check = reset;
            row.check = [&] {
                const elementwise::Comparison first =
                    elementwise::compare(validated_input, rows_of(d_data.download(), dim, rows), once, dim,
                                         step.tolerance_ulp, step.inner_error_exponent);
                nlohmann::json accuracy = {{"tolerance_ulp", step.tolerance_ulp},
                                           {"max_ulp", first.max_ulp},
                                           {"max_rel", first.max_rel}};
                if (main_size) {
                    STEPWISE_CUDA_CHECK(row.launch());
                    STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
                    accuracy["second_application_max_rel"] = elementwise::max_relative_error(d_data.download(), twice);
                }
                const std::string validated_on =
                    row_count == dim ? std::string()
                                     : "on " + std::to_string(row_count) + " evenly spaced rows of " +
                                           std::to_string(dim) +
                                           " (first and last included; rows numbered among them): ";
                return Validation{first.within_tolerance(), validated_on + first.describe(dim), accuracy};
            };
            add_step_rows(chapter, context, entry_, step.id, row);
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_elementwise_chapter() { return std::make_unique<ElementwiseChapter>(); }

}  // namespace stepwise
