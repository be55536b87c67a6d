// The timing program's command line (CPU code, unit-tested).
#pragma once

#include "core/statistics.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace stepwise {

//! @brief A command line the program cannot run: the message is one line for the user.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Options {
    bool help = false;
    bool list = false;       //!< print the registry
    bool json = false;       //!< ... as JSON (with --list or --probe)
    bool probe = false;      //!< exit 0 if a usable CUDA GPU is present
    std::string upgrade;     //!< rewrite this measurement file in the current schema (no GPU needed)
    std::string merge_from;  //!< an earlier measurement file of this GPU: the chapters not measured now are kept
    std::vector<std::string> chapters;  //!< empty: all
    std::vector<std::string> steps;     //!< "id" or "chapter/id"; empty: all of the selected chapters
    std::string out_file;
    std::string out_dir;
    std::string gtest_report;
    std::vector<std::string> ptxas_reports;  //!< with --list: the build's compiler reports (resources per kernel)
    std::string commit = "unknown";
    bool dirty = false;
    std::optional<std::uint64_t> seed;
    StoppingRule rule;
    double throttle_threshold = 0.9;
    int warmup_samples = 3;
};

//! @brief Parses `args` (without the program name).
//! @throws UsageError naming the offending argument
Options parse_command_line(const std::vector<std::string>& args);

//! @brief The `--help` text.
std::string usage();

//! @brief Lower-case letters, digits and single dashes: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3".
std::string slugify(const std::string& name);

}  // namespace stepwise
