// Sample statistics and the stopping rule of the timing program (CPU code, unit-tested).
#pragma once

#include <cstddef>
#include <vector>

namespace stepwise {

//! @brief Summary of a row's kept samples, in milliseconds.
struct SampleSummary {
    std::size_t samples = 0;
    double median_ms = 0;
    double min_ms = 0;
    double max_ms = 0;
    double mean_ms = 0;
    double stdev_ms = 0;   //!< sample standard deviation (n - 1)
    double rel_noise = 0;  //!< stdev / mean
};

//! @brief Median, extremes, mean and spread of `samples_ms`.
//! @throws std::invalid_argument for an empty vector or a sample that is not finite and positive
SampleSummary summarize(const std::vector<double>& samples_ms);

//! @brief When a row has enough samples (nvbench's rule, with the standard error in place of the noise).
struct StoppingRule {
    std::size_t min_samples = 50;
    std::size_t max_samples = 2000;
    double target_rel_stderr = 0.002;  //!< stdev / mean / sqrt(n)
    double max_seconds_per_row = 1.0;  //!< wall time spent on one row, warm-up excluded

    //! @brief True once the row may stop: `min_samples` kept and the estimate precise enough, or a limit reached.
    bool done(const std::vector<double>& kept_ms, double elapsed_seconds) const;
};

//! @brief Whether the warm-up of a row is over: `wanted` samples taken, or (after at least one) half of the row's
//!        time limit spent, so that a step taking a large fraction of a second per sample is not warmed up for
//!        longer than it is measured.
bool warmup_done(int taken, int wanted, double elapsed_seconds, double max_seconds_per_row);

//! @brief True when a sample ran with the SM clock below `threshold` times the run's highest clock.
bool is_throttled(double sample_clock_mhz, double highest_clock_mhz, double threshold);

}  // namespace stepwise
