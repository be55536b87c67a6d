// The dynamic-parallelism chapter of the timing program: device-side launches against host-side ones.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "dynamic_parallelism/dynamic_parallelism_reference.hpp"
#include "dynamic_parallelism/dynamic_parallelism_steps.hpp"
#include "core/floor_kernels.hpp"
#include "core/step_loop.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace stepwise {
namespace {

namespace dp = dynamic_parallelism;

//! Steps 2 and 3 launch 1,024 children (half the device runtime's default limit on pending launches).
constexpr int measured_children = 1024;

class DynamicParallelismChapter final : public ChapterBase {
public:
    DynamicParallelismChapter()
        : ChapterBase("dynamic_parallelism", "Dynamic parallelism: kernels that launch kernels",
                      "host_launches", "DynamicParallelism")
    {
        entry_.racecheck_exclude = {{"DynamicParallelism*", "racecheck does not support dynamic parallelism (it says "
                                                            "so, and checks nothing in a kernel that launches one)"}};
        entry_.timings = {
            {"single", "events around one call of the launcher (its launches, copies and waits); L2 not flushed",
             false, 1},
        };
        entry_.ceilings = {
            // Launch costs, beside the launch steps; the adaptive steps compare with each other.
            {"host_launches", "the same 1,024 child grids launched one after another from the host",
             {measured_children}},
            {"empty_launch", "an empty kernel, one thread (the launch floor)", {measured_children}},
        };
        for (const dp::Step& s : dp::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, s.launcher, true, s.beyond_article, {}, s.kernels};
            if (s.children != nullptr) {
                step.sizes.push_back({measured_children, "1,024 child grids of 32 threads"});
            } else if (s.integrate != nullptr) {
                step.sizes.push_back({dp::initial_intervals,
                                      "adaptive Simpson integral of three peaks on [0, 1] from 1,000 intervals, "
                                      "tolerance 1e-5"});
            }
            entry_.steps.push_back(step);
        }
        // The front page shows the problem where launching from the device pays: host- against device-driven.
        entry_.headline = Headline{dp::initial_intervals, "single", "04_adaptive_host_driven", "05_adaptive_device_driven"};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        const cudaStream_t stream = context.stream;
        DeviceBuffer<int> d_children(measured_children);
        DeviceBuffer<unsigned int> d_failed(1);
        DeviceBuffer<double> d_result(1);
        DeviceBuffer<unsigned int> d_status(1);
        DeviceBuffer<unsigned char> d_workspace(dp::integrate_workspace_bytes(dp::list_capacity));

        for (const ReferenceEntry& ceiling : entry_.ceilings) {
            TimedRow row{[&] { return empty_launch(stream); }, measured_children};
            if (ceiling.id == "host_launches") {
                row.launch = [&] { return dp::host_launch_children(d_children.data(), measured_children, stream); };
            }
            add_reference_rows(chapter, "ceilings", context, entry_, ceiling, row);
        }

        for (const dp::Step& step : dp::steps()) {
            if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end() || step.hello != nullptr) {
                continue;  // the nested hello world prints: it is tested, not timed
            }
            TimedRow row{nullptr, find_step(entry_, step.id).sizes.at(0).n};
            if (step.children != nullptr) {
                row.launch = [&] {
                    return step.children(d_children.data(), measured_children, d_failed.data(), stream);
                };
            } else {
                row.launch = [&] {
                    return step.integrate(dp::lower, dp::upper, dp::initial_intervals, dp::tolerance, d_result.data(),
                                          d_status.data(), d_workspace.data(), dp::list_capacity, stream);
                };
            }
            // Check: poisoned, one call, then what it wrote.
            row.prepare_check = [&] {
                d_children.fill_bytes(0xFF, stream);
                STEPWISE_CUDA_CHECK(cudaMemsetAsync(d_failed.data(), 0, sizeof(unsigned int), stream));
            };
            row.check = [&] {
                if (step.children != nullptr) {
                    const std::vector<int> out = d_children.download();
                    const unsigned int failed = d_failed.download().at(0);
                    std::size_t wrong = 0;
                    for (std::size_t c = 0; c < out.size(); ++c) {
                        wrong += out[c] != static_cast<int>(c) + 1;
                    }
                    std::ostringstream validation;
                    validation << measured_children - wrong << " of " << measured_children << " children ran, "
                               << failed << " device-side launches failed";
                    return Validation{wrong == 0 && failed == 0, validation.str(), {{"max_rel", nlohmann::json()}}};
                }
                const double got = d_result.download().at(0);
                const unsigned int status = d_status.download().at(0);
                const double exact = dp::exact_integral(dp::lower, dp::upper);
                const double max_rel = std::fabs(got - exact) / std::fabs(exact);
                std::ostringstream validation;
                validation.precision(17);
                validation << "integral " << got << " (exact " << exact << ", relative error " << max_rel
                           << "), status " << dp::describe_integrate_status(status);
                return Validation{status == 0 && max_rel <= dp::integral_rel_tolerance, validation.str(),
                                  {{"max_rel", max_rel}}};
            };
            add_step_rows(chapter, context, entry_, step.id, row);
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_dynamic_parallelism_chapter() { return std::make_unique<DynamicParallelismChapter>(); }

}  // namespace stepwise
