// The occupancy chapter of the timing program: one kernel, eight block shapes, against a device copy.
#include "chapter.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "occupancy_reference.hpp"
#include "occupancy_steps.hpp"

#include <algorithm>

namespace stepwise {
namespace {

class OccupancyChapter final : public Chapter {
public:
    OccupancyChapter()
    {
        entry_.id = "occupancy";
        entry_.title = "Occupancy: one kernel, eight block shapes";
        entry_.share_of = "device_copy";
        entry_.gtest_prefix = "Occupancy";
        entry_.profile.ncu_tests = "OccupancyProfile.*";
        entry_.profile.ncu_kernels = "regex:sum_matrix_kernel";
        entry_.timings = {
            {"single_cold", "events around one launch; L2 flushed before each sample", true, 1},
        };
        entry_.ceilings = {
            {"device_copy", "cudaMemcpyAsync device to device of one matrix (reads and writes 2 GiB)"},
        };
        const std::int64_t n = static_cast<std::int64_t>(occupancy::measured_side) * occupancy::measured_side;
        for (const occupancy::Step& s : occupancy::steps()) {
            entry_.steps.push_back({s.id, s.title, occupancy::step_file, occupancy::step_namespace, s.launcher, true,
                                    s.beyond_article, {{n, "16384 x 16384 floats, c = a + b (3 GiB moved)"}},
                                    s.kernels});
        }
    }

    const ChapterEntry& entry() const override { return entry_; }

    nlohmann::json measure(MeasureContext& context, const std::vector<std::string>& step_ids) const override
    {
        const cudaStream_t stream = context.stream;
        nlohmann::json chapter = chapter_header(entry_);
        chapter["ceilings"] = nlohmann::json::array();
        chapter["baselines"] = nlohmann::json::array();
        chapter["steps"] = nlohmann::json::array();
        const int side = occupancy::measured_side;
        const std::int64_t n = static_cast<std::int64_t>(side) * side;
        const std::int64_t matrix_bytes = n * static_cast<std::int64_t>(sizeof(float));
        const std::vector<float> a = occupancy::random_matrix(static_cast<std::size_t>(n), context.seed);
        const std::vector<float> b = occupancy::random_matrix(static_cast<std::size_t>(n), context.seed + 1);
        DeviceBuffer<float> d_a(a.size()), d_b(b.size()), d_c(a.size());
        d_a.upload(a);
        d_b.upload(b);

        for (const ReferenceEntry& ceiling : entry_.ceilings) {
            const auto copy = [&] {
                return cudaMemcpyAsync(d_c.data(), d_a.data(), d_a.bytes(), cudaMemcpyDeviceToDevice, stream);
            };
            for (const TimingMode& mode : entry_.timings) {
                nlohmann::json row = timing_row(context.sampler.time("ceiling " + ceiling.id, mode, [] {}, copy), n,
                                                mode.id, 2 * matrix_bytes, std::nullopt);
                add_reference_fields(row, ceiling);
                chapter["ceilings"].push_back(row);
            }
        }

        for (const occupancy::Step& step : occupancy::steps()) {
            if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end()) {
                continue;
            }
            const StepEntry& registry_step = find_step(entry_, step.id);
            const auto launch = [&] { return step.sum(d_a.data(), d_b.data(), d_c.data(), side, side, stream); };
            std::vector<nlohmann::json> rows;
            for (const TimingMode& mode : entry_.timings) {
                rows.push_back(timing_row(context.sampler.time(step.id, mode, [] {}, launch), n, mode.id,
                                          3 * matrix_bytes, std::nullopt));
            }
            // Validate the buffer that was timed: poison, one launch, compare bit for bit with a + b.
            d_c.fill_bytes(0xFF, stream);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const occupancy::Comparison c = occupancy::compare_sum(a, b, d_c.download());
            const TestCounts tests = context.tests_of(entry_, registry_step);
            for (nlohmann::json& row : rows) {
                add_step_fields(row, registry_step, tests);
                row["validated"] = c.exact();
                row["validation"] = c.describe();
                const nlohmann::json error = c.exact() ? nlohmann::json(0.0) : nlohmann::json();
                row["accuracy"] = {{"max_ulp", error}, {"max_rel", error}};
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

std::unique_ptr<Chapter> make_occupancy_chapter() { return std::make_unique<OccupancyChapter>(); }

}  // namespace stepwise
