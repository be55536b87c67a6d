// stepwise_bench: the timing program. Runs every selected step, its chapter's ceilings and baselines in one
// process, checks each step on the buffers it timed, and writes one measurement file (conf/measurement.schema.json).
#include "core/chapter.hpp"
#include "core/command_line.hpp"
#include "core/cuda_check.hpp"
#include "core/measurement_file.hpp"
#include "core/nvml.hpp"
#include "core/progress.hpp"
#include "core/resources.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

namespace {

using stepwise::Options;

//! Exits with a one-line reason unless a CUDA device can be used; with `json`, says so in one JSON object on stdout
//! (usable, and the reason or the GPU's name, slug, compute capability and SMs).
int probe(bool quiet, bool json = false)
{
    const std::string reason = stepwise::cuda_unavailable_reason();
    cudaDeviceProp prop{};
    if (reason.empty()) {
        STEPWISE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    }
    if (json) {
        const nlohmann::json out =
            reason.empty() ? nlohmann::json{{"usable", true},
                                            {"name", prop.name},
                                            {"slug", stepwise::slugify(prop.name)},
                                            {"compute_capability", std::to_string(prop.major) + "." +
                                                                       std::to_string(prop.minor)},
                                            {"sm_count", prop.multiProcessorCount}}
                           : nlohmann::json{{"usable", false}, {"reason", reason}};
        std::cout << out.dump() << '\n';
        return reason.empty() ? 0 : 1;
    }
    if (!reason.empty()) {
        std::fprintf(stderr, "stepwise_bench: no usable CUDA GPU (%s)\n", reason.c_str());
        return 1;
    }
    if (!quiet) {
        std::printf("%s (compute capability %d.%d, %d SMs)\n", prop.name, prop.major, prop.minor,
                    prop.multiProcessorCount);
    }
    return 0;
}

std::string version_text(int version) { return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10); }

std::string utc_now()
{
    const std::time_t now = std::time(nullptr);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    return text;
}

nlohmann::json read_gtest_report(const std::string& path)
{
    if (path.empty()) {
        throw stepwise::UsageError("measuring needs --gtest-report FILE: the GPU tests' JSON report of this run");
    }
    std::ifstream in(path);
    if (!in) {
        throw stepwise::UsageError("cannot read the GoogleTest report " + path);
    }
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw stepwise::UsageError("the GoogleTest report " + path + " is not JSON: " + e.what());
    }
}

//! What the SGEMM chapter's bounds and roofline are computed from: the device's limits, its boost clock and the
//! fp32 FMA units per SM of its architecture (a table, not a device property; null where unknown).
nlohmann::json device_limits(const cudaDeviceProp& prop, const stepwise::Nvml& nvml)
{
    std::optional<double> max_clock = nvml.max_sm_clock_mhz();
    if (!max_clock) {
        int khz = 0;
        if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) == cudaSuccess && khz > 0) {
            max_clock = khz / 1000.0;
        }
    }
    const std::optional<int> lanes = stepwise::fp32_lanes_per_sm(prop.major, prop.minor);
    return {{"max_sm_clock_mhz", max_clock ? nlohmann::json(*max_clock) : nlohmann::json(nullptr)},
            {"fp32_lanes_per_sm", lanes ? nlohmann::json(*lanes) : nlohmann::json(nullptr)},
            {"registers_per_sm", prop.regsPerMultiprocessor},
            {"max_registers_per_thread", 255},
            {"shared_memory_per_sm_bytes", prop.sharedMemPerMultiprocessor},
            {"shared_memory_per_block_optin_bytes", prop.sharedMemPerBlockOptin},
            {"max_threads_per_sm", prop.maxThreadsPerMultiProcessor},
            {"shared_memory_banks", 32},
            {"shared_memory_bank_bytes", 4}};
}

//! Every kernel of the given ptxas reports (the build writes one per CUDA source of the timing program).
std::vector<stepwise::CompiledKernel> read_ptxas_reports(const std::vector<std::string>& paths)
{
    std::vector<stepwise::CompiledKernel> out;
    for (const std::string& path : paths) {
        std::ifstream in(path);
        if (!in) {
            throw stepwise::UsageError("cannot read the ptxas report " + path);
        }
        std::ostringstream text;
        text << in.rdbuf();
        try {
            for (auto& k : stepwise::parse_ptxas_report(text.str(), path)) {
                out.push_back(std::move(k));
            }
        } catch (const std::runtime_error& e) {
            throw stepwise::UsageError(e.what());
        }
    }
    if (!paths.empty() && out.empty()) {
        throw stepwise::UsageError("the ptxas reports list no kernel at all (was the timing program compiled with "
                                   "--resource-usage?)");
    }
    return out;
}

void write_atomically(const std::filesystem::path& path, const std::string& text)
{
    if (path.has_parent_path()) {
        std::filesystem::create_directories(path.parent_path());
    }
    const std::filesystem::path partial = path.string() + ".partial";
    {
        std::ofstream out(partial);
        out << text << '\n';
        if (!out) {
            throw std::runtime_error("cannot write " + partial.string());
        }
    }
    std::filesystem::rename(partial, path);
}

//! The SM clock and the temperature now, as the measurement file records them before and after a run.
struct GpuState {
    std::optional<double> sm_clock_mhz;
    std::optional<double> temperature_c;
};

nlohmann::json or_null(const std::optional<double>& value) { return value ? nlohmann::json(*value) : nlohmann::json(); }

nlohmann::json before_after(const std::optional<double>& before, const std::optional<double>& after)
{
    return {{"before", or_null(before)}, {"after", or_null(after)}};
}

//! Writes `file` upgraded to the current schema to `out` (default: over itself); no GPU needed.
int upgrade(const Options& options)
{
    const stepwise::ReadMeasurement read = stepwise::read_measurement_file(options.upgrade);
    const std::string out = options.out_file.empty() ? options.upgrade : options.out_file;
    if (read.upgrade_note.empty() && out == options.upgrade) {
        std::fprintf(stderr, "stepwise_bench: %s is of schema %d already: left as it is\n", options.upgrade.c_str(),
                     stepwise::measurement_schema);
        return 0;
    }
    write_atomically(out, read.file.dump(2));
    std::fprintf(stderr, "stepwise_bench: %s: %s; wrote %s\n", options.upgrade.c_str(),
                 read.upgrade_note.empty() ? "already of this schema" : read.upgrade_note.c_str(), out.c_str());
    return 0;
}

int measure(const Options& options, const std::vector<std::unique_ptr<stepwise::Chapter>>& chapters,
            const std::string& command)
{
    const std::vector<stepwise::Selection> selection =
        stepwise::select_steps(chapters, options.chapters, options.steps);
    const nlohmann::json gtest_report = read_gtest_report(options.gtest_report);
    std::optional<stepwise::ReadMeasurement> base;
    if (!options.merge_from.empty()) {
        base = stepwise::read_measurement_file(options.merge_from);
        if (!base->upgrade_note.empty()) {
            std::fprintf(stderr, "stepwise_bench: %s: %s\n", options.merge_from.c_str(), base->upgrade_note.c_str());
        }
    }
    if (const int status = probe(true); status != 0) {
        return status;
    }
    const std::uint64_t seed = options.seed.value_or(std::random_device{}());

    int device = 0;
    STEPWISE_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    STEPWISE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    char bus_id[32] = {};
    STEPWISE_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device));
    int runtime_version = 0;
    int driver_version = 0;
    STEPWISE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version));
    STEPWISE_CUDA_CHECK(cudaDriverGetVersion(&driver_version));
    const stepwise::Nvml nvml(bus_id);
    if (!nvml.available()) {
        std::fprintf(stderr, "stepwise_bench: NVML unavailable (%s): no clocks, no throttle detection\n",
                     nvml.unavailable_reason().c_str());
    }
    const auto state = [&] { return GpuState{nvml.sm_clock_mhz(), nvml.temperature_c()}; };
    const std::string slug = stepwise::slugify(prop.name);
    nlohmann::json gpu = {{"name", prop.name},
                          {"slug", slug},
                          {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
                          {"sm_count", prop.multiProcessorCount},
                          {"l2_bytes", prop.l2CacheSize},
                          {"global_memory_bytes", prop.totalGlobalMem},
                          {"driver", nvml.driver_version().value_or("unknown")},
                          {"cuda_runtime", version_text(runtime_version)},
                          {"cuda_driver", version_text(driver_version)},
                          {"limits", device_limits(prop, nvml)}};
    if (base) {  // before any timing: a file of another GPU is refused at once
        stepwise::require_same_gpu(gpu, base->file, options.merge_from);
    }
    // What every chapter's run records besides its own date, clocks, seconds and tests.
    const nlohmann::json run = {
        {"date", utc_now()},
        {"commit", options.commit},
        {"dirty", options.dirty},
        {"command", command},
        {"seed", seed},
        {"clock_source", nvml.available() ? "nvml" : "unavailable"},
        {"stopping_rule",
         {{"min_samples", options.rule.min_samples},
          {"max_samples", options.rule.max_samples},
          {"target_rel_stderr", options.rule.target_rel_stderr},
          {"max_seconds_per_row", options.rule.max_seconds_per_row},
          {"throttle_threshold", options.throttle_threshold},
          {"warmup_samples", options.warmup_samples}}}};
    const GpuState run_before = state();

    cudaStream_t stream = nullptr;
    STEPWISE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    nlohmann::json chapters_json = nlohmann::json::array();
    nlohmann::json measured_ids = nlohmann::json::array();
    bool all_valid = true;
    {
        stepwise::Sampler sampler(stream, static_cast<std::size_t>(prop.l2CacheSize), nvml, options.rule,
                                  options.throttle_threshold, options.warmup_samples);
        stepwise::Progress progress(stderr, base ? base->file : nlohmann::json());
        sampler.observe_rows([&](const std::string& what, const stepwise::TimingMode& mode,
                                 const stepwise::RowTiming& timing) {
            progress.row_done(what, mode.id, timing.summary.median_ms, timing.summary.samples);
        });
        stepwise::MeasureContext context{sampler, stream, seed,
                                         [&](const stepwise::ChapterEntry& c, const stepwise::StepEntry& s) {
                                             return stepwise::count_tests(gtest_report, c.gtest_prefix, s.id);
                                         }};
        for (const stepwise::Selection& s : selection) {
            const stepwise::ChapterEntry& entry = s.chapter->entry();
            std::fprintf(stderr, "stepwise_bench: measuring %s (%zu steps)\n", entry.id.c_str(), s.step_ids.size());
            nlohmann::json chapter_run = run;
            chapter_run["date"] = utc_now();
            const GpuState before = state();
            progress.begin_chapter(entry.id);
            nlohmann::json chapter = s.chapter->measure(context, s.step_ids);
            const double chapter_seconds = progress.chapter_seconds();
            const GpuState after = state();
            std::fprintf(stderr, "stepwise_bench: measured %s in %.0f s\n", entry.id.c_str(), chapter_seconds);
            for (const char* key : {"driver", "cuda_runtime", "cuda_driver"}) {
                chapter_run[key] = gpu.at(key);
            }
            chapter_run["sm_clock_mhz"] = before_after(before.sm_clock_mhz, after.sm_clock_mhz);
            chapter_run["temperature_c"] = before_after(before.temperature_c, after.temperature_c);
            chapter_run["seconds"] = chapter_seconds;
            const stepwise::TestCounts tests = stepwise::count_tests(gtest_report, entry.gtest_prefix, "");
            chapter_run["tests"] = {{"passed", tests.passed}, {"failed", tests.failed}, {"skipped", tests.skipped}};
            chapter["run"] = std::move(chapter_run);
            for (auto& row : chapter.at("steps")) {
                row["resources"] = stepwise::step_runtime_resources(stepwise::find_step(entry, row.at("id")));
            }
            for (const auto& row : chapter.at("steps")) {
                if (!row.at("validated").get<bool>()) {
                    all_valid = false;
                    std::fprintf(stderr, "stepwise_bench: %s/%s failed validation on the timed buffers: %s\n",
                                 entry.id.c_str(), row.at("id").get<std::string>().c_str(),
                                 row.at("validation").get<std::string>().c_str());
                }
            }
            measured_ids.push_back(entry.id);
            chapters_json.push_back(std::move(chapter));
        }
    }
    STEPWISE_CUDA_CHECK(cudaStreamDestroy(stream));

    const GpuState run_after = state();
    gpu["sm_clock_mhz"] = before_after(run_before.sm_clock_mhz, run_after.sm_clock_mhz);
    gpu["temperature_c"] = before_after(run_before.temperature_c, run_after.temperature_c);
    nlohmann::json file_run = run;
    file_run["measured"] = measured_ids;
    nlohmann::json file = {{"schema", stepwise::measurement_schema},
                           {"generator", "stepwise_bench"},
                           {"gpu", gpu},
                           {"run", file_run},
                           {"chapters", chapters_json}};
    if (base) {
        std::vector<std::string> order;
        for (const auto& c : chapters) {
            order.push_back(c->entry().id);
        }
        file = stepwise::merged_measurement(base->file, options.merge_from, std::move(file), order);
        std::fprintf(stderr, "stepwise_bench: kept %zu chapters of %s as they were\n", file.at("run").at("kept").size(),
                     options.merge_from.c_str());
    }

    const std::filesystem::path path = !options.out_file.empty() ? std::filesystem::path(options.out_file)
                                       : std::filesystem::path(options.out_dir.empty() ? "." : options.out_dir) /
                                             (slug + ".json");
    write_atomically(path, file.dump(2));
    std::fprintf(stderr, "stepwise_bench: wrote %s\n", path.string().c_str());
    return all_valid ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string command = "stepwise_bench";
    for (int i = 1; i < argc; ++i) {
        command += std::string(" ") + argv[i];
    }
    try {
        const Options options = stepwise::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
        const auto chapters = stepwise::make_chapters();
        if (options.help) {
            std::cout << stepwise::usage();
            return 0;
        }
        if (options.probe) {
            return probe(false, options.json);
        }
        if (!options.upgrade.empty()) {
            return upgrade(options);
        }
        if (options.list) {
            nlohmann::json registry;
            try {
                registry = stepwise::registry_json(chapters, read_ptxas_reports(options.ptxas_reports));
            } catch (const std::runtime_error& e) {
                throw stepwise::UsageError(e.what());
            }
            if (options.json && !options.out_file.empty()) {
                write_atomically(options.out_file, registry.dump(2));
            } else if (options.json) {
                std::cout << registry.dump(2) << '\n';
            } else {
                for (const auto& c : registry.at("chapters")) {
                    std::cout << c.at("id").get<std::string>() << ": " << c.at("title").get<std::string>() << '\n';
                    for (const auto& s : c.at("steps")) {
                        std::cout << "  " << s.at("id").get<std::string>() << "  " << s.at("title").get<std::string>()
                                  << '\n';
                    }
                }
            }
            return 0;
        }
        return measure(options, chapters, command);
    } catch (const stepwise::UsageError& e) {
        std::fprintf(stderr, "stepwise_bench: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "stepwise_bench: %s\n", e.what());
        return 1;
    }
}
