// The SGEMM chapter of the timing program: registry entry, the FMA and copy ceilings, cuBLAS in fp32 and TF32,
// every step over a sweep of sizes, and the autotuning sweep of step 11's template.
#include "core/chapter.hpp"
#include "core/cuda_check.hpp"
#include "core/device_buffer.hpp"
#include "core/floor_kernels.hpp"
#include "core/step_loop.hpp"
#include "sgemm/sgemm_autotune.hpp"
#include "sgemm/sgemm_reference.hpp"
#include "sgemm/sgemm_steps.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace stepwise {
namespace {

//! M = N = K of every size measured: powers of two from 128 to 8192, and 1000, 4095 and 4097 for the steps that take
//! any size. 4096 is the chapter's main size, where the bar is taken.
constexpr int measured_sizes[] = {128, 256, 512, 1000, 1024, 2048, 4095, 4096, 4097, 8192};

//! An M x N x K problem.
struct Shape {
    int m, n, k;
    bool cube() const { return m == n && n == k; }
};

//! Rectangular problems, measured for the final fp32 step (and the ceilings and cuBLAS): a short K with many tiles,
//! and a long K with few tiles of C, one way and the other.
constexpr Shape rectangular_shapes[] = {{8192, 8192, 128}, {128, 8192, 8192}, {8192, 128, 8192}};
constexpr const char* rectangular_steps[] = {"11_any_shape_any_size"};

//! Where the autotuning sweep runs: the main size, sizes where its launcher picks smaller tiles or splits K, one that
//! is a multiple of no tile, and the rectangular problems.
constexpr Shape autotune_shapes[] = {{256, 256, 256},   {512, 512, 512},   {1024, 1024, 1024}, {4096, 4096, 4096},
                                     {4097, 4097, 4097}, {8192, 8192, 128}, {128, 8192, 8192}, {8192, 128, 8192}};

//! Up to this many FMAs (1024^3) the whole product is computed in double on the CPU; above, cuBLAS's fp32 result is
//! checked at sampled elements against double and is then the reference for every step.
constexpr std::int64_t full_reference_max = std::int64_t{1024} * 1024 * 1024;
constexpr std::size_t sampled_elements = 2048;

//! The registry's and the measurement file's `n` of a problem: M for M = N = K; else M * 10^12 + N * 10^6 + K (each
//! below 10^6), a key that names the shape, which the size's `shape` also gives.
std::int64_t size_key(Shape s)
{
    return s.cube() ? s.m : s.m * std::int64_t{1000000000000} + s.n * std::int64_t{1000000} + s.k;
}

std::string size_text(Shape s)
{
    return std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k);
}

ProblemSize problem_size(Shape s)
{
    ProblemSize size{size_key(s), size_text(s)};
    if (!s.cube()) {
        size.shape = {s.m, s.n, s.k};
    }
    return size;
}

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

class SgemmChapter final : public ChapterBase {
public:
    SgemmChapter()
        : ChapterBase("sgemm", "SGEMM: from one thread per element to cuBLAS", "fma_peak", "Sgemm")
    {
        entry_.profile = {"SgemmProfile.*", "regex:sgemm_kernel", ""};
        entry_.timings = {single_cold_timing()};
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
            step.formerly = s.formerly;
            for (const int n : measured_sizes) {
                if (s.accepts(n, n, n) && n <= s.max_timed_n) {
                    step.sizes.push_back(problem_size({n, n, n}));
                }
            }
            const auto named = [&](const char* id) { return step.id == id; };
            if (std::any_of(std::begin(rectangular_steps), std::end(rectangular_steps), named)) {
                for (const Shape& shape : rectangular_shapes) {
                    if (s.accepts(shape.m, shape.n, shape.k)) {
                        step.sizes.push_back(problem_size(shape));
                    }
                }
            }
            entry_.steps.push_back(step);
        }
        // Every step is measured over the sizes above (the chapter's sweep); the bar is taken at 4096.
        entry_.headline = Headline{4096, "single_cold", entry_.steps.front().id, "11_any_shape_any_size"};
    }

    void measure_rows(MeasureContext& context, const std::vector<std::string>& step_ids,
                      nlohmann::json& chapter) const override
    {
        for (const char* kind : {"autotune", "unsupported"}) {
            chapter[kind] = nlohmann::json::array();
        }
        // What this GPU cannot run is left out, and listed with the reason, once. The autotuning sweep times step 11's
        // kernel: it runs where step 11 does.
        const std::vector<std::string> runnable =
            runnable_steps(sgemm::steps(), step_ids, sgemm::unsupported_reason, chapter["unsupported"]);
        bool autotune_runs = true;
        for (const sgemm::Step& step : sgemm::steps()) {
            if (std::string(step.id) == "11_any_shape_any_size") {
                autotune_runs = sgemm::unsupported_reason(step).empty();
            }
        }
        const sgemm::CublasSgemm cublas_fp32(false);
        const sgemm::CublasSgemm cublas_tf32(true);
        for (const int n : measured_sizes) {
            measure_shape(context, runnable, {n, n, n}, cublas_fp32, cublas_tf32, autotune_runs, chapter);
        }
        for (const Shape& shape : rectangular_shapes) {
            measure_shape(context, runnable, shape, cublas_fp32, cublas_tf32, autotune_runs, chapter);
        }
    }

private:
    void measure_shape(MeasureContext& context, const std::vector<std::string>& step_ids, Shape shape,
                       const sgemm::CublasSgemm& cublas_fp32, const sgemm::CublasSgemm& cublas_tf32,
                       bool autotune_runs, nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const TimingMode& mode = entry_.timings.front();
        const int M = shape.m, N = shape.n, K = shape.k;
        const std::int64_t n = size_key(shape);
        const std::int64_t flops = 2 * static_cast<std::int64_t>(M) * N * K;
        const std::uint64_t seed = context.seed + 3 * static_cast<std::uint64_t>(M) + 5 * N + 7 * K;
        const std::vector<float> A = sgemm::random_matrix(M, K, seed);
        const std::vector<float> B = sgemm::random_matrix(K, N, seed + 1);
        DeviceBuffer<float> d_A(A.size());
        DeviceBuffer<float> d_B(B.size());
        DeviceBuffer<float> d_C(static_cast<std::size_t>(M) * N);
        d_A.upload(A);
        d_B.upload(B);
        // Rows of a rectangular problem say its M, N, K (their n is a key: see size_key).
        const auto timed_row = [&](const RowTiming& timing, std::optional<std::int64_t> bytes,
                                   std::optional<std::int64_t> row_flops) {
            nlohmann::json row = timing_row(timing, n, mode.id, bytes, row_flops);
            if (!shape.cube()) {
                row["shape"] = {M, N, K};
            }
            return row;
        };

        // Rows of a rectangular problem say its M, N, K here too.
        const auto shaped = [&](TimedRow row) {
            if (!shape.cube()) {
                row.fields["shape"] = {M, N, K};
            }
            return row;
        };

        {  // ceilings
            DeviceBuffer<float> d_sink(fma_floor_threads());
            const auto fma = [&] { return fma_floor(static_cast<double>(flops) / 2, d_sink.data(), stream); };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[0],
                               shaped({fma, n, std::nullopt, flops}));

            const std::size_t floats = A.size() + B.size() + d_C.size();
            DeviceBuffer<float> d_copy_in(floats);
            DeviceBuffer<float> d_copy_out(floats);
            d_copy_in.fill_bytes(0, stream);
            const auto copy = [&] {
                return cudaMemcpyAsync(d_copy_out.data(), d_copy_in.data(), d_copy_in.bytes(),
                                       cudaMemcpyDeviceToDevice, stream);
            };
            add_reference_rows(chapter, "ceilings", context, entry_, entry_.ceilings[1],
                               shaped({copy, n, 2 * static_cast<std::int64_t>(d_copy_in.bytes())}));
        }

        // alpha = 1, beta = 0 throughout: C is written, never read, so every sample does the same work. C is
        // poisoned with NaN before each checking call: an element a kernel leaves unwritten, or a read of C, shows.
        const auto run_once = [&](const std::function<cudaError_t()>& launch) {
            d_C.fill_bytes(0xFF, stream);
            STEPWISE_CUDA_CHECK(launch());
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            return d_C.download();
        };
        const auto fp32_call = [&] {
            return cublas_fp32(M, N, K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream);
        };
        const Reference reference = make_reference(shape, A, B, run_once(fp32_call), context.seed);
        // A row of this shape: timed, then checked against the reference (TF32's tolerance for TF32 rows).
        const auto gemm_row = [&](const std::function<cudaError_t()>& launch, bool tf32) {
            TimedRow row = shaped({launch, n, std::nullopt, flops});
            row.prepare_check = [&] { d_C.fill_bytes(0xFF, stream); };
            row.check = [&, tf32] {
                const double tolerance = tf32 ? sgemm::tf32_tolerance(K) : sgemm::fp32_tolerance(K);
                const sgemm::Comparison c = sgemm::compare(d_C.download(), reference.values, tolerance);
                return Validation{c.within_tolerance(),
                                  (c.within_tolerance() ? "within " : "NOT within ") + format_tolerance(tolerance) +
                                      " x max|C| of " + reference.source + "; worst " + c.describe(N),
                                  {{"max_rel", c.max_rel}, {"tolerance_rel", tolerance}}};
            };
            return row;
        };
        const auto validate = [&](const std::function<cudaError_t()>& launch, bool tf32, nlohmann::json& row) {
            add_validation(row, run_check(stream, gemm_row(launch, tf32)));
        };

        const std::pair<const sgemm::CublasSgemm*, bool> libraries[] = {{&cublas_fp32, false}, {&cublas_tf32, true}};
        for (std::size_t i = 0; i < 2; ++i) {
            const sgemm::CublasSgemm& library = *libraries[i].first;
            const auto call = [&] { return library(M, N, K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream); };
            add_reference_rows(chapter, "baselines", context, entry_, entry_.baselines[i],
                               gemm_row(call, libraries[i].second));
        }

        for (const sgemm::Step& step : sgemm::steps()) {
            if (!measures_step(entry_, step_ids, step.id, n)) {
                continue;
            }
            const auto call = [&] { return step.sgemm(M, N, K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream); };
            add_step_rows(chapter, context, entry_, step.id, gemm_row(call, !step.same_operation));
        }

        const auto autotuned_here = [&](const Shape& s) { return s.m == M && s.n == N && s.k == K; };
        if (autotune_runs && std::any_of(std::begin(autotune_shapes), std::end(autotune_shapes), autotuned_here)) {
            measure_autotune(context, shape, d_A, d_B, d_C, timed_row, validate, chapter);
        }
    }

    //! Every candidate configuration of step 11's kernel with the K splits worth timing at this shape, each exactly
    //! as step 11's launcher runs it (autotuned::sgemm_with, the scaling of C included where K is split); the row
    //! the launcher runs is the chosen one.
    template <class TimedRowOf, class Validate>
    void measure_autotune(MeasureContext& context, Shape shape, DeviceBuffer<float>& d_A, DeviceBuffer<float>& d_B,
                          DeviceBuffer<float>& d_C, const TimedRowOf& timed_row, const Validate& validate,
                          nlohmann::json& chapter) const
    {
        const cudaStream_t stream = context.stream;
        const TimingMode& mode = entry_.timings.front();
        const int M = shape.m, N = shape.n, K = shape.k;
        const std::int64_t flops = 2 * static_cast<std::int64_t>(M) * N * K;
        int device = 0;
        int sm_count = 0;
        STEPWISE_CUDA_CHECK(cudaGetDevice(&device));
        STEPWISE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
        int chosen = 0;
        const auto add_row = [&](const sgemm::AutotuneCandidate& candidate, int splits, const std::string& id,
                                 const std::function<cudaError_t()>& call, bool launcher_runs, nlohmann::json config) {
            const std::string what = "autotune " + id + " at " + problem_text(entry_, size_key(shape));
            nlohmann::json row = timed_row(context.sampler.time(what, mode, [] {}, call), std::nullopt, flops);
            row["id"] = id;
            config.update(tiling_json(candidate.tiling));
            config["min_blocks"] = candidate.min_blocks;
            config["bursts"] = candidate.bursts;
            config["split_k"] = splits;
            row["config"] = config;
            row["chosen"] = launcher_runs;
            row["used_by"] = "11_any_shape_any_size";
            chosen += launcher_runs ? 1 : 0;
            validate(call, false, row);
            const int path = candidate.path(M, N, K, splits, d_B.data(), d_C.data());
            row["resources"] = nlohmann::json::array({runtime_resources_json(candidate.kernels.at(path))});
            chapter["autotune"].push_back(row);
        };
        for (const sgemm::AutotuneCandidate& candidate : sgemm::autotune_candidates()) {
            for (const int splits : sgemm::autotune_splits(candidate, M, N, K, sm_count)) {
                const auto call = [&] {
                    return candidate.sgemm(M, N, K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), splits, stream);
                };
                add_row(candidate, splits, candidate.id + (splits > 1 ? "_split" + std::to_string(splits) : ""), call,
                        sgemm::launcher_runs(candidate, splits, M, N, K, sm_count), nlohmann::json::object());
            }
        }
        if (const std::optional<sgemm::WholeWaves> waves = sgemm::launcher_whole_waves(M, N, K, sm_count)) {
            // The launcher's own run: the rows of whole waves in one configuration, the rest planned anew.
            const auto call = [&] {
                return sgemm::launcher_sgemm(M, N, K, 1.f, d_A.data(), d_B.data(), 0.f, d_C.data(), stream);
            };
            add_row(*waves->candidate, 1, waves->candidate->id + "_rows" + std::to_string(waves->rows) + "_then_rest",
                    call, true, {{"whole_wave_rows", waves->rows}});
        }
        if (chosen != 1) {
            throw std::logic_error("SGEMM autotuning sweep at " + size_text(shape) + ": " + std::to_string(chosen) +
                                   " rows are what step 11's launcher runs; list its configurations in "
                                   "bench/sgemm/sgemm_autotune.cu");
        }
    }

    //! The double-precision product for small problems; above, cuBLAS's product checked at sampled elements.
    static Reference make_reference(Shape shape, const std::vector<float>& A, const std::vector<float>& B,
                                    const std::vector<float>& cublas_result, std::uint64_t seed)
    {
        const int M = shape.m, N = shape.n, K = shape.k;
        const std::vector<float> no_C;
        if (static_cast<std::int64_t>(M) * N * K <= full_reference_max) {
            return {sgemm::reference_gemm(M, N, K, 1.0, A, B, 0.0, no_C), "the product computed in double on the CPU"};
        }
        const std::vector<std::size_t> where = sgemm::sample_indices(M, N, sampled_elements, seed + size_key(shape));
        const std::vector<double> exact = sgemm::reference_elements(M, N, K, 1.0, A, B, 0.0, no_C, where);
        std::vector<float> sampled(where.size());
        for (std::size_t i = 0; i < where.size(); ++i) {
            sampled[i] = cublas_result[where[i]];
        }
        const sgemm::Comparison check = sgemm::compare(sampled, exact, sgemm::fp32_tolerance(K));
        if (!check.within_tolerance()) {
            throw std::runtime_error("cuBLAS's fp32 product at " + size_text(shape) +
                                     " is not within the fp32 tolerance of the double product at sampled elements: " +
                                     check.describe(1));
        }
        return {std::vector<double>(cublas_result.begin(), cublas_result.end()),
                "cuBLAS fp32 (itself within " + format_tolerance(sgemm::fp32_tolerance(K)) + " of double at " +
                    std::to_string(where.size()) + " sampled elements, max rel " + format_tolerance(check.max_rel) +
                    ")"};
    }

    static std::string format_tolerance(double value)
    {
        char text[32];
        std::snprintf(text, sizeof text, "%.2g", value);
        return text;
    }
};

}  // namespace

std::unique_ptr<Chapter> make_sgemm_chapter() { return std::make_unique<SgemmChapter>(); }

}  // namespace stepwise
