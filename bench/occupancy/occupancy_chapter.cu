// The occupancy chapter of the timing program: one kernel, eight block shapes, against a device copy.
#include "core/chapter.hpp"
#include "core/step_loop.hpp"
#include "core/device_buffer.hpp"
#include "occupancy/occupancy_reference.hpp"
#include "occupancy/occupancy_steps.hpp"

#include <algorithm>
#include <cmath>

namespace stepwise {
namespace {

//! The sweep: square sizes from 1024 x 1024 (4 MiB a matrix) to 8192 x 8192 besides the source's 16384 x 16384,
//! for the rows below: the fastest shape, the source's first one, the small blocks, and the copy.
constexpr int sweep_sides[] = {1024, 2048, 4096, 8192};
const std::vector<std::string> sweep_rows = {"06_block_256x1", "01_block_32x32", "07_block_8x8", "device_copy"};

std::string size_text(int side)
{
    const std::string text = std::to_string(side) + " x " + std::to_string(side) + " floats, c = a + b";
    return side == occupancy::measured_side ? text + " (3 GiB moved)" : text;
}

class OccupancyChapter final : public ChapterBase {
public:
    OccupancyChapter()
        : ChapterBase("occupancy", "Occupancy: one kernel, eight block shapes", "device_copy", "Occupancy")
    {
        entry_.profile.ncu_tests = "OccupancyProfile.*";
        entry_.profile.ncu_kernels = "regex:sum_matrix_kernel";
        entry_.timings = {
            single_cold_timing(),
        };
        entry_.ceilings = {
            {"device_copy", "cudaMemcpyAsync device to device of one matrix (reads it and writes a copy)"},
        };
        const int side = occupancy::measured_side;
        for (const occupancy::Step& s : occupancy::steps()) {
            entry_.steps.push_back({s.id, s.title, occupancy::step_file, occupancy::step_namespace, s.launcher, true,
                                    s.beyond_article, {{std::int64_t{side} * side, size_text(side)}}, s.kernels});
        }
        Sweep sweep{{}, sweep_rows, 3 * sizeof(float), 1};  // a, b and c
        for (const int sweep_side : sweep_sides) {
            sweep.sizes.push_back({std::int64_t{sweep_side} * sweep_side, size_text(sweep_side)});
        }
        add_sweep(entry_, std::move(sweep));
        // The front page compares the source's shape with the fastest one (the steps are shapes, not a progression).
        entry_.headline = Headline{std::int64_t{side} * side, "single_cold", "01_block_32x32", "06_block_256x1"};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        const cudaStream_t stream = context.stream;
        for (const std::int64_t n : all_sizes(entry_)) {
            const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(n))));
            const std::int64_t matrix_bytes = n * static_cast<std::int64_t>(sizeof(float));
            const std::vector<float> a = occupancy::random_matrix(static_cast<std::size_t>(n), context.seed + side);
            const std::vector<float> b = occupancy::random_matrix(static_cast<std::size_t>(n), context.seed + side + 1);
            DeviceBuffer<float> d_a(a.size()), d_b(b.size()), d_c(a.size());
            d_a.upload(a);
            d_b.upload(b);

            for (const ReferenceEntry& ceiling : entry_.ceilings) {
                if (!measured_at(entry_, ceiling.id, n)) {
                    continue;
                }
                const auto copy = [&] {
                    return cudaMemcpyAsync(d_c.data(), d_a.data(), d_a.bytes(), cudaMemcpyDeviceToDevice, stream);
                };
                add_reference_rows(chapter, "ceilings", context, entry_, ceiling, {copy, n, 2 * matrix_bytes});
            }

            for (const occupancy::Step& step : occupancy::steps()) {
                if (!measures_step(entry_, step_ids, step.id, n)) {
                    continue;
                }
                TimedRow row{[&] { return step.sum(d_a.data(), d_b.data(), d_c.data(), side, side, stream); }, n,
                             3 * matrix_bytes};
                // Check the buffer that was timed: poisoned, one launch, compared bit for bit with a + b.
                row.prepare_check = [&] { d_c.fill_bytes(0xFF, stream); };
                row.check = [&] {
                    const occupancy::Comparison c = occupancy::compare_sum(a, b, d_c.download());
                    const nlohmann::json error = c.exact() ? nlohmann::json(0.0) : nlohmann::json();
                    return Validation{c.exact(), c.describe(), {{"max_ulp", error}, {"max_rel", error}}};
                };
                add_step_rows(chapter, context, entry_, step.id, row);
            }
        }
    }
};

}  // namespace

std::unique_ptr<Chapter> make_occupancy_chapter() { return std::make_unique<OccupancyChapter>(); }

}  // namespace stepwise
