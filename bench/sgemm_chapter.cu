// The SGEMM chapter of the timing program: registry entry, the FMA and copy ceilings, cuBLAS in fp32 and TF32,
// every step over a sweep of sizes, and the autotuning sweep of step 10's template.
#include "chapter.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "floor_kernels.hpp"
#include "sgemm_autotune.hpp"
#include "sgemm_reference.hpp"
#include "sgemm_steps.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace stepwise {
namespace {

//! M = N = K of every size measured: powers of two from 128 to 8192, and 1000 and 4095 for the steps that take
//! any size. 4096 is the chapter's main size, where the bar is taken and the autotuning sweep runs.
constexpr int measured_sizes[] = {128, 256, 512, 1000, 1024, 2048, 4095, 4096, 8192};
constexpr int main_size = 4096;
//! Up to this size the whole product is computed in double on the CPU; above, cuBLAS's fp32 result is checked
//! at sampled elements against double and is then the reference for every step.
constexpr int full_reference_max = 1024;
constexpr std::size_t sampled_elements = 2048;

std::string size_text(int n) { return std::to_string(n) + " x " + std::to_string(n) + " x " + std::to_string(n); }

nlohmann::json tiling_json(const sgemm::Tiling& t)
{
    return {{"block_m", t.block_m}, {"block_n", t.block_n}, {"block_k", t.block_k},   {"warp_m", t.warp_m},
            {"warp_n", t.warp_n},   {"thread_m", t.thread_m}, {"thread_n", t.thread_n}, {"threads", t.threads},
            {"stages", t.stages}};
}

//! The reference of one size: the product in double (small sizes), or cuBLAS's fp32 product checked at sampled
//! elements against double.
struct Reference {
    std::vector<double> values;
    std::string source;  //!< how the reference was obtained, for the validation text
};

class SgemmChapter final : public Chapter {
public:
    SgemmChapter()
    {
        entry_.id = "sgemm";
        entry_.title = "SGEMM: from one thread per element to cuBLAS";
        entry_.share_of = "fma_peak";
        entry_.gtest_prefix = "Sgemm";
        entry_.profile = {"SgemmProfile.*", "regex:sgemm_kernel", ""};
        entry_.timings = {{"single_cold", "events around one launch; L2 flushed before each sample", true, 1}};
        entry_.ceilings = {
            {"fma_peak", "n^3 fp32 FMAs in registers on every SM at full occupancy (the FMA units alone)"},
            {"device_copy", "cudaMemcpyAsync device to device of the bytes of A, B and C"},
        };
        entry_.baselines = {
            {"cublas_sgemm", "cuBLAS cublasGemmEx, fp32 (CUBLAS_COMPUTE_32F, default math mode: no TF32)"},
            {"cublas_sgemm_tf32", "cuBLAS cublasGemmEx, TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)"},
        };
        for (const sgemm::Step& s : sgemm::steps()) {
            StepEntry step{s.id,          s.title, s.file, s.name_space, "sgemm", s.same_operation, s.beyond_article,
                           {},            s.kernels, tiling_json(s.tiling)};
            step.needs = s.needs;
            for (const int n : measured_sizes) {
                if (s.accepts(n, n, n) && n <= s.max_timed_n) {
                    step.sizes.push_back({n, size_text(n)});
                }
            }
            entry_.steps.push_back(step);
        }
        // Every step is measured over the sizes above (the chapter's sweep); the bar is taken at 4096.
        entry_.headline = Headline{4096, "single_cold", entry_.steps.front().id, "10_autotuned"};
    }

    const ChapterEntry& entry() const override { return entry_; }

    nlohmann::json measure(MeasureContext& context, const std::vector<std::string>& step_ids) const override
    {
        nlohmann::json chapter = chapter_header(entry_);
        for (const char* kind : {"ceilings", "baselines", "steps", "autotune", "unsupported"}) {
            chapter[kind] = nlohmann::json::array();
        }
        // What this GPU cannot run is left out, and listed with the reason, once. The autotuning sweep times step 10's
        // kernel: it runs where step 10 does.
        std::vector<std::string> runnable;
        bool autotune_runs = true;
        for (const sgemm::Step& step : sgemm::steps()) {
            const std::string why = sgemm::unsupported_reason(step);
            if (std::string(step.id) == "10_autotuned") {
                autotune_runs = why.empty();
            }
            if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end()) {
                continue;
            }
            if (!why.empty()) {
                chapter["unsupported"].push_back({{"id", step.id}, {"reason", why}});
            } else {
                runnable.push_back(step.id);
            }
        }
        const sgemm::CublasSgemm cublas_fp32(false);
        const sgemm::CublasSgemm cublas_tf32(true);
        for (const int n : measured_sizes) {
            measure_size(context, runnable, n, cublas_fp32, cublas_tf32, autotune_runs, chapter);
        }
        add_share_of_ceiling(chapter);
        return chapter;
    }

private:
    void measure_size(MeasureContext& context, const std::vector<std::string>& step_ids, int n,
                      const sgemm::CublasSgemm& cublas_fp32, const sgemm::CublasSgemm& cublas_tf32,
                      bool autotune_runs, nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const TimingMode& mode = entry_.timings.front();
        const std::size_t elements = static_cast<std::size_t>(n) * n;
        const std::int64_t flops = 2 * static_cast<std::int64_t>(n) * n * n;
        const std::vector<float> A = sgemm::random_matrix(n, n, context.seed + 3 * n);
        const std::vector<float> B = sgemm::random_matrix(n, n, context.seed + 3 * n + 1);
        DeviceBuffer<float> d_A(elements);
        DeviceBuffer<float> d_B(elements);
        DeviceBuffer<float> d_C(elements);
        d_A.upload(A);
        d_B.upload(B);
        const auto nothing = [] {};

        {  // ceilings
            DeviceBuffer<float> d_sink(fma_floor_threads());
            const RowTiming fma = context.sampler.time("ceiling fma_peak", mode, nothing, [&] {
                return fma_floor(static_cast<double>(flops) / 2, d_sink.data(), stream);
            });
            nlohmann::json row = timing_row(fma, n, mode.id, std::nullopt, flops);
            add_reference_fields(row, entry_.ceilings[0]);
            chapter["ceilings"].push_back(row);

            DeviceBuffer<float> d_copy_in(3 * elements);
            DeviceBuffer<float> d_copy_out(3 * elements);
            d_copy_in.fill_bytes(0, stream);
            const RowTiming copy = context.sampler.time("ceiling device_copy", mode, nothing, [&] {
                return cudaMemcpyAsync(d_copy_out.data(), d_copy_in.data(), d_copy_in.bytes(),
                                       cudaMemcpyDeviceToDevice, stream);
            });
            row = timing_row(copy, n, mode.id, 2 * static_cast<std::int64_t>(d_copy_in.bytes()), std::nullopt);
            add_reference_fields(row, entry_.ceilings[1]);
            chapter["ceilings"].push_back(row);
        }

        // alpha = 1, beta = 0 throughout: C is written, never read, so every sample does the same work. C is
        // poisoned with NaN before each validating call: an element a kernel leaves unwritten, or a read of C, shows.
        const auto run_once = [&](const std::function<cudaError_t()>& launch) {
            d_C.fill_bytes(0xFF, stream);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            return d_C.download();
        };
        const auto fp32_call = [&] {
            return cublas_fp32(n, n, n, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream);
        };
        const Reference reference = make_reference(n, A, B, run_once(fp32_call), context.seed);
        const auto validate = [&](const std::function<cudaError_t()>& launch, bool tf32, nlohmann::json& row) {
            const double tolerance = tf32 ? sgemm::tf32_tolerance(n) : sgemm::fp32_tolerance(n);
            const sgemm::Comparison c = sgemm::compare(run_once(launch), reference.values, tolerance);
            row["validated"] = c.within_tolerance();
            row["validation"] = (c.within_tolerance() ? "within " : "NOT within ") + format_tolerance(tolerance) +
                                " x max|C| of " + reference.source + "; worst " + c.describe(n);
            row["accuracy"] = {{"max_rel", c.max_rel}, {"tolerance_rel", tolerance}};
        };

        const std::pair<const sgemm::CublasSgemm*, bool> libraries[] = {{&cublas_fp32, false}, {&cublas_tf32, true}};
        for (std::size_t i = 0; i < 2; ++i) {
            const sgemm::CublasSgemm& library = *libraries[i].first;
            const auto call = [&] { return library(n, n, n, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream); };
            nlohmann::json row = timing_row(context.sampler.time(entry_.baselines[i].id, mode, nothing, call), n,
                                            mode.id, std::nullopt, flops);
            add_reference_fields(row, entry_.baselines[i]);
            validate(call, libraries[i].second, row);
            chapter["baselines"].push_back(row);
        }

        for (const sgemm::Step& step : sgemm::steps()) {
            if (std::find(step_ids.begin(), step_ids.end(), step.id) == step_ids.end() || !step.accepts(n, n, n) ||
                n > step.max_timed_n) {
                continue;
            }
            const StepEntry& registry_step = find_step(entry_, step.id);
            const auto call = [&] { return step.sgemm(n, n, n, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream); };
            nlohmann::json row =
                timing_row(context.sampler.time(step.id, mode, nothing, call), n, mode.id, std::nullopt, flops);
            add_step_fields(row, registry_step, context.tests_of(entry_, registry_step));
            validate(call, !step.same_operation, row);
            chapter["steps"].push_back(row);
        }

        if (n == main_size && autotune_runs) {
            for (const sgemm::AutotuneCandidate& candidate : sgemm::autotune_candidates()) {
                if (n % candidate.multiple_m != 0 || n % candidate.multiple_n != 0 || n % candidate.multiple_k != 0) {
                    continue;
                }
                const auto call = [&] {
                    return candidate.sgemm(n, n, n, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream);
                };
                nlohmann::json row = timing_row(context.sampler.time("autotune " + candidate.id, mode, nothing, call),
                                                n, mode.id, std::nullopt, flops);
                row["id"] = candidate.id;
                nlohmann::json config = tiling_json(candidate.tiling);
                config["min_blocks"] = candidate.min_blocks;
                row["config"] = config;
                row["chosen"] = candidate.chosen;
                validate(call, false, row);
                row["resources"] = nlohmann::json::array({runtime_resources_json(candidate.kernel)});
                chapter["autotune"].push_back(row);
            }
        }
    }

    //! The double-precision product for small sizes; above, cuBLAS's product checked at sampled elements.
    static Reference make_reference(int n, const std::vector<float>& A, const std::vector<float>& B,
                                    const std::vector<float>& cublas_result, std::uint64_t seed)
    {
        const std::vector<float> no_C;
        if (n <= full_reference_max) {
            return {sgemm::reference_gemm(n, n, n, 1.0, A, B, 0.0, no_C), "the product computed in double on the CPU"};
        }
        const std::vector<std::size_t> where = sgemm::sample_indices(n, n, sampled_elements, seed + n);
        const std::vector<double> exact = sgemm::reference_elements(n, n, n, 1.0, A, B, 0.0, no_C, where);
        std::vector<float> sampled(where.size());
        for (std::size_t i = 0; i < where.size(); ++i) {
            sampled[i] = cublas_result[where[i]];
        }
        const sgemm::Comparison check = sgemm::compare(sampled, exact, sgemm::fp32_tolerance(n));
        if (!check.within_tolerance()) {
            throw std::runtime_error("cuBLAS's fp32 product at " + size_text(n) +
                                     " is not within the fp32 tolerance of the double product at sampled elements: " +
                                     check.describe(1));
        }
        return {std::vector<double>(cublas_result.begin(), cublas_result.end()),
                "cuBLAS fp32 (itself within " + format_tolerance(sgemm::fp32_tolerance(n)) + " of double at " +
                    std::to_string(where.size()) + " sampled elements, max rel " + format_tolerance(check.max_rel) +
                    ")"};
    }

    static std::string format_tolerance(double value)
    {
        char text[32];
        std::snprintf(text, sizeof text, "%.2g", value);
        return text;
    }

    ChapterEntry entry_;
};

}  // namespace

std::unique_ptr<Chapter> make_sgemm_chapter() { return std::make_unique<SgemmChapter>(); }

}  // namespace stepwise
