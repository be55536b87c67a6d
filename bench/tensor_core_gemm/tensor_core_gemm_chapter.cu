// The tensor-core GEMM chapter of the timing program: registry entry, the tensor-core and copy ceilings, cuBLAS in
// bf16, every step at 4096^3, the final step and cuBLAS over a sweep of sizes, and the autotuning sweep of step 8's
// template at the main size and at 1024^3.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/step_loop.hpp"
#include "sgemm/sgemm_reference.hpp"
#include "tensor_core_gemm/tensor_core_gemm_autotune.hpp"
#include "tensor_core_gemm/tensor_core_gemm_reference.hpp"
#include "tensor_core_gemm/tensor_core_gemm_steps.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace stepwise {
namespace {

namespace tc = tensor_core_gemm;

//! The main size, where every step runs and the bar is taken.
constexpr int main_size = 4096;
//! The sweep: every power of two from 512 to 8192, and sizes that are multiples of no tile.
constexpr int sweep_sizes[] = {512, 1000, 1024, 2048, 4095, 4097, 8192};
const std::vector<std::string> sweep_rows = {"08_persistent", "cublas_gemm_bf16", "tensor_peak"};
//! The autotuning sweep runs at these sizes: the main one and a small one, where the launcher picks another tile.
constexpr int autotune_sizes[] = {1024, main_size};
//! Up to this size the whole product is computed in double on the CPU; above, at sampled elements (and every element
//! of a result must then be finite: C is poisoned with NaN before each validating call).
constexpr int full_reference_max = 1024;
constexpr std::size_t sampled_elements = 4096;

std::string size_text(int n) { return std::to_string(n) + " x " + std::to_string(n) + " x " + std::to_string(n); }

std::string format_number(double value)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.2g", value);
    return text;
}

std::string tolerance_text(const tc::Tolerance& t)
{
    return format_number(t.of_max) + " x max|C| + " + format_number(t.of_element) + " x |C|";
}

//! The reference of one size: the product of the bf16 inputs in double, at every element or at sampled ones.
struct Reference {
    std::vector<std::size_t> where;  //!< the sampled elements (row-major indices), or empty: every element
    std::vector<double> values;      //!< the product at them
    std::string source;              //!< how the reference was obtained, for the validation text
};

//! How a result compares with the reference: at its elements and, where sampled, how many elements are NaN.
struct Check {
    sgemm::Comparison at_reference;
    std::size_t nan_elements = 0;

    bool passed() const { return at_reference.within_tolerance() && nan_elements == 0; }
};

class TensorCoreGemmChapter final : public ChapterBase {
public:
    TensorCoreGemmChapter()
        : ChapterBase("tensor_core_gemm", "Tensor cores on Hopper: from WMMA to a persistent wgmma kernel",
                      "tensor_peak", "TensorCoreGemm")
    {
        entry_.profile = {"TensorCoreGemmProfile.*", "regex:gemm_kernel", ""};
        // Under a sustained tensor-core load the card's power limit, not a passing throttle, sets the SM clock (the
        // H200's settles below 90 % of its highest at 8192^3): every sample is kept, and each row records its clocks.
        // That clock follows what ran before, so at each size cuBLAS and the steps are sampled in turn.
        entry_.timings = {{"single_cold",
                           "events around one launch; L2 flushed before each sample; samples kept at any SM clock; "
                           "at each size cuBLAS and the steps sampled in turn",
                           true, 1, 0.0}};
        entry_.ceilings = {
            {"tensor_peak", "n^3 bf16 multiply-adds by wgmma from shared memory on every SM (the tensor cores alone)"},
            {"device_copy", "cudaMemcpyAsync device to device of the bytes of A, B and C"},
        };
        entry_.baselines = {
            {"cublas_gemm_bf16",
             "cuBLAS cublasGemmEx: bf16 A, B and C, CUBLAS_COMPUTE_32F (fp32 accumulation), the same layouts"},
        };
        for (const tc::Step& s : tc::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "gemm", true, true, {}, s.kernels};
            step.needs = s.needs;
            if (s.accepts(main_size, main_size, main_size)) {
                step.sizes.push_back({main_size, size_text(main_size)});
            }
            entry_.steps.push_back(step);
        }
        Sweep sweep{{}, sweep_rows, 3 * sizeof(tc::bf16), 2};  // A, B and C: 3 n^2 bf16
        for (const int n : sweep_sizes) {
            sweep.sizes.push_back({n, size_text(n)});
        }
        add_sweep(entry_, std::move(sweep));
        entry_.headline = Headline{main_size, "single_cold", entry_.steps.front().id, entry_.steps.back().id};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        for (const char* kind : {"autotune", "unsupported"}) {
            chapter[kind] = nlohmann::json::array();
        }
        // What this GPU cannot run is left out, and listed with the reason, once.
        const std::vector<std::string> runnable =
            runnable_steps(tc::steps(), step_ids, tc::unsupported_reason, chapter["unsupported"]);
        const std::string peak_reason = tc::unsupported_reason(tc::steps().back());
        if (!peak_reason.empty()) {
            chapter["unsupported"].push_back({{"id", "tensor_peak"}, {"reason", peak_reason}});
        }
        const tc::CublasGemmBf16 cublas;
        for (const std::int64_t n : all_sizes(entry_)) {
            measure_size(context, runnable, static_cast<int>(n), cublas, peak_reason.empty(), chapter);
        }
    }

private:
    void measure_size(MeasureContext& context, const std::vector<std::string>& runnable, int n,
                      const tc::CublasGemmBf16& cublas, bool peak_supported, nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const TimingMode& mode = entry_.timings.front();
        const std::size_t elements = static_cast<std::size_t>(n) * n;
        const std::int64_t flops = 2 * static_cast<std::int64_t>(n) * n * n;
        const std::vector<tc::bf16> A = tc::random_matrix(n, n, context.seed + 3 * n);
        const std::vector<tc::bf16> B = tc::random_matrix(n, n, context.seed + 3 * n + 1);
        DeviceBuffer<tc::bf16> d_A(elements);
        DeviceBuffer<tc::bf16> d_B(elements);
        DeviceBuffer<tc::bf16> d_C(elements);
        d_A.upload(A);
        d_B.upload(B);
        const auto nothing = [] {};

        if (peak_supported && measured_at(entry_, "tensor_peak", n)) {
            DeviceBuffer<float> d_sink(tc::tensor_peak_threads());
            const auto peak = [&] { return tc::tensor_peak(static_cast<double>(flops) / 2, d_sink.data(), stream); };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[0],
                               {peak, n, std::nullopt, flops});
        }
        if (measured_at(entry_, "device_copy", n)) {
            DeviceBuffer<tc::bf16> d_copy_in(3 * elements);
            DeviceBuffer<tc::bf16> d_copy_out(3 * elements);
            d_copy_in.fill_bytes(0, stream);
            const auto copy = [&] {
                return cudaMemcpyAsync(d_copy_out.data(), d_copy_in.data(), d_copy_in.bytes(),
                                       cudaMemcpyDeviceToDevice, stream);
            };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[1],
                               {copy, n, 2 * static_cast<std::int64_t>(d_copy_in.bytes())});
        }

        // C is poisoned with NaN before each validating call: an element a kernel leaves unwritten shows.
        const auto run_once = [&](const std::function<cudaError_t()>& launch) {
            d_C.fill_bytes(0xFF, stream);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            return tc::to_float(d_C.download());
        };
        const auto library_call = [&] { return cublas(n, n, n, d_A.data(), d_B.data(), d_C.data(), stream); };
        const Reference reference = make_reference(n, A, B, context.seed);
        const tc::Tolerance tolerance = tc::exact_tolerance(n);
        const auto validation_of = [&](const std::vector<float>& result) {
            const Check c = check(result, reference, tolerance);
            const bool sampled = !reference.where.empty();
            return Validation{c.passed(),
                              (c.passed() ? "within " : "NOT within ") + tolerance_text(tolerance) + " of " +
                                  reference.source + "; worst " + c.at_reference.describe(sampled ? 1 : n) +
                                  (sampled ? "; " + std::to_string(c.nan_elements) + " of the " +
                                                 std::to_string(elements) + " elements NaN"
                                           : ""),
                              {{"max_rel", c.at_reference.max_rel},
                               {"tolerance_rel", tolerance.of_max},
                               {"tolerance_of_element", tolerance.of_element},
                               {"over_tolerance", c.at_reference.over_tolerance}}};
        };

        // The library and the steps are sampled in turn (see the timing mode), then each is validated.
        std::vector<Sampler::TimedCall> calls;
        const bool library_measured = measured_at(entry_, "cublas_gemm_bf16", n);
        if (library_measured) {
            calls.push_back({"cublas_gemm_bf16 at " + problem_text(entry_, n), library_call});
        }
        std::vector<const tc::Step*> timed_steps;
        for (const tc::Step& step : tc::steps()) {
            if (measures_step(entry_, runnable, step.id, n)) {
                timed_steps.push_back(&step);
                calls.push_back({std::string(step.id) + " at " + problem_text(entry_, n), [&, gemm = step.gemm] {
                                     return gemm(n, n, n, d_A.data(), d_B.data(), d_C.data(), stream);
                                 }});
            }
        }
        const std::vector<RowTiming> timings = context.sampler.time_in_turn(calls, mode, nothing);
        std::size_t next = 0;
        if (library_measured) {
            nlohmann::json row = timing_row(timings[next++], n, mode.id, std::nullopt, flops);
            add_reference_fields(row, entry_.baselines[0]);
            add_validation(row, validation_of(run_once(library_call)));  // the library is held to the same tolerance as the steps
            chapter["baselines"].push_back(row);
        }
        for (const tc::Step* step : timed_steps) {
            const StepEntry& registry_step = find_step(entry_, step->id);
            nlohmann::json row = timing_row(timings[next], n, mode.id, std::nullopt, flops);
            add_step_fields(row, registry_step, context.tests_of(entry_, registry_step));
            add_validation(row, validation_of(run_once(calls[next].launch)));
            chapter["steps"].push_back(row);
            ++next;
        }

        if (std::find(std::begin(autotune_sizes), std::end(autotune_sizes), n) != std::end(autotune_sizes) &&
            std::find(runnable.begin(), runnable.end(), tc::steps().back().id) != runnable.end()) {
            for (const tc::AutotuneCandidate& candidate : tc::autotune_candidates()) {
                const auto call = [&] {
                    return candidate.gemm(n, n, n, d_A.data(), d_B.data(), d_C.data(), stream);
                };
                const std::string what = "autotune " + candidate.id + " at " + problem_text(entry_, n);
                nlohmann::json row = timing_row(context.sampler.time(what, mode, nothing, call), n, mode.id,
                                                std::nullopt, flops);
                row["id"] = candidate.id;
                row["config"] = candidate.config;
                row["chosen"] = candidate.chosen_for(n, n);
                row["used_by"] = tc::steps().back().id;
                add_validation(row, validation_of(run_once(call)));
                row["resources"] = nlohmann::json::array({runtime_resources_json(candidate.kernel)});
                chapter["autotune"].push_back(row);
            }
        }
    }

    //! The double-precision product of the bf16 inputs: whole for small sizes, at sampled elements above.
    static Reference make_reference(int n, const std::vector<tc::bf16>& A, const std::vector<tc::bf16>& B,
                                    std::uint64_t seed)
    {
        if (n <= full_reference_max) {
            return {{}, tc::reference_gemm(n, n, n, A, B), "the product of the bf16 inputs in double"};
        }
        std::vector<std::size_t> where = sgemm::sample_indices(n, n, sampled_elements, seed + n);
        std::vector<double> values = tc::reference_elements(n, n, n, A, B, where);
        return {std::move(where), std::move(values),
                "the product of the bf16 inputs in double at " + std::to_string(sampled_elements) +
                    " sampled elements"};
    }

    static Check check(const std::vector<float>& result, const Reference& reference, const tc::Tolerance& tolerance)
    {
        Check c;
        if (reference.where.empty()) {
            c.at_reference = sgemm::compare(result, reference.values, tolerance.of_max, tolerance.of_element);
            return c;
        }
        std::vector<float> sampled(reference.where.size());
        for (std::size_t i = 0; i < sampled.size(); ++i) {
            sampled[i] = result[reference.where[i]];
        }
        c.at_reference = sgemm::compare(sampled, reference.values, tolerance.of_max, tolerance.of_element);
        for (const float v : result) {
            c.nan_elements += std::isnan(v) ? 1 : 0;
        }
        return c;
    }
};

}  // namespace

std::unique_ptr<Chapter> make_tensor_core_gemm_chapter() { return std::make_unique<TensorCoreGemmChapter>(); }

}  // namespace stepwise
