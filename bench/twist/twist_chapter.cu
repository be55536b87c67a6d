// The y-twist chapter of the timing program: registry entry, ceilings and step rows.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/floor_kernels.hpp"
#include "core/step_loop.hpp"
#include "twist/twist_reference.hpp"
#include "twist/twist_steps.hpp"

#include <algorithm>

namespace stepwise {
namespace {

//! The sizes measured: the source's 990,000 vertices (15.8 MB: they fit in an H100's 50 MB L2) and 2^26
//! (1 GiB: they must come from DRAM).
constexpr int source_points = 990000;
constexpr int dram_points = 1 << 26;
constexpr int measured_points[] = {source_points, dram_points};
//! Angles up to 750 radians, where the approximate __cosf/__sinf no longer hold: their error shows here.
constexpr float wide_angle_magnitude = 500.0f;
constexpr int wide_angle_points = 1 << 16;

//! The sweep: every fourth power of two from 2^14 to 2^24 vertices (256 KiB to 256 MiB), for the rows below.
constexpr int sweep_points[] = {1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24};
const std::vector<std::string> sweep_rows = {"06_exact_sincosf", "02_thread_per_vertex", "device_copy",
                                             "inplace_read_write"};

std::string size_text(int n)
{
    if (n == source_points) {
        return "990,000 float4 vertices (15.8 MB, the source's)";
    }
    const int log2 = __builtin_ctz(static_cast<unsigned>(n));
    const std::int64_t mib = (std::int64_t{n} * static_cast<std::int64_t>(sizeof(float4))) >> 20;
    return "2^" + std::to_string(log2) + " float4 vertices (" +
           (mib >= 1024 ? std::to_string(mib / 1024) + " GiB)" : std::to_string(mib) + " MiB)");
}

class TwistChapter final : public ChapterBase {
public:
    TwistChapter()
        : ChapterBase("twist", "y-twist: deforming a mesh at the copy ceiling", "device_copy", "Twist")
    {
        entry_.timings = {
            single_cold_timing(),
            batch_warm_timing(),
        };
        entry_.ceilings = {
            {"device_copy", "cudaMemcpyAsync device to device of the same vertices (reads and writes their bytes)"},
            {"inplace_read_write", "read and write every vertex in place, one float4 per thread"},
            empty_launch_ceiling(),
        };
        for (const twist::Step& s : twist::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "twist", s.same_operation, s.beyond_article, {},
                           s.kernels};
            for (const int n : measured_points) {
                if (!s.one_thread || n == source_points) {
                    step.sizes.push_back({n, size_text(n)});
                }
            }
            entry_.steps.push_back(step);
        }
        Sweep sweep{{}, sweep_rows, sizeof(float4), 1};  // the vertices, updated in place
        for (const int n : sweep_points) {
            sweep.sizes.push_back({n, size_text(n)});
        }
        add_sweep(entry_, std::move(sweep));
        // The front page: from the source's one thread to the final step at the source's size (the only size the
        // one-thread step runs at).
        entry_.headline = Headline{source_points, "single_cold", entry_.steps.front().id, entry_.steps.back().id};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        const cudaStream_t stream = context.stream;
        const std::vector<double> wide_angle_errors = wide_angle_max_ulp(context);

        for (const std::int64_t size : all_sizes(entry_)) {
            const int n = static_cast<int>(size);
            const std::int64_t bytes = 2 * static_cast<std::int64_t>(n) * static_cast<std::int64_t>(sizeof(float4));
            const std::vector<float4> input = twist::random_points(n, twist::measured_extent, context.seed + n);
            const std::vector<twist::Twisted> reference =
                twist::reference_twist(input, twist::measured_magnitude, twist::measured_env);
            DeviceBuffer<float4> d_input(input.size());
            DeviceBuffer<float4> d_points(input.size());
            d_input.upload(input);
            const auto restore = [&] {
                STEPWISE_CUDA_CHECK(cudaMemcpyAsync(d_points.data(), d_input.data(), d_input.bytes(),
                                                    cudaMemcpyDeviceToDevice, stream));
            };

            for (const ReferenceEntry& ceiling : entry_.ceilings) {
                if (!measured_at(entry_, ceiling.id, n)) {
                    continue;
                }
                TimedRow row{[&] { return empty_launch(stream); }, n};
                if (ceiling.id == "device_copy") {
                    row.launch = [&] {
                        return cudaMemcpyAsync(d_points.data(), d_input.data(), d_input.bytes(),
                                               cudaMemcpyDeviceToDevice, stream);
                    };
                } else if (ceiling.id == "inplace_read_write") {
                    row.launch = [&] {
                        return inplace_read_write(reinterpret_cast<float*>(d_points.data()), 4 * d_points.size(), 1.0f,
                                                  stream);
                    };
                }
                if (ceiling.id != "empty_launch") {
                    row.bytes = bytes;
                }
                add_reference_rows(chapter, "ceilings", context, entry_, ceiling, row);
            }

            for (std::size_t index = 0; index < twist::steps().size(); ++index) {
                const twist::Step& step = twist::steps()[index];
                if (!measures_step(entry_, step_ids, step.id, n)) {
                    continue;
                }
                TimedRow row{[&] {
                                 return step.twist(d_points.data(), n, twist::measured_magnitude,
                                                   twist::measured_env, stream);
                             },
                             n, bytes, std::nullopt, restore};
                // Check the buffers that were timed: restored, one launch, compared with the double reference.
                row.prepare_check = restore;
                row.check = [&] {
                    const twist::Comparison c =
                        twist::compare(input, d_points.download(), reference, step.tolerance_ulp);
                    return Validation{c.within_tolerance(), c.describe(),
                                      {{"tolerance_ulp", step.tolerance_ulp},
                                       {"max_ulp", c.max_ulp},
                                       {"max_rel", c.max_rel},
                                       {"wide_angle_max_ulp", wide_angle_errors[index]}}};
                };
                add_step_rows(chapter, context, entry_, step.id, row);
            }
        }
    }

private:
    //! Each step's largest error (ulps of r) when the angles reach 750 radians: what `same_operation` is about.
    static std::vector<double> wide_angle_max_ulp(MeasureContext& context)
    {
        const std::vector<float4> input =
            twist::random_points(wide_angle_points, twist::measured_extent, context.seed + 1);
        const std::vector<twist::Twisted> reference =
            twist::reference_twist(input, wide_angle_magnitude, twist::measured_env);
        DeviceBuffer<float4> d_points(input.size());
        std::vector<double> out;
        for (const twist::Step& step : twist::steps()) {
            d_points.upload(input);
            STEPWISE_CUDA_CHECK(step.twist(d_points.data(), wide_angle_points, wide_angle_magnitude,
                                           twist::measured_env, context.stream));
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(context.stream));
            out.push_back(twist::compare(input, d_points.download(), reference, step.tolerance_ulp).max_ulp);
        }
        return out;
    }
};

}  // namespace

std::unique_ptr<Chapter> make_twist_chapter() { return std::make_unique<TwistChapter>(); }

}  // namespace stepwise
