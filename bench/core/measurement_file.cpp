#include "core/measurement_file.hpp"

#include "core/command_line.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace stepwise {
namespace {

//! What schema 1 kept for the whole file and schema 2 keeps per chapter: from `run`, and from `gpu`.
constexpr const char* run_fields[] = {"date", "commit", "dirty", "command", "seed", "clock_source", "stopping_rule"};
constexpr const char* gpu_run_fields[] = {"driver", "cuda_runtime", "cuda_driver", "sm_clock_mhz", "temperature_c"};

}  // namespace

nlohmann::json upgraded_measurement(nlohmann::json file, std::string& note)
{
    note.clear();
    if (!file.is_object() || file.value("generator", "") != "stepwise_bench" || !file.contains("schema") ||
        !file.at("schema").is_number_integer()) {
        throw std::runtime_error("is not a measurement file of the timing program (no \"generator\": "
                                 "\"stepwise_bench\" and integer \"schema\")");
    }
    const int schema = file.at("schema").get<int>();
    if (schema == measurement_schema) {
        return file;
    }
    if (schema != 1) {
        throw std::runtime_error("is of schema " + std::to_string(schema) + "; this timing program reads schemas 1 and " +
                                 std::to_string(measurement_schema));
    }
    if (!file.contains("run") || !file.contains("gpu") || !file.contains("chapters")) {
        throw std::runtime_error("is of schema 1 but has no \"gpu\", \"run\" or \"chapters\"");
    }
    nlohmann::json run = nlohmann::json::object();
    for (const char* key : run_fields) {
        if (file.at("run").contains(key)) {
            run[key] = file.at("run").at(key);
        }
    }
    for (const char* key : gpu_run_fields) {
        if (file.at("gpu").contains(key)) {
            run[key] = file.at("gpu").at(key);
        }
    }
    run["upgraded_from_schema"] = 1;
    nlohmann::json measured = nlohmann::json::array();
    for (nlohmann::json& chapter : file.at("chapters")) {
        nlohmann::json chapter_run = run;
        if (chapter.contains("measure_seconds")) {
            chapter_run["seconds"] = chapter.at("measure_seconds");
            chapter.erase("measure_seconds");
        }
        chapter["run"] = std::move(chapter_run);
        measured.push_back(chapter.at("id"));
    }
    file["schema"] = measurement_schema;
    file["run"]["measured"] = measured;
    file["run"]["upgraded_from_schema"] = 1;
    note = "schema 1 (one run for the whole file) upgraded to schema " + std::to_string(measurement_schema) +
           ": each of its " + std::to_string(measured.size()) +
           " chapters keeps that run as its own (commit " + file.at("run").value("commit", "unknown") + ")";
    return file;
}

ReadMeasurement read_measurement_file(const std::string& path)
{
    std::ifstream in(path);
    if (!in) {
        throw UsageError("cannot read the measurement file " + path);
    }
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json file;
    try {
        file = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
        throw UsageError("the measurement file " + path + " is not JSON: " + e.what());
    }
    ReadMeasurement out;
    try {
        out.file = upgraded_measurement(std::move(file), out.upgrade_note);
    } catch (const std::runtime_error& e) {
        throw UsageError("the measurement file " + path + " " + e.what());
    }
    return out;
}

void require_same_gpu(const nlohmann::json& gpu, const nlohmann::json& base, const std::string& base_name)
{
    for (const char* key : {"name", "compute_capability", "sm_count", "l2_bytes"}) {
        const nlohmann::json mine = gpu.value(key, nlohmann::json());
        const nlohmann::json theirs = base.at("gpu").value(key, nlohmann::json());
        if (mine != theirs) {
            throw UsageError("refusing to merge into " + base_name + ": it was measured on another GPU (" + key + " " +
                             theirs.dump() + ", this GPU's " + mine.dump() + ")");
        }
    }
}

nlohmann::json merged_measurement(const nlohmann::json& base, const std::string& base_name, nlohmann::json fresh,
                                  const std::vector<std::string>& order)
{
    require_same_gpu(fresh.at("gpu"), base, base_name);
    const auto find = [](const nlohmann::json& file, const std::string& id) -> const nlohmann::json* {
        for (const nlohmann::json& chapter : file.at("chapters")) {
            if (chapter.at("id") == id) {
                return &chapter;
            }
        }
        return nullptr;
    };
    nlohmann::json chapters = nlohmann::json::array();
    nlohmann::json kept = nlohmann::json::array();
    for (const std::string& id : order) {
        if (const nlohmann::json* now = find(fresh, id)) {
            chapters.push_back(*now);
        } else if (const nlohmann::json* before = find(base, id)) {
            chapters.push_back(*before);
            kept.push_back(id);
        }
    }
    for (const nlohmann::json& chapter : base.at("chapters")) {  // chapters this build does not know
        const std::string id = chapter.at("id").get<std::string>();
        if (std::find(order.begin(), order.end(), id) == order.end() && find(fresh, id) == nullptr) {
            chapters.push_back(chapter);
            kept.push_back(id);
        }
    }
    fresh["chapters"] = std::move(chapters);
    fresh["run"]["kept"] = std::move(kept);
    fresh["run"]["kept_from"] = base_name;
    return fresh;
}

}  // namespace stepwise
