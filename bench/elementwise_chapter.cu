// The element-wise chapter of the timing program: registry entry, ceilings and step rows.
#include "chapter.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "elementwise_reference.hpp"
#include "elementwise_steps.hpp"
#include "floor_kernels.hpp"

#include <algorithm>

namespace stepwise {
namespace {

using elementwise::assignment_dimx;
using elementwise::assignment_dimy;

constexpr std::int64_t num_items = static_cast<std::int64_t>(assignment_dimx) * assignment_dimy;
constexpr std::int64_t bytes_per_launch = 2 * num_items * static_cast<std::int64_t>(sizeof(float));

class ElementwiseChapter final : public Chapter {
public:
    ElementwiseChapter()
    {
        entry_.id = "elementwise";
        entry_.title = "Element-wise: one kernel, step by step to the memory floor";
        entry_.share_of = "inplace_read_write";
        entry_.gtest_prefix = "Elementwise";
        entry_.timings = {
            {"batch",
             "events around 10 back-to-back launches, as the assignment times it; time per launch; L2 warm (the data "
             "were just restored by a device copy)",
             false, 10},
            {"single_cold", "events around one launch; L2 flushed before each sample", true, 1},
        };
        entry_.ceilings = {
            {"inplace_read_write", "read and write the same 16 MB in place, float4 (the memory floor)"},
            {"device_copy", "cudaMemcpyAsync device to device, 16 MB (reads 16 MB, writes 16 MB elsewhere)"},
            {"empty_launch", "an empty kernel, one thread (the launch floor)"},
        };
        for (const elementwise::Step& s : elementwise::steps()) {
            entry_.steps.push_back({s.id, s.title, s.file, s.name_space, "update", s.same_operation, s.beyond_article,
                                    {{num_items, "2048 x 2048 float"}}, s.kernels});
        }
    }

    const ChapterEntry& entry() const override { return entry_; }

    nlohmann::json measure(MeasureContext& context, const std::vector<std::string>& step_ids) const override
    {
        const cudaStream_t stream = context.stream;
        const std::vector<float> input = elementwise::assignment_input(assignment_dimx, assignment_dimy, context.seed);
        const std::vector<double> once = elementwise::reference_update(input, assignment_dimx, assignment_dimy, 1);
        const std::vector<double> twice = elementwise::reference_update(input, assignment_dimx, assignment_dimy, 2);

        DeviceBuffer<float> d_input(input.size());
        DeviceBuffer<float> d_data(input.size());
        DeviceBuffer<float> d_copy(input.size());
        d_input.upload(input);
        const auto reset = [&] {
            STEPWISE_CUDA_CHECK(
                cudaMemcpyAsync(d_data.data(), d_input.data(), d_data.bytes(), cudaMemcpyDeviceToDevice, stream));
        };

        nlohmann::json chapter = chapter_header(entry_);
        chapter["ceilings"] = nlohmann::json::array();
        chapter["baselines"] = nlohmann::json::array();
        chapter["steps"] = nlohmann::json::array();

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
            for (const TimingMode& mode : entry_.timings) {
                const RowTiming t =
                    context.sampler.time("ceiling " + ceiling.id, mode, reset, ceiling_launch(ceiling.id));
                const bool moves_data = ceiling.id != "empty_launch";
                nlohmann::json row = timing_row(t, num_items, mode.id,
                                                moves_data ? std::optional(bytes_per_launch) : std::nullopt,
                                                std::nullopt);
                add_reference_fields(row, ceiling);
                chapter["ceilings"].push_back(row);
            }
        }

        for (const elementwise::Step& step : elementwise::steps()) {
            if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end()) {
                continue;
            }
            const StepEntry& registry_step = find_step(entry_, step.id);
            DeviceBuffer<unsigned char> d_workspace(step.workspace_bytes);
            if (step.prepare != nullptr) {
                STEPWISE_CUDA_CHECK(step.prepare(d_workspace.data(), stream));
                STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            }
            const auto launch = [&] {
                return step.update(d_data.data(), assignment_dimx, assignment_dimy, d_workspace.data(), stream);
            };

            std::vector<nlohmann::json> rows;
            for (const TimingMode& mode : entry_.timings) {
                rows.push_back(timing_row(context.sampler.time(step.id, mode, reset, launch), num_items, mode.id,
                                          bytes_per_launch, std::nullopt));
            }

            // Validate the buffers that were timed: restore, one update, compare; a second update, compare.
            reset();
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const elementwise::Comparison first =
                elementwise::compare(input, d_data.download(), once, assignment_dimx, step.tolerance_ulp,
                                     step.inner_error_exponent);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const double second = elementwise::max_relative_error(d_data.download(), twice);
            const TestCounts tests = context.tests_of(entry_, registry_step);

            for (nlohmann::json& row : rows) {
                add_step_fields(row, registry_step, tests);
                row["validated"] = first.within_tolerance();
                row["validation"] = first.describe(assignment_dimx);
                row["accuracy"] = {{"tolerance_ulp", step.tolerance_ulp},
                                   {"max_ulp", first.max_ulp},
                                   {"max_rel", first.max_rel},
                                   {"second_application_max_rel", second}};
                chapter["steps"].push_back(row);
            }
        }
        add_share_of_ceiling(chapter);
        return chapter;
    }

private:
    ChapterEntry entry_;
};

}  // namespace

std::unique_ptr<Chapter> make_elementwise_chapter() { return std::make_unique<ElementwiseChapter>(); }

}  // namespace stepwise
