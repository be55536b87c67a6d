// The dynamic-parallelism chapter's integrand and CPU reference (no GPU needed).
#include "dynamic_parallelism/dynamic_parallelism_reference.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace stepwise::dynamic_parallelism {
namespace {

TEST(DynamicParallelismReference, ExactIntegralIsAdditiveAndMatchesAFineMidpointSum)
{
    EXPECT_NEAR(exact_integral(0.0, 0.5) + exact_integral(0.5, 1.0), exact_integral(0.0, 1.0), 1e-9);
    // Away from the peaks a plain midpoint sum converges quickly.
    const Peaks f;
    const int steps = 100000;
    double sum = 0.0;
    for (int i = 0; i < steps; ++i) {
        sum += f(0.4 + (i + 0.5) * 0.2 / steps) * 0.2 / steps;
    }
    EXPECT_NEAR(sum, exact_integral(0.4, 0.6), 1e-9 * sum);
}

TEST(DynamicParallelismReference, AdaptiveReferenceReachesTheExactIntegralOnTheMeasuredProblem)
{
    const AdaptiveResult r = adaptive_reference(lower, upper, initial_intervals, tolerance, 16);
    const double exact = exact_integral(lower, upper);
    EXPECT_LE(std::fabs(r.integral - exact), integral_rel_tolerance * exact) << r.integral << " vs " << exact;
    EXPECT_LT(r.levels, 16) << "the measured problem must converge before the steps' level limit";
    EXPECT_GT(r.levels, 5) << "and needs several levels, or nothing is adaptive";
    EXPECT_LE(r.widest_level, list_capacity);
}

TEST(DynamicParallelismReference, ALooseToleranceNeedsFewerIntervalsAndIsLessAccurate)
{
    const AdaptiveResult tight = adaptive_reference(lower, upper, initial_intervals, tolerance, 16);
    const AdaptiveResult loose = adaptive_reference(lower, upper, initial_intervals, 1e-1, 16);
    EXPECT_LT(loose.intervals, tight.intervals);
    const double exact = exact_integral(lower, upper);
    EXPECT_GT(std::fabs(loose.integral - exact), std::fabs(tight.integral - exact));
}

TEST(DynamicParallelismReference, TheLevelLimitStopsRefinement)
{
    const AdaptiveResult r = adaptive_reference(lower, upper, 1, tolerance, 3);
    EXPECT_EQ(r.levels, 3);
    EXPECT_EQ(r.intervals, 1 + 2 + 4);
}

}  // namespace
}  // namespace stepwise::dynamic_parallelism
