// The warp-divergence chapter of the timing program: registry entry, ceilings and step rows.
#include "core/chapter.hpp"
#include "core/device_buffer.hpp"
#include "core/floor_kernels.hpp"
#include "core/step_loop.hpp"
#include "divergence/divergence_reference.hpp"
#include "divergence/divergence_steps.hpp"

#include <algorithm>

namespace stepwise {
namespace {

//! 2^22 items: 16 thread blocks of 256 per SM on a 132-SM H100, enough to fill every SM's warp slots twice.
constexpr int measured_items = 1 << 22;

class DivergenceChapter final : public ChapterBase {
public:
    DivergenceChapter()
        : ChapterBase("divergence", "Warp divergence: when the lanes of a warp disagree", "uniform_work", "Divergence")
    {
        entry_.profile.ncu_tests = "DivergenceProfile.*";
        entry_.profile.ncu_kernels = "regex:branch_kernel";
        entry_.sass = true;  // the page shows the compiled branches
        entry_.timings = {
            {"batch", "events around 10 back-to-back launches, time per launch; inputs warm in L2", false, 10},
        };
        entry_.ceilings = {
            {"uniform_work", "every thread sums sines: the steps' work per thread with no branch at all"},
            empty_launch_ceiling(),
        };
        for (const divergence::Step& s : divergence::steps()) {
            entry_.steps.push_back({s.id, s.title, s.file, s.name_space, "branch", true, s.beyond_article,
                                    {{measured_items, "2^22 items, 256 sines or cosines each"}}, s.kernels});
        }
        entry_.headline = Headline{measured_items, "batch", entry_.steps.front().id, entry_.steps.back().id};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        const cudaStream_t stream = context.stream;
        const int n = measured_items;
        const std::vector<float> input = divergence::random_angles(n, context.seed);
        DeviceBuffer<float> d_in(input.size());
        DeviceBuffer<float> d_out(input.size());
        d_in.upload(input);

        for (const ReferenceEntry& ceiling : entry_.ceilings) {
            TimedRow row{[&] { return empty_launch(stream); }, n};
            if (ceiling.id == "uniform_work") {
                row.launch = [&] { return divergence::uniform_work(d_in.data(), d_out.data(), n, stream); };
            }
            add_reference_rows(chapter, "ceilings", context, entry_, ceiling, row);
        }

        for (const divergence::Step& step : divergence::steps()) {
            if (!measures_step(entry_, step_ids, step.id, n)) {
                continue;
            }
            TimedRow row{[&] { return step.branch(d_in.data(), d_out.data(), n, stream); }, n};
            // Check the buffer that was timed: poisoned, one launch, compared with the double reference.
            row.prepare_check = [&] { d_out.fill_bytes(0xFF, stream); };
            row.check = [&] {
                const divergence::Comparison c = divergence::compare(
                    d_out.download(), divergence::reference_sums(input, step.rule), divergence::sum_tolerance);
                return Validation{c.within_tolerance(), c.describe(),
                                  {{"tolerance_abs", divergence::sum_tolerance},
                                   {"max_abs", c.max_abs_error},
                                   {"max_rel", c.max_rel}}};
            };
            add_step_rows(chapter, context, entry_, step.id, row);
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_divergence_chapter() { return std::make_unique<DivergenceChapter>(); }

}  // namespace stepwise
