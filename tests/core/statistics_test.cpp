#include "core/statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace stepwise {
namespace {

TEST(Statistics, OddCountMedianIsTheMiddleSample)
{
    const SampleSummary s = summarize({5.0, 1.0, 3.0});
    EXPECT_EQ(s.samples, 3u);
    EXPECT_DOUBLE_EQ(s.median_ms, 3.0);
    EXPECT_DOUBLE_EQ(s.min_ms, 1.0);
    EXPECT_DOUBLE_EQ(s.max_ms, 5.0);
    EXPECT_DOUBLE_EQ(s.mean_ms, 3.0);
    EXPECT_DOUBLE_EQ(s.stdev_ms, 2.0);
    EXPECT_DOUBLE_EQ(s.rel_noise, 2.0 / 3.0);
}

TEST(Statistics, EvenCountMedianIsTheMeanOfTheMiddlePair)
{
    EXPECT_DOUBLE_EQ(summarize({4.0, 1.0, 2.0, 100.0}).median_ms, 3.0);
}

TEST(Statistics, OneSampleHasNoSpread)
{
    const SampleSummary s = summarize({0.25});
    EXPECT_DOUBLE_EQ(s.median_ms, 0.25);
    EXPECT_DOUBLE_EQ(s.stdev_ms, 0.0);
}

TEST(Statistics, RejectsEmptyAndNonPositiveAndNonFiniteSamples)
{
    EXPECT_THROW(summarize({}), std::invalid_argument);
    EXPECT_THROW(summarize({1.0, 0.0}), std::invalid_argument);
    EXPECT_THROW(summarize({1.0, -2.0}), std::invalid_argument);
    EXPECT_THROW(summarize({1.0, std::numeric_limits<double>::quiet_NaN()}), std::invalid_argument);
    EXPECT_THROW(summarize({std::numeric_limits<double>::infinity()}), std::invalid_argument);
}

TEST(StoppingRule, WaitsForTheMinimumSampleCount)
{
    StoppingRule rule;
    rule.min_samples = 10;
    EXPECT_FALSE(rule.done(std::vector<double>(9, 1.0), 0.0));
    EXPECT_TRUE(rule.done(std::vector<double>(10, 1.0), 0.0));  // no noise at all
}

TEST(StoppingRule, KeepsSamplingWhileTheMeanIsImprecise)
{
    StoppingRule rule;
    rule.min_samples = 4;
    rule.target_rel_stderr = 0.01;
    // stdev/mean = 0.5: needs (0.5 / 0.01)^2 = 2500 samples
    std::vector<double> noisy;
    for (int i = 0; i < 100; ++i) {
        noisy.push_back(i % 2 ? 1.5 : 0.5);
    }
    EXPECT_FALSE(rule.done(noisy, 0.0));
}

TEST(StoppingRule, StopsAtTheTimeLimitOrTheSampleLimit)
{
    StoppingRule rule;
    rule.min_samples = 1000;
    rule.max_samples = 20;
    rule.max_seconds_per_row = 2.0;
    EXPECT_TRUE(rule.done(std::vector<double>(20, 1.0), 0.0));
    EXPECT_FALSE(rule.done(std::vector<double>(5, 1.0), 1.9));
    EXPECT_TRUE(rule.done(std::vector<double>(5, 1.0), 2.0));
}

TEST(Warmup, TakesTheWantedSamplesOrHalfTheRowsTimeLimit)
{
    EXPECT_FALSE(warmup_done(0, 3, 0.0, 1.0));
    EXPECT_FALSE(warmup_done(2, 3, 0.1, 1.0));
    EXPECT_TRUE(warmup_done(3, 3, 0.1, 1.0));
    EXPECT_TRUE(warmup_done(1, 3, 0.5, 1.0));   // one slow sample already took half the limit
    EXPECT_FALSE(warmup_done(0, 3, 10.0, 1.0)); // but at least one warm-up sample
    EXPECT_TRUE(warmup_done(0, 0, 0.0, 1.0));   // --warmup-samples 0
}

TEST(Throttle, ASampleBelowTheThresholdOfTheHighestClockIsThrottled)
{
    EXPECT_TRUE(is_throttled(1700, 1980, 0.9));
    EXPECT_FALSE(is_throttled(1785, 1980, 0.9));
    EXPECT_FALSE(is_throttled(1980, 1980, 0.9));
}

}  // namespace
}  // namespace stepwise
