#include "core/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace stepwise {

SampleSummary summarize(const std::vector<double>& samples_ms)
{
    if (samples_ms.empty()) {
        throw std::invalid_argument("summarize: no samples");
    }
    for (const double s : samples_ms) {
        if (!std::isfinite(s) || s <= 0) {
            throw std::invalid_argument("summarize: sample " + std::to_string(s) + " ms is not finite and positive");
        }
    }
    std::vector<double> sorted = samples_ms;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t n = sorted.size();

    SampleSummary out;
    out.samples = n;
    out.min_ms = sorted.front();
    out.max_ms = sorted.back();
    out.median_ms = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    out.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(n);
    double squares = 0;
    for (const double s : sorted) {
        squares += (s - out.mean_ms) * (s - out.mean_ms);
    }
    out.stdev_ms = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
    out.rel_noise = out.stdev_ms / out.mean_ms;
    return out;
}

bool StoppingRule::done(const std::vector<double>& kept_ms, double elapsed_seconds) const
{
    if (kept_ms.size() >= max_samples || elapsed_seconds >= max_seconds_per_row) {
        return true;
    }
    if (kept_ms.size() < min_samples) {
        return false;
    }
    const SampleSummary s = summarize(kept_ms);
    return s.rel_noise / std::sqrt(static_cast<double>(s.samples)) < target_rel_stderr;
}

bool warmup_done(int taken, int wanted, double elapsed_seconds, double max_seconds_per_row)
{
    return taken >= wanted || (taken >= 1 && elapsed_seconds >= 0.5 * max_seconds_per_row);
}

bool is_throttled(double sample_clock_mhz, double highest_clock_mhz, double threshold)
{
    return sample_clock_mhz < threshold * highest_clock_mhz;
}

}  // namespace stepwise
