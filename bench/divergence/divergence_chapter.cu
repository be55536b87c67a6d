// The warp-divergence chapter of the timing program: registry entry, ceilings and step rows.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "divergence/divergence_reference.hpp"
#include "divergence/divergence_steps.hpp"
#include "core/floor_kernels.hpp"

#include <algorithm>

namespace stepwise {
namespace {

//! 2^22 items: 16 thread blocks of 256 per SM on a 132-SM H100, enough to fill every SM's warp slots twice.
constexpr int measured_items = 1 << 22;

class DivergenceChapter final : public Chapter {
public:
    DivergenceChapter()
    {
        entry_.id = "divergence";
        entry_.title = "Warp divergence: when the lanes of a warp disagree";
        entry_.share_of = "uniform_work";
        entry_.gtest_prefix = "Divergence";
        entry_.profile.ncu_tests = "DivergenceProfile.*";
        entry_.profile.ncu_kernels = "regex:branch_kernel";
        entry_.timings = {
            {"batch", "events around 10 back-to-back launches, time per launch; inputs warm in L2", false, 10},
        };
        entry_.ceilings = {
            {"uniform_work", "every thread sums sines: the steps' work per thread with no branch at all"},
            {"empty_launch", "an empty kernel, one thread (the launch floor)"},
        };
        for (const divergence::Step& s : divergence::steps()) {
            entry_.steps.push_back({s.id, s.title, s.file, s.name_space, "branch", true, s.beyond_article,
                                    {{measured_items, "2^22 items, 256 sines or cosines each"}}, s.kernels});
        }
        entry_.headline = Headline{measured_items, "batch", entry_.steps.front().id, entry_.steps.back().id};
    }

    const ChapterEntry& entry() const override { return entry_; }

    nlohmann::json measure(MeasureContext& context, const std::vector<std::string>& step_ids) const override
    {
        const cudaStream_t stream = context.stream;
        nlohmann::json chapter = chapter_header(entry_);
        chapter["ceilings"] = nlohmann::json::array();
        chapter["baselines"] = nlohmann::json::array();
        chapter["steps"] = nlohmann::json::array();
        const int n = measured_items;
        const std::vector<float> input = divergence::random_angles(n, context.seed);
        DeviceBuffer<float> d_in(input.size());
        DeviceBuffer<float> d_out(input.size());
        d_in.upload(input);

        for (const ReferenceEntry& ceiling : entry_.ceilings) {
            const std::function<cudaError_t()> launch =
                ceiling.id == "uniform_work"
                    ? std::function<cudaError_t()>(
                          [&] { return divergence::uniform_work(d_in.data(), d_out.data(), n, stream); })
                    : std::function<cudaError_t()>([&] { return empty_launch(stream); });
            for (const TimingMode& mode : entry_.timings) {
                nlohmann::json row = timing_row(context.sampler.time("ceiling " + ceiling.id, mode, [] {}, launch), n,
                                                mode.id, std::nullopt, std::nullopt);
                add_reference_fields(row, ceiling);
                chapter["ceilings"].push_back(row);
            }
        }

        for (const divergence::Step& step : divergence::steps()) {
            if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end()) {
                continue;
            }
            const StepEntry& registry_step = find_step(entry_, step.id);
            const auto launch = [&] { return step.branch(d_in.data(), d_out.data(), n, stream); };
            std::vector<nlohmann::json> rows;
            for (const TimingMode& mode : entry_.timings) {
                rows.push_back(timing_row(context.sampler.time(step.id, mode, [] {}, launch), n, mode.id, std::nullopt,
                                          std::nullopt));
            }
            // Validate the buffer that was timed: poison, one launch, compare with the double reference.
            d_out.fill_bytes(0xFF, stream);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            const divergence::Comparison c = divergence::compare(
                d_out.download(), divergence::reference_sums(input, step.rule), divergence::sum_tolerance);
            const TestCounts tests = context.tests_of(entry_, registry_step);
            for (nlohmann::json& row : rows) {
                add_step_fields(row, registry_step, tests);
                row["validated"] = c.within_tolerance();
                row["validation"] = c.describe();
                row["accuracy"] = {{"tolerance_abs", divergence::sum_tolerance}, {"max_abs", c.max_abs_error}, {"max_rel", c.max_rel}};
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

std::unique_ptr<Chapter> make_divergence_chapter() { return std::make_unique<DivergenceChapter>(); }

}  // namespace stepwise
