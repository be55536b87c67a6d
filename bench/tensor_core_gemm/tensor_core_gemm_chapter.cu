// The tensor-core GEMM chapter of the timing program: registry entry, the tensor-core and copy ceilings, cuBLAS in
// bf16 (its default call, cuBLASLt's fastest algorithm and CUTLASS's fastest configuration, each picked per shape),
// every step at 4096^3, the steps that take any shape and the libraries over a sweep of sizes and at a transformer
// layer's shapes, and the autotuning sweep of the final step's template at the main size, at 1024^3 and at
// 8192 x 8192 x 2048.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/step_loop.hpp"
#include "sgemm/sgemm_reference.hpp"
#include "tensor_core_gemm/tensor_core_gemm_autotune.hpp"
#include "tensor_core_gemm/tensor_core_gemm_cutlass.hpp"
#include "tensor_core_gemm/tensor_core_gemm_libraries.hpp"
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
//! The sweep: every power of two from 512 to 8192, sizes between them whose tiles fill the SMs unevenly, and sizes
//! that are multiples of no tile.
constexpr int sweep_sizes[] = {512, 768, 1000, 1024, 1536, 2048, 3072, 4095, 4097, 8192};
//! The steps that take any shape (9 on) are swept and run at the transformer shapes, so that each one's gain over
//! the step before at every size is in the same run. Step 8 takes step 7's multiples of its tiles: the main size only.
const std::vector<std::string> swept_steps = {"09_any_shape",   "10_ping_pong_consumers",   "11_split_columns",
                                              "12_two_loaders", "13_tile_choice_by_rounds", "14_three_consumer_tiles"};
const std::vector<std::string> swept_others = {"cublas_gemm_bf16", "cublaslt_gemm_bf16_best", "cutlass_gemm_bf16",
                                               "tensor_peak"};

//! @brief M x N x K of one product.
struct Shape {
    int M, N, K;
};
//! A transformer layer's products, tokens x outputs x inputs (an MLP's up and down projections of a model of width
//! 4096 and 14336 hidden units, a batch of 8192 tokens through a width of 2048, and 16384 tokens into 1024 outputs).
constexpr Shape transformer_shapes[] = {
    {4096, 14336, 4096}, {4096, 4096, 14336}, {8192, 8192, 2048}, {16384, 1024, 4096}};
//! The registry's n of a shape: n itself for a cube, M * 10^10 + N * 10^5 + K for the others (shape_of inverts it).
constexpr std::int64_t key_of(const Shape& s)
{
    return s.M == s.N && s.N == s.K ? s.M
                                    : s.M * std::int64_t{10000000000} + s.N * std::int64_t{100000} + s.K;
}
Shape shape_of(std::int64_t key)
{
    if (key < 100000) {
        const int n = static_cast<int>(key);
        return {n, n, n};
    }
    return {static_cast<int>(key / 10000000000), static_cast<int>(key / 100000 % 100000),
            static_cast<int>(key % 100000)};
}
//! How cuBLASLt's algorithms and CUTLASS's configurations are picked at each shape before their rows are timed.
constexpr const PickRule& pick_rule = library_pick_rule;
//! The autotuning sweep runs at these sizes (registry keys): the main one, a small one and a transformer's shape,
//! where the launcher picks other tiles.
constexpr std::int64_t autotune_sizes[] = {1024, main_size, key_of({8192, 8192, 2048})};
//! Up to this size the whole product is computed in double on the CPU; above, at sampled elements (and every element
//! of a result must then be finite: C is poisoned with NaN before each validating call).
constexpr int full_reference_max = 1024;
constexpr std::size_t sampled_elements = 4096;

std::string size_text(const Shape& s)
{
    return std::to_string(s.M) + " x " + std::to_string(s.N) + " x " + std::to_string(s.K);
}
ProblemSize problem_size(const Shape& s)
{
    ProblemSize size{key_of(s), size_text(s)};
    if (key_of(s) != s.M) {
        size.shape = {s.M, s.N, s.K};
    }
    return size;
}

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
        // The tests of the libraries' GEMMs (cuBLAS, cuBLASLt, CUTLASS) at small sizes: their kernels are not ours.
        entry_.racecheck_exclude = {{"TensorCoreGemmCublas*", "cuBLAS's and cuBLASLt's kernels, not ours: racecheck "
                                                              "reports hazards in cuBLAS's"},
                                    {"TensorCoreGemmCutlass*", "CUTLASS's kernels, not ours"}};
        entry_.sass = true;  // the page counts HMMA against HGMMA
        // Under a sustained tensor-core load the card's power limit, not a passing throttle, sets the SM clock (the
        // H200's settles below 90 % of its highest at 8192^3): every sample is kept, and each row records its clocks.
        // That clock follows what ran before, so at each size the libraries and the steps are sampled in turn.
        entry_.timings = {{"single_cold",
                           "events around one launch; L2 flushed before each sample; samples kept at any SM clock; "
                           "at each size the libraries and the steps sampled in turn",
                           true, 1, 0.0}};
        entry_.ceilings = {
            {"tensor_peak", "the product's M N K bf16 multiply-adds by wgmma from shared memory on every SM (the "
                            "tensor cores alone)"},
            {"device_copy", "cudaMemcpyAsync device to device of the bytes of A, B and C"},
        };
        entry_.baselines = {
            {"cublas_gemm_bf16",
             "cuBLAS cublasGemmEx: bf16 A, B and C, CUBLAS_COMPUTE_32F (fp32 accumulation), the same layouts"},
            {"cublaslt_gemm_bf16_best",
             "cuBLASLt cublasLtMatmul, the same operation with a 32 MiB workspace: the fastest of up to 16 algorithms "
             "of its heuristic at each shape (timed in turn: 10 cold launches each, the 3 fastest 30 more)"},
            {"cutlass_gemm_bf16",
             "CUTLASS " + tc::cutlass_version() + " sm90 TMA warp-specialized GEMM (CollectiveBuilder): the fastest "
             "of its configurations here at each shape (timed in turn: 10 cold launches each, the 3 fastest 30 more)"},
        };
        for (const tc::Step& s : tc::steps()) {
            StepEntry step{s.id, s.title, s.file, s.name_space, "gemm", true, true, {}, s.kernels};
            step.needs = s.needs;
            step.formerly = s.formerly;
            if (s.accepts(main_size, main_size, main_size)) {
                step.sizes.push_back(problem_size({main_size, main_size, main_size}));
            }
            if (std::find(swept_steps.begin(), swept_steps.end(), s.id) != swept_steps.end()) {
                for (const Shape& shape : transformer_shapes) {
                    step.sizes.push_back(problem_size(shape));
                }
            }
            entry_.steps.push_back(step);
        }
        std::vector<std::string> sweep_rows = swept_steps;
        sweep_rows.insert(sweep_rows.end(), swept_others.begin(), swept_others.end());
        Sweep sweep{{}, sweep_rows, 3 * sizeof(tc::bf16), 2};  // A, B and C: 3 n^2 bf16
        for (const int n : sweep_sizes) {
            sweep.sizes.push_back(problem_size({n, n, n}));
        }
        add_sweep(entry_, std::move(sweep));
        // CUTLASS's TMA epilogue needs the rows of C (N) and of A and B (K) 16 bytes apart: not at 4095 and 4097.
        std::vector<std::int64_t>& cutlass_sizes = entry_.baselines[2].sizes;
        cutlass_sizes.erase(std::remove_if(cutlass_sizes.begin(), cutlass_sizes.end(),
                                           [](std::int64_t key) {
                                               const Shape s = shape_of(key);
                                               return s.N % 8 != 0 || s.K % 8 != 0;
                                           }),
                            cutlass_sizes.end());
        // The front page sets the final step beside cuBLASLt's best: cuBLAS's default call at 4096^3 runs at two
        // speeds, and which one a run's median catches changes from run to run (the page's table of runs).
        entry_.headline = Headline{main_size, "single_cold", entry_.steps.front().id, entry_.steps.back().id,
                                   "cublaslt_gemm_bf16_best"};
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
        const std::string peak_reason = tc::tensor_peak_unsupported(chapter["unsupported"]);
        const std::string cutlass_reason = tc::cutlass_unavailable_reason();
        if (!cutlass_reason.empty()) {
            chapter["unsupported"].push_back({{"id", "cutlass_gemm_bf16"}, {"reason", cutlass_reason}});
        }
        Libraries libraries;
        for (const std::int64_t key : all_sizes(entry_)) {
            measure_size(context, runnable, key, libraries, peak_reason.empty(), cutlass_reason.empty(), chapter);
        }
    }

private:
    //! The library baselines (their picks flush L2 with the sampler's buffer, as the rows are timed).
    struct Libraries {
        tc::CublasGemmBf16 cublas;
        tc::CublasLtGemmBf16Best cublaslt;
    };

    //! A launch of CUTLASS's fastest configuration at a shape, and what was picked.
    struct CutlassPick {
        std::function<cudaError_t()> launch;
        std::vector<PickedCandidate> candidates;
        std::size_t kept = 0;
    };

    //! Times the configurations that take `s` in turn and returns the fastest's launch (its workspace in `workspace`).
    static CutlassPick pick_cutlass(const Shape& s, const tc::bf16* d_A, const tc::bf16* d_B, tc::bf16* d_C,
                                    DeviceBuffer<unsigned char>& workspace, DeviceBuffer<unsigned char>& flush,
                                    cudaStream_t stream)
    {
        std::vector<const tc::CutlassGemm*> configs;
        std::size_t workspace_bytes = 1;
        for (const tc::CutlassGemm& config : tc::cutlass_gemms()) {
            if (config.accepts(s.M, s.N, s.K)) {
                configs.push_back(&config);
                workspace_bytes = std::max(workspace_bytes, config.workspace_bytes(s.M, s.N, s.K));
            }
        }
        if (configs.empty()) {
            throw std::runtime_error("no CUTLASS configuration takes " + size_text(s));
        }
        workspace = DeviceBuffer<unsigned char>(workspace_bytes);
        std::vector<std::function<cudaError_t()>> launches;
        for (const tc::CutlassGemm* config : configs) {
            launches.push_back([=, &workspace] {
                return config->gemm(s.M, s.N, s.K, d_A, d_B, d_C, workspace.data(), workspace.size(), stream);
            });
        }
        const PickTimes times = pick_fastest(launches, pick_rule, flush.data(), flush.size(), stream);
        CutlassPick pick;
        for (std::size_t i = 0; i < configs.size(); ++i) {
            pick.candidates.push_back({configs[i]->id + " (" + configs[i]->description + ")", times.median_ms[i],
                                       times.final_median_ms[i]});
        }
        pick.kept = times.kept;
        pick.launch = launches[pick.kept];
        return pick;
    }

    void measure_size(MeasureContext& context, const std::vector<std::string>& runnable, std::int64_t key,
                      Libraries& libraries, bool peak_supported, bool cutlass_supported, nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        DeviceBuffer<unsigned char>& flush = context.sampler.l2_flush();  // what the libraries' picks flush L2 with
        const TimingMode& mode = entry_.timings.front();
        const Shape s = shape_of(key);
        const std::size_t a_elements = static_cast<std::size_t>(s.M) * s.K;
        const std::size_t b_elements = static_cast<std::size_t>(s.N) * s.K;
        const std::size_t elements = static_cast<std::size_t>(s.M) * s.N;
        const std::int64_t flops = 2 * static_cast<std::int64_t>(s.M) * s.N * s.K;
        const std::vector<tc::bf16> A = tc::random_matrix(s.M, s.K, context.seed + 3 * key);
        const std::vector<tc::bf16> B = tc::random_matrix(s.N, s.K, context.seed + 3 * key + 1);
        DeviceBuffer<tc::bf16> d_A(a_elements);
        DeviceBuffer<tc::bf16> d_B(b_elements);
        DeviceBuffer<tc::bf16> d_C(elements);
        d_A.upload(A);
        d_B.upload(B);
        const auto nothing = [] {};

        const std::int64_t n = key;
        if (peak_supported && measured_at(entry_, "tensor_peak", n)) {
            DeviceBuffer<float> d_sink(tc::tensor_peak_threads());
            const auto peak = [&] { return tc::tensor_peak(static_cast<double>(flops) / 2, d_sink.data(), stream); };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[0],
                               {peak, n, std::nullopt, flops});
        }
        if (measured_at(entry_, "device_copy", n)) {
            DeviceBuffer<tc::bf16> d_copy_in(a_elements + b_elements + elements);
            DeviceBuffer<tc::bf16> d_copy_out(a_elements + b_elements + elements);
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
        const auto cublas_call = [&] {
            return libraries.cublas(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(), stream);
        };
        const auto cublaslt_call = [&] {
            return libraries.cublaslt(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(), stream);
        };
        const Reference reference = make_reference(s, A, B, context.seed);
        const tc::Tolerance tolerance = tc::exact_tolerance(s.K);
        const auto validation_of = [&](const std::vector<float>& result) {
            const Check c = check(result, reference, tolerance);
            const bool sampled = !reference.where.empty();
            return Validation{c.passed(),
                              (c.passed() ? "within " : "NOT within ") + tolerance_text(tolerance) + " of " +
                                  reference.source + "; worst " + c.at_reference.describe(sampled ? 1 : s.N) +
                                  (sampled ? "; " + std::to_string(c.nan_elements) + " of the " +
                                                 std::to_string(elements) + " elements NaN"
                                           : ""),
                              {{"max_rel", c.at_reference.max_rel},
                               {"tolerance_rel", tolerance.of_max},
                               {"tolerance_of_element", tolerance.of_element},
                               {"over_tolerance", c.at_reference.over_tolerance}}};
        };

        // cuBLASLt's algorithms and CUTLASS's configurations are picked first; then the libraries and the steps are
        // sampled in turn (see the timing mode), and each is validated.
        std::vector<Sampler::TimedCall> calls;
        std::vector<const ReferenceEntry*> timed_libraries;
        const auto add_library = [&](const ReferenceEntry& library, std::function<cudaError_t()> launch) {
            timed_libraries.push_back(&library);
            calls.push_back({library.id + " at " + problem_text(entry_, n), std::move(launch)});
        };
        if (measured_at(entry_, "cublas_gemm_bf16", n)) {
            add_library(entry_.baselines[0], cublas_call);
        }
        std::pair<std::vector<PickedCandidate>, std::size_t> cublaslt_pick;
        if (measured_at(entry_, "cublaslt_gemm_bf16_best", n)) {
            cublaslt_pick = libraries.cublaslt.pick(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(), pick_rule,
                                                    flush.data(), flush.size(), stream);
            add_library(entry_.baselines[1], cublaslt_call);
        }
        DeviceBuffer<unsigned char> cutlass_workspace;
        CutlassPick cutlass_pick;
        if (cutlass_supported && measured_at(entry_, "cutlass_gemm_bf16", n)) {
            cutlass_pick = pick_cutlass(s, d_A.data(), d_B.data(), d_C.data(), cutlass_workspace, flush,
                                        stream);
            add_library(entry_.baselines[2], cutlass_pick.launch);
        }
        std::vector<const tc::Step*> timed_steps;
        for (const tc::Step& step : tc::steps()) {
            if (measures_step(entry_, runnable, step.id, n)) {
                timed_steps.push_back(&step);
                calls.push_back({std::string(step.id) + " at " + problem_text(entry_, n), [&, gemm = step.gemm] {
                                     return gemm(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(), stream);
                                 }});
            }
        }
        const std::vector<RowTiming> timings = context.sampler.time_in_turn(calls, mode, nothing);
        std::size_t next = 0;
        for (const ReferenceEntry* library : timed_libraries) {
            nlohmann::json row = timing_row(timings[next], n, mode.id, std::nullopt, flops);
            add_reference_fields(row, *library);
            if (library->id == "cublaslt_gemm_bf16_best") {
                add_pick(row, cublaslt_pick.first, cublaslt_pick.second, pick_rule);
            } else if (library->id == "cutlass_gemm_bf16") {
                add_pick(row, cutlass_pick.candidates, cutlass_pick.kept, pick_rule);
            }
            // A library is held to the same tolerance as the steps.
            add_validation(row, validation_of(run_once(calls[next].launch)));
            chapter["baselines"].push_back(row);
            ++next;
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
            // The configurations are sampled in turn, as the steps and the libraries are: one after the other, a
            // configuration timed after a hot one would run at a lower clock than one timed after a cool one.
            const std::vector<tc::AutotuneCandidate>& candidates = tc::autotune_candidates();
            std::vector<Sampler::TimedCall> tuned;
            for (const tc::AutotuneCandidate& candidate : candidates) {
                tuned.push_back({"autotune " + candidate.id + " at " + problem_text(entry_, n),
                                 [&, gemm = candidate.gemm] {
                                     return gemm(s.M, s.N, s.K, d_A.data(), d_B.data(), d_C.data(), stream);
                                 }});
            }
            const std::vector<RowTiming> tuned_timings = context.sampler.time_in_turn(tuned, mode, nothing);
            for (std::size_t i = 0; i < candidates.size(); ++i) {
                nlohmann::json row = timing_row(tuned_timings[i], n, mode.id, std::nullopt, flops);
                row["id"] = candidates[i].id;
                row["config"] = candidates[i].config;
                row["chosen"] = candidates[i].chosen_for(s.M, s.N);
                row["used_by"] = tc::steps().back().id;
                add_validation(row, validation_of(run_once(tuned[i].launch)));
                row["resources"] = nlohmann::json::array({runtime_resources_json(candidates[i].kernel)});
                chapter["autotune"].push_back(row);
            }
        }
    }

    //! The double-precision product of the bf16 inputs: whole for small sizes, at sampled elements above.
    static Reference make_reference(const Shape& s, const std::vector<tc::bf16>& A, const std::vector<tc::bf16>& B,
                                    std::uint64_t seed)
    {
        const std::int64_t full_max = std::int64_t{full_reference_max} * full_reference_max * full_reference_max;
        if (std::int64_t{s.M} * s.N * s.K <= full_max) {
            return {{}, tc::reference_gemm(s.M, s.N, s.K, A, B), "the product of the bf16 inputs in double"};
        }
        std::vector<std::size_t> where = sgemm::sample_indices(s.M, s.N, sampled_elements, seed + key_of(s));
        std::vector<double> values = tc::reference_elements(s.M, s.N, s.K, A, B, where);
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
