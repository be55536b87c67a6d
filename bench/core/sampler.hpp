// Times one row (a step, a ceiling or a baseline at one size in one timing mode) with CUDA events.
#pragma once

#include "core/device_buffer.hpp"
#include "core/nvml.hpp"
#include "core/statistics.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stepwise {

//! @brief How a chapter's samples are taken; each is a separate, labelled measurement.
struct TimingMode {
    TimingMode(std::string id_, std::string label_, bool flush_l2_, int launches_per_sample_,
               std::optional<double> throttle_threshold_ = std::nullopt)
        : id(std::move(id_)), label(std::move(label_)), flush_l2(flush_l2_),
          launches_per_sample(launches_per_sample_), throttle_threshold(throttle_threshold_)
    {
    }

    std::string id;
    std::string label;
    bool flush_l2 = false;         //!< write a buffer of twice the L2 size before each sample
    int launches_per_sample = 1;   //!< events around this many back-to-back launches; time is per launch
    //! A sample whose SM clock is below this share of the run's highest is thrown away as throttled; unset: the run's
    //! `--throttle-threshold`. 0 keeps every sample, for loads that run where the card's power limit puts the clock
    //! (sustained tensor-core work): their rows then say which clocks they ran at.
    std::optional<double> throttle_threshold;
};

//! @brief The SM clock over a row's kept samples (read through NVML after each), in MHz.
struct ClockSummary {
    double median_mhz = 0;
    double min_mhz = 0;
    double max_mhz = 0;
};

//! @brief The kept samples of a row and how many were thrown away as throttled.
struct RowTiming {
    SampleSummary summary;
    std::size_t throttled_samples = 0;
    std::optional<ClockSummary> sm_clock;  //!< unset without NVML
};

//! @brief CUDA events around launches on one stream: one sample at a time.
class EventTimer {
public:
    explicit EventTimer(cudaStream_t stream);
    ~EventTimer();
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    //! @brief Writes `flush_value` over `flush_bytes` at `d_flush` (nothing where 0), then times `launches`
    //!        back-to-back calls of `launch` between two events; the time per call, in ms.
    //! @throws CudaError naming `what` when a launch or a CUDA call fails
    double sample_ms(const std::string& what, const std::function<cudaError_t()>& launch, int launches,
                     void* d_flush, std::size_t flush_bytes, int flush_value = 0);

private:
    cudaStream_t stream_;
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
};

//! @brief Takes samples until the stopping rule is met, on one stream, for the whole run.
class Sampler {
public:
    Sampler(cudaStream_t stream, std::size_t l2_bytes, const Nvml& nvml, StoppingRule rule,
            double throttle_threshold, int warmup_samples);
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;

    //! @brief Times `launch`. `reset` runs before each sample, outside the events (restores inputs).
    //! @throws CudaError naming `what` when a launch or a CUDA call fails
    RowTiming time(const std::string& what, const TimingMode& mode, const std::function<void()>& reset,
                   const std::function<cudaError_t()>& launch);

    //! @brief A row to time in turn with others: its name in messages, and its launch.
    struct TimedCall {
        std::string what;
        std::function<cudaError_t()> launch;
    };

    //! @brief Times several rows in turn, one sample of each per round (`reset` before every sample), until the
    //!        stopping rule holds for each: under a power limit the SM clock follows what ran before, and rows
    //!        sampled in turn share that history, where rows timed one after the other would not.
    //! @return one timing per call, in their order
    std::vector<RowTiming> time_in_turn(const std::vector<TimedCall>& calls, const TimingMode& mode,
                                        const std::function<void()>& reset);

    //! @brief Called with each row's name, timing mode and timing as the row finishes (the progress lines).
    using RowObserver = std::function<void(const std::string& what, const TimingMode& mode, const RowTiming& timing)>;
    void observe_rows(RowObserver observer) { observer_ = std::move(observer); }

    const StoppingRule& rule() const { return rule_; }
    double throttle_threshold() const { return throttle_threshold_; }
    double highest_clock_mhz() const { return highest_clock_mhz_; }
    //! @brief The buffer written before each cold sample (twice the L2), for timing done beside the sampler, as a
    //!        library's pick of its fastest configuration (core/pick.hpp) is.
    DeviceBuffer<unsigned char>& l2_flush() { return l2_flush_; }

private:
    double one_sample(const std::string& what, const TimingMode& mode, const std::function<void()>& reset,
                      const std::function<cudaError_t()>& launch);

    const Nvml& nvml_;
    StoppingRule rule_;
    double throttle_threshold_;
    int warmup_samples_;
    DeviceBuffer<unsigned char> l2_flush_;
    EventTimer timer_;
    double highest_clock_mhz_ = 0;
    RowObserver observer_;
};

}  // namespace stepwise
