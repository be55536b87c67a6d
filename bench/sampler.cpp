#include "sampler.hpp"

#include <chrono>
#include <utility>
#include <vector>

namespace stepwise {

Sampler::Sampler(cudaStream_t stream, std::size_t l2_bytes, const Nvml& nvml, StoppingRule rule,
                 double throttle_threshold, int warmup_samples)
    : stream_(stream), nvml_(nvml), rule_(rule), throttle_threshold_(throttle_threshold),
      warmup_samples_(warmup_samples), l2_flush_(2 * l2_bytes)
{
    STEPWISE_CUDA_CHECK(cudaEventCreate(&start_));
    STEPWISE_CUDA_CHECK(cudaEventCreate(&stop_));
}

Sampler::~Sampler()
{
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
}

double Sampler::one_sample(const std::string& what, const TimingMode& mode, const std::function<void()>& reset,
                           const std::function<cudaError_t()>& launch)
{
    reset();
    if (mode.flush_l2 && l2_flush_.size() > 0) {
        STEPWISE_CUDA_CHECK(cudaMemsetAsync(l2_flush_.data(), 0, l2_flush_.bytes(), stream_));
    }
    STEPWISE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int i = 0; i < mode.launches_per_sample; ++i) {
        if (const cudaError_t error = launch(); error != cudaSuccess) {
            throw CudaError(error, what + ": launch failed: " + cudaGetErrorName(error) + " (" +
                                       cudaGetErrorString(error) + ")");
        }
    }
    STEPWISE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    STEPWISE_CUDA_CHECK(cudaEventSynchronize(stop_));
    STEPWISE_CUDA_CHECK(cudaGetLastError());
    float elapsed_ms = 0;
    STEPWISE_CUDA_CHECK(cudaEventElapsedTime(&elapsed_ms, start_, stop_));
    return static_cast<double>(elapsed_ms) / mode.launches_per_sample;
}

RowTiming Sampler::time(const std::string& what, const TimingMode& mode, const std::function<void()>& reset,
                        const std::function<cudaError_t()>& launch)
{
    const auto warmup_begin = std::chrono::steady_clock::now();
    for (int i = 0; !warmup_done(i, warmup_samples_,
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_begin).count(),
                                 rule_.max_seconds_per_row);
         ++i) {
        one_sample(what, mode, reset, launch);
        if (const auto mhz = nvml_.sm_clock_mhz()) {
            highest_clock_mhz_ = std::max(highest_clock_mhz_, *mhz);
        }
    }
    const double threshold = mode.throttle_threshold.value_or(throttle_threshold_);
    std::vector<std::pair<double, double>> taken;  // (ms, SM clock MHz or 0)
    std::vector<double> kept;
    RowTiming row;
    const auto begin = std::chrono::steady_clock::now();
    for (;;) {
        const double ms = one_sample(what, mode, reset, launch);
        const double mhz = nvml_.sm_clock_mhz().value_or(0.0);
        highest_clock_mhz_ = std::max(highest_clock_mhz_, mhz);
        taken.emplace_back(ms, mhz);
        if (mhz > 0 && is_throttled(mhz, highest_clock_mhz_, threshold)) {
            ++row.throttled_samples;
        } else {
            kept.push_back(ms);
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        if (!kept.empty() && rule_.done(kept, seconds)) {
            break;
        }
        if (kept.empty() && seconds >= rule_.max_seconds_per_row) {
            throw std::runtime_error(what + ": every sample ran throttled (SM clock below " +
                                     std::to_string(threshold) + " of " +
                                     std::to_string(highest_clock_mhz_) + " MHz)");
        }
    }
    // The run's highest clock may have risen during the row: re-judge the kept samples against it.
    kept.clear();
    std::vector<double> kept_clocks;
    row.throttled_samples = 0;
    for (const auto& [ms, mhz] : taken) {
        if (mhz > 0 && is_throttled(mhz, highest_clock_mhz_, threshold)) {
            ++row.throttled_samples;
        } else {
            kept.push_back(ms);
            if (mhz > 0) {
                kept_clocks.push_back(mhz);
            }
        }
    }
    if (kept.empty()) {
        throw std::runtime_error(what + ": every sample ran throttled");
    }
    row.summary = summarize(kept);
    if (!kept_clocks.empty()) {
        const SampleSummary clocks = summarize(kept_clocks);
        row.sm_clock = ClockSummary{clocks.median_ms, clocks.min_ms, clocks.max_ms};
    }
    return row;
}

}  // namespace stepwise
