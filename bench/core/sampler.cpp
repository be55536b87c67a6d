#include "core/sampler.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>
#include <vector>

namespace stepwise {

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream)
{
    STEPWISE_CUDA_CHECK(cudaEventCreate(&start_));
    if (const cudaError_t error = cudaEventCreate(&stop_); error != cudaSuccess) {
        cudaEventDestroy(start_);
        STEPWISE_CUDA_CHECK(error);
    }
}

EventTimer::~EventTimer()
{
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
}

double EventTimer::sample_ms(const std::string& what, const std::function<cudaError_t()>& launch, int launches,
                             void* d_flush, std::size_t flush_bytes, int flush_value)
{
    if (flush_bytes > 0) {
        STEPWISE_CUDA_CHECK(cudaMemsetAsync(d_flush, flush_value, flush_bytes, stream_));
    }
    STEPWISE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    for (int i = 0; i < launches; ++i) {
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
    return static_cast<double>(elapsed_ms) / launches;
}

Sampler::Sampler(cudaStream_t stream, std::size_t l2_bytes, const Nvml& nvml, StoppingRule rule,
                 double throttle_threshold, int warmup_samples)
    : nvml_(nvml), rule_(rule), throttle_threshold_(throttle_threshold), warmup_samples_(warmup_samples),
      l2_flush_(2 * l2_bytes), timer_(stream)
{
}

double Sampler::one_sample(const std::string& what, const TimingMode& mode, const std::function<void()>& reset,
                           const std::function<cudaError_t()>& launch)
{
    reset();
    const std::size_t flush_bytes = mode.flush_l2 ? l2_flush_.bytes() : 0;
    return timer_.sample_ms(what, launch, mode.launches_per_sample, l2_flush_.data(), flush_bytes);
}

RowTiming Sampler::time(const std::string& what, const TimingMode& mode, const std::function<void()>& reset,
                        const std::function<cudaError_t()>& launch)
{
    return time_in_turn({{what, launch}}, mode, reset).front();
}

std::vector<RowTiming> Sampler::time_in_turn(const std::vector<TimedCall>& calls, const TimingMode& mode,
                                             const std::function<void()>& reset)
{
    if (calls.empty()) {
        return {};
    }
    const double rows = static_cast<double>(calls.size());
    const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    const auto note_clock = [&] {
        const double mhz = nvml_.sm_clock_mhz().value_or(0.0);
        highest_clock_mhz_ = std::max(highest_clock_mhz_, mhz);
        return mhz;
    };
    // Each row's share of the time is the elapsed time over the number of rows: n rows in turn may take as long
    // as n rows one after the other.
    const auto warmup_begin = std::chrono::steady_clock::now();
    for (int i = 0; !warmup_done(i, warmup_samples_, seconds_since(warmup_begin) / rows, rule_.max_seconds_per_row);
         ++i) {
        for (const TimedCall& call : calls) {
            one_sample(call.what, mode, reset, call.launch);
            note_clock();
        }
    }
    const double threshold = mode.throttle_threshold.value_or(throttle_threshold_);
    const auto throttled = [&](double mhz) { return mhz > 0 && is_throttled(mhz, highest_clock_mhz_, threshold); };
    std::vector<std::vector<std::pair<double, double>>> taken(calls.size());  // per row: (ms, SM clock MHz or 0)
    std::vector<std::vector<double>> kept(calls.size());
    const auto begin = std::chrono::steady_clock::now();
    for (;;) {
        for (std::size_t r = 0; r < calls.size(); ++r) {
            const double ms = one_sample(calls[r].what, mode, reset, calls[r].launch);
            const double mhz = note_clock();
            taken[r].emplace_back(ms, mhz);
            if (!throttled(mhz)) {
                kept[r].push_back(ms);
            }
        }
        const double seconds = seconds_since(begin) / rows;
        const bool all_done = std::all_of(kept.begin(), kept.end(), [&](const std::vector<double>& k) {
            return !k.empty() && rule_.done(k, seconds);
        });
        if (all_done) {
            break;
        }
        for (std::size_t r = 0; r < calls.size(); ++r) {
            if (kept[r].empty() && seconds >= rule_.max_seconds_per_row) {
                throw std::runtime_error(calls[r].what + ": every sample ran throttled (SM clock below " +
                                         std::to_string(threshold) + " of " + std::to_string(highest_clock_mhz_) +
                                         " MHz)");
            }
        }
    }
    // The run's highest clock may have risen during the rows: re-judge the samples against it.
    std::vector<RowTiming> timings(calls.size());
    for (std::size_t r = 0; r < calls.size(); ++r) {
        std::vector<double> kept_ms;
        std::vector<double> kept_clocks;
        for (const auto& [ms, mhz] : taken[r]) {
            if (throttled(mhz)) {
                ++timings[r].throttled_samples;
            } else {
                kept_ms.push_back(ms);
                if (mhz > 0) {
                    kept_clocks.push_back(mhz);
                }
            }
        }
        if (kept_ms.empty()) {
            throw std::runtime_error(calls[r].what + ": every sample ran throttled");
        }
        timings[r].summary = summarize(kept_ms);
        if (!kept_clocks.empty()) {
            const SampleSummary clocks = summarize(kept_clocks);
            timings[r].sm_clock = ClockSummary{clocks.median_ms, clocks.min_ms, clocks.max_ms};
        }
        if (observer_) {
            observer_(calls[r].what, mode, timings[r]);
        }
    }
    return timings;
}

}  // namespace stepwise
