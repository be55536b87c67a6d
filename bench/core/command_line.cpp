#include "core/command_line.hpp"

#include <cctype>
#include <cstdlib>

namespace stepwise {
namespace {

double parse_number(const std::string& flag, const std::string& text, double low, double high)
{
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(value >= low && value <= high)) {
        throw UsageError(flag + " wants a number in [" + std::to_string(low) + ", " + std::to_string(high) +
                         "], got '" + text + "'");
    }
    return value;
}

}  // namespace

std::string usage()
{
    return "usage: stepwise_bench [options]\n"
           "  --list [--json]          print the chapters and steps (no GPU needed)\n"
           "  --ptxas-report FILE      with --list --json: add each kernel's registers, shared and local memory\n"
           "                           and occupancy from this compiler report (repeatable)\n"
           "  --probe [--json]         exit 0 if a usable CUDA GPU is present, else 1 with the reason; with --json\n"
           "                           one JSON object: usable, and the GPU's name, slug, compute capability, SMs\n"
           "  --chapter ID             measure this chapter (repeatable; default: all)\n"
           "  --step ID|CHAPTER/ID     measure only this step (repeatable)\n"
           "  --gtest-report FILE      GoogleTest JSON report of this run's GPU tests (required to measure)\n"
           "  --out FILE | --out-dir DIR   where to write the measurement (DIR/<gpu-slug>.json)\n"
           "  --merge-from FILE        an earlier measurement file of this GPU: its chapters that this run does not\n"
           "                           measure are kept, each with its own run (another GPU's file is refused)\n"
           "  --upgrade FILE [--out F] rewrite a measurement file of an older schema in this one (no GPU needed)\n"
           "  --commit SHA [--dirty]   the source the binary was built from\n"
           "  --seed N                 input seed (default: random, recorded in the file)\n"
           "  --min-samples N --max-samples N --target-rel-stderr X --max-seconds-per-row S\n"
           "  --throttle-threshold X --warmup-samples N\n";
}

Options parse_command_line(const std::vector<std::string>& args)
{
    Options o;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& flag = args[i];
        const auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) {
                throw UsageError(flag + " needs a value");
            }
            return args[++i];
        };
        if (flag == "--help" || flag == "-h") {
            o.help = true;
        } else if (flag == "--list") {
            o.list = true;
        } else if (flag == "--json") {
            o.json = true;
        } else if (flag == "--probe") {
            o.probe = true;
        } else if (flag == "--upgrade") {
            o.upgrade = value();
        } else if (flag == "--merge-from") {
            o.merge_from = value();
        } else if (flag == "--chapter") {
            o.chapters.push_back(value());
        } else if (flag == "--step") {
            o.steps.push_back(value());
        } else if (flag == "--ptxas-report") {
            o.ptxas_reports.push_back(value());
        } else if (flag == "--gtest-report") {
            o.gtest_report = value();
        } else if (flag == "--out") {
            o.out_file = value();
        } else if (flag == "--out-dir") {
            o.out_dir = value();
        } else if (flag == "--commit") {
            o.commit = value();
        } else if (flag == "--dirty") {
            o.dirty = true;
        } else if (flag == "--seed") {
            o.seed = static_cast<std::uint64_t>(parse_number(flag, value(), 0, 9007199254740991.0));
        } else if (flag == "--min-samples") {
            o.rule.min_samples = static_cast<std::size_t>(parse_number(flag, value(), 1, 1e7));
        } else if (flag == "--max-samples") {
            o.rule.max_samples = static_cast<std::size_t>(parse_number(flag, value(), 1, 1e7));
        } else if (flag == "--target-rel-stderr") {
            o.rule.target_rel_stderr = parse_number(flag, value(), 1e-9, 1);
        } else if (flag == "--max-seconds-per-row") {
            o.rule.max_seconds_per_row = parse_number(flag, value(), 1e-3, 3600);
        } else if (flag == "--throttle-threshold") {
            o.throttle_threshold = parse_number(flag, value(), 0.01, 1);
        } else if (flag == "--warmup-samples") {
            o.warmup_samples = static_cast<int>(parse_number(flag, value(), 0, 1000));
        } else {
            throw UsageError("unknown option '" + flag + "' (try --help)");
        }
    }
    if (o.rule.min_samples > o.rule.max_samples) {
        throw UsageError("--min-samples is larger than --max-samples");
    }
    if (o.json && !o.list && !o.probe) {
        throw UsageError("--json only goes with --list or --probe");
    }
    if (static_cast<int>(o.list) + static_cast<int>(o.probe) + static_cast<int>(!o.upgrade.empty()) > 1) {
        throw UsageError("give one of --list, --probe and --upgrade");
    }
    if (!o.upgrade.empty() && (!o.out_dir.empty() || !o.chapters.empty() || !o.steps.empty())) {
        throw UsageError("--upgrade FILE takes only --out (default: FILE itself)");
    }
    if (!o.merge_from.empty() && (o.list || o.probe || !o.upgrade.empty())) {
        throw UsageError("--merge-from goes with a measurement, not with --list, --probe or --upgrade");
    }
    if (!o.ptxas_reports.empty() && !o.json) {
        throw UsageError("--ptxas-report only goes with --list --json");
    }
    if (!o.out_file.empty() && !o.out_dir.empty()) {
        throw UsageError("give --out or --out-dir, not both");
    }
    return o;
}

std::string slugify(const std::string& name)
{
    std::string slug;
    for (const char c : name) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!slug.empty() && slug.back() != '-') {
            slug += '-';
        }
    }
    while (!slug.empty() && slug.back() == '-') {
        slug.pop_back();
    }
    return slug.empty() ? "unknown-gpu" : slug;
}

}  // namespace stepwise
