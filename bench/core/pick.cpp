#include "core/pick.hpp"

#include "core/cuda_check.hpp"
#include "core/sampler.hpp"
#include "core/statistics.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace stepwise {

std::vector<double> median_ms_in_turn(const std::vector<std::function<cudaError_t()>>& launches, const PickRule& rule,
                                      void* d_flush, std::size_t flush_bytes, cudaStream_t stream)
{
    for (const auto& launch : launches) {
        for (int i = 0; i < rule.warmup_launches; ++i) {
            STEPWISE_CUDA_CHECK(launch());
        }
    }
    EventTimer timer(stream);
    std::vector<std::vector<double>> samples(launches.size());
    for (int round = 0; round < rule.samples; ++round) {
        for (std::size_t i = 0; i < launches.size(); ++i) {
            samples[i].push_back(
                timer.sample_ms("candidate " + std::to_string(i), launches[i], 1, d_flush, flush_bytes, round & 0xFF));
        }
    }
    std::vector<double> medians;
    for (const std::vector<double>& s : samples) {
        medians.push_back(summarize(s).median_ms);
    }
    return medians;
}

std::size_t index_of_fastest(const std::vector<double>& median_ms)
{
    if (median_ms.empty()) {
        throw std::invalid_argument("index_of_fastest: no candidate was timed");
    }
    return static_cast<std::size_t>(std::min_element(median_ms.begin(), median_ms.end()) - median_ms.begin());
}

std::vector<std::size_t> fastest_indices(const std::vector<double>& median_ms, std::size_t count)
{
    std::vector<std::size_t> order(median_ms.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return median_ms[a] < median_ms[b];
    });
    order.resize(std::min(count, order.size()));
    return order;
}

PickTimes pick_fastest(const std::vector<std::function<cudaError_t()>>& launches, const PickRule& rule, void* d_flush,
                       std::size_t flush_bytes, cudaStream_t stream)
{
    if (launches.empty()) {
        throw std::invalid_argument("pick_fastest: no candidate to time");
    }
    PickTimes times;
    times.median_ms = median_ms_in_turn(launches, rule, d_flush, flush_bytes, stream);
    times.final_median_ms.assign(launches.size(), -1.0);
    const std::vector<std::size_t> finalists =
        fastest_indices(times.median_ms, std::max<std::size_t>(rule.finalists, 1));
    std::vector<std::function<cudaError_t()>> final_launches;
    for (const std::size_t i : finalists) {
        final_launches.push_back(launches[i]);
    }
    PickRule final_rule = rule;
    final_rule.warmup_launches = 0;  // warm from the first rounds
    final_rule.samples = rule.final_samples;
    const std::vector<double> final_ms = median_ms_in_turn(final_launches, final_rule, d_flush, flush_bytes, stream);
    for (std::size_t f = 0; f < finalists.size(); ++f) {
        times.final_median_ms[finalists[f]] = final_ms[f];
    }
    times.kept = finalists[index_of_fastest(final_ms)];
    return times;
}

std::vector<PickedCandidate> picked_candidates(const std::vector<std::string>& names, const PickTimes& times)
{
    if (names.size() != times.median_ms.size() || names.size() != times.final_median_ms.size()) {
        throw std::invalid_argument("picked_candidates: " + std::to_string(names.size()) + " names for " +
                                    std::to_string(times.median_ms.size()) + " timed candidates");
    }
    std::vector<PickedCandidate> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        out.push_back({names[i], times.median_ms[i], times.final_median_ms[i]});
    }
    return out;
}

std::string describe(const PickRule& rule)
{
    return "each candidate " + std::to_string(rule.warmup_launches) + " warm-up launches, then " +
           std::to_string(rule.samples) + " rounds of one cold launch of each in turn (L2 flushed); the " +
           std::to_string(rule.finalists) + " of the smallest medians " + std::to_string(rule.final_samples) +
           " rounds more; the smallest final median kept";
}

void add_pick(nlohmann::json& row, const std::vector<PickedCandidate>& candidates, std::size_t kept,
              const PickRule& rule)
{
    row["config"] = candidates.at(kept).config;
    row["pick_candidates"] = nlohmann::json::array();
    for (const PickedCandidate& c : candidates) {
        nlohmann::json candidate = {{"config", c.config}, {"median_ms", c.median_ms}};
        if (c.final_median_ms >= 0) {
            candidate["final_median_ms"] = c.final_median_ms;
        }
        row["pick_candidates"].push_back(candidate);
    }
    row["pick_rule"] = describe(rule);
}

}  // namespace stepwise
