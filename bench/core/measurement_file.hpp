// The measurement file as a whole (conf/measurement.schema.json): each chapter with the run that measured it, an older
// schema read and upgraded, and a run of some chapters merged into an earlier file of the same GPU (CPU code,
// unit-tested).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepwise {

//! @brief The schema the timing program writes: each chapter carries its own `run` (schema 1 had one for the file).
constexpr int measurement_schema = 2;

//! @brief A file read as schema 2, and what was done to it: empty, or one line saying it was upgraded from schema 1.
struct ReadMeasurement {
    nlohmann::json file;
    std::string upgrade_note;
};

//! @brief Schema 1 as schema 2: every chapter gets the file's one run (date, commit, command, stopping rule, and the
//!        driver, runtime, clocks and temperatures of `gpu`), marked `upgraded_from_schema: 1`, with its
//!        `measure_seconds` as the run's `seconds`; nothing measured changes. Schema 2 is returned as it is.
//! @param[in]  file  a measurement file's JSON
//! @param[out] note  set to a one-line note where the file was upgraded, else cleared
//! @throws std::runtime_error for a file that is not a measurement file or of a schema this program does not know
nlohmann::json upgraded_measurement(nlohmann::json file, std::string& note);

//! @brief Reads the measurement file at `path` as schema 2 (upgraded_measurement()).
//! @throws UsageError for a file that is missing, not JSON, not a measurement file or of an unknown schema; the
//!         message is one line naming the file
ReadMeasurement read_measurement_file(const std::string& path);

//! @brief Checks that a measurement file (`base`, named `base_name`) is of the GPU this run's `gpu` describes: the
//!        same name, compute capability, SM count and L2 size.
//! @throws UsageError naming the first field that differs
void require_same_gpu(const nlohmann::json& gpu, const nlohmann::json& base, const std::string& base_name);

//! @brief This run's file (`fresh`, the chapters it measured) merged into an earlier file of the same GPU (`base`,
//!        schema 2): the chapters in `order` (the registry's), each this run's where it measured it, else the base's,
//!        then any chapter of the base this build does not know, kept as it was. The GPU and the file's `run` are
//!        this run's; `run.measured` lists the chapters it measured, `run.kept` those taken from `base_name`.
//! @throws UsageError where `base` is of another GPU (require_same_gpu())
nlohmann::json merged_measurement(const nlohmann::json& base, const std::string& base_name, nlohmann::json fresh,
                                  const std::vector<std::string>& order);

}  // namespace stepwise
