// The reduction chapter of the timing program: registry entry, ceilings, the CUB baseline and step rows.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/step_loop.hpp"
#include "reduction/reduction_reference.hpp"
#include "reduction/reduction_steps.hpp"

#include <algorithm>
#include <cmath>

namespace stepwise {
namespace {

//! The sizes every step is measured at: Harris's 2^22 (where launch overhead still counts) and 2^28 (1 GiB of
//! int, DRAM-bound).
constexpr int measured_sizes[] = {1 << 22, 1 << 28};
//! The sweep: every power of two from 2^10 to 2^30 items (4 GiB of int), for the rows below.
constexpr int sweep_min_log2 = 10;
constexpr int sweep_max_log2 = 30;
const std::vector<std::string> sweep_rows = {"17_single_pass", "16_vector_loads", "cub_device_reduce_sum",
                                             "device_copy"};

std::string size_text(int n) { return "2^" + std::to_string(__builtin_ctz(static_cast<unsigned>(n))) + " int"; }

class ReductionChapter final : public ChapterBase {
public:
    ReductionChapter()
        : ChapterBase("reduction", "Parallel reduction: from neighbored pairs to faster than CUB",
                      "device_copy", "Reduction")
    {
        entry_.profile = {"ReductionProfile.*", "regex:reduce_kernel", "ReductionRaceDemonstration.*"};
        entry_.racecheck_exclude = {{"ReductionRaceDemonstration.*", "races on purpose (make profile keeps its report)"}};
        entry_.timings = {{"single_cold", "events around one call (all its launches); L2 flushed before each sample",
                           true, 1}};
        entry_.ceilings = {{"device_copy", "cudaMemcpyAsync device to device of the same bytes (reads and writes them)"}};
        entry_.baselines = {{"cub_device_reduce_sum", "cub::DeviceReduce::Sum (CUDA 13 CCCL)"}};
        for (const reduction::Step& s : reduction::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "sum", true, std::string(s.source) == "beyond", {},
                           s.kernels};
            for (const int n : measured_sizes) {
                step.sizes.push_back({n, size_text(n)});
            }
            entry_.steps.push_back(step);
        }
        Sweep sweep{{}, sweep_rows, sizeof(int), 1};
        for (int k = sweep_min_log2; k <= sweep_max_log2; ++k) {
            if (std::find(std::begin(measured_sizes), std::end(measured_sizes), 1 << k) == std::end(measured_sizes)) {
                sweep.sizes.push_back({1 << k, size_text(1 << k)});
            }
        }
        add_sweep(entry_, std::move(sweep));
        entry_.headline = Headline{1 << 28, "single_cold", entry_.steps.front().id, entry_.steps.back().id};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        const cudaStream_t stream = context.stream;

        // One input for every size: each size sums a prefix of it. Values in [-4, 4]: the sum of 2^30 of them
        // fits an int, and every order gives the exact sum.
        const std::vector<std::int64_t> sizes = all_sizes(entry_);
        const std::vector<int> input =
            reduction::random_ints(static_cast<std::size_t>(sizes.back()), -4, 4, context.seed);
        DeviceBuffer<int> d_input(input.size());
        DeviceBuffer<int> d_scratch(input.size());  // what in-place steps overwrite; the copy's destination
        DeviceBuffer<int> d_out(1);
        d_input.upload(input);
        std::int64_t expected = 0;
        std::size_t summed = 0;
        for (const std::int64_t size : sizes) {
            const int n = static_cast<int>(size);
            for (; summed < static_cast<std::size_t>(n); ++summed) {
                expected += input[summed];
            }
            const std::int64_t bytes = size * static_cast<std::int64_t>(sizeof(int));
            const auto restore = [&] {
                STEPWISE_CUDA_CHECK(cudaMemcpyAsync(d_scratch.data(), d_input.data(), static_cast<std::size_t>(bytes),
                                                    cudaMemcpyDeviceToDevice, stream));
            };

            if (measured_at(entry_, "device_copy", n)) {
                const auto copy = [&] {
                    return cudaMemcpyAsync(d_scratch.data(), d_input.data(), static_cast<std::size_t>(bytes),
                                           cudaMemcpyDeviceToDevice, stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings.front(), {copy, n, 2 * bytes});
            }

            // Each sum function is timed at this size, then the result of a fresh call on the same buffers checked.
            // A step that overwrites its input works on `d_scratch`, restored from `d_input` before each sample.
            const auto measure_sum = [&](reduction::SumFunction<int> sum, bool destroys_input,
                                         const std::function<void(const TimedRow&)>& add) {
                int* d_in = destroys_input ? d_scratch.data() : d_input.data();
                std::size_t temp_bytes = 0;
                STEPWISE_CUDA_CHECK(sum(nullptr, temp_bytes, d_in, d_out.data(), n, stream));
                DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));
                TimedRow row{[&] { return sum(d_temp.data(), temp_bytes, d_in, d_out.data(), n, stream); }, n, bytes};
                if (destroys_input) {
                    row.reset = restore;
                }
                row.prepare_check = [&] {
                    if (destroys_input) {
                        restore();
                    }
                    d_out.fill_bytes(0xFF, stream);
                };
                row.check = [&] {
                    const int got = d_out.download().front();
                    const double error = std::abs(static_cast<double>(got) - static_cast<double>(expected));
                    return Validation{static_cast<std::int64_t>(got) == expected,
                                      "sum " + std::to_string(got) + ", exact " + std::to_string(expected),
                                      {{"max_rel", expected != 0 ? error / std::abs(static_cast<double>(expected))
                                                                 : error}}};
                };
                add(row);
            };

            if (measured_at(entry_, "cub_device_reduce_sum", n)) {
                measure_sum(&reduction::cub_sum, false, [&](const TimedRow& row) {
                    add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines.front(), row);
                });
            }

            for (const reduction::Step& step : reduction::steps()) {
                if (!measures_step(entry_, step_ids, step.id, n)) {
                    continue;
                }
                measure_sum(step.sum_int, step.destroys_input, [&](const TimedRow& row) {
                    add_step_rows(chapter, context, entry_, step.id, row);
                });
            }
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_reduction_chapter() { return std::make_unique<ReductionChapter>(); }

}  // namespace stepwise
