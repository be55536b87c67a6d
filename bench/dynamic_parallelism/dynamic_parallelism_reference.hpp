// The dynamic-parallelism chapter's problem and CPU reference (shared by tests and timing program).
#pragma once

#include <cmath>
#include <string>

#ifdef __CUDACC__
#define STEPWISE_HOST_DEVICE __host__ __device__
#else
#define STEPWISE_HOST_DEVICE
#endif

namespace stepwise::dynamic_parallelism {

//! @brief The integrand of the adaptive steps: three Lorentzian peaks on [0, 1], of half-widths 1e-3, 1e-2 and
//!        3e-4, f(x) = sum 1 / ((x - c)^2 + w^2). Narrow peaks need fine intervals, the rest coarse ones: the
//!        work is known only as it is done.
struct Peaks {
    STEPWISE_HOST_DEVICE double operator()(double x) const
    {
        return 1.0 / ((x - 0.3) * (x - 0.3) + 1e-6) + 1.0 / ((x - 0.71) * (x - 0.71) + 1e-4) +
               1.0 / ((x - 0.9) * (x - 0.9) + 9e-8);
    }
};

//! @brief The measured problem: the integral of `Peaks` over [0, 1], from 1000 equal intervals, to 1e-5 (11 levels).
constexpr double lower = 0.0, upper = 1.0;
constexpr int initial_intervals = 1000;
constexpr double tolerance = 1e-5;
//! @brief How close the steps must come to the exact integral, relative: far above the rounding of the sums and
//!        of the Richardson-corrected Simpson sums at this tolerance (the CPU reference is within 1e-15).
constexpr double integral_rel_tolerance = 1e-9;
//! @brief Intervals a level may hold (the measured problem needs at most 1,000).
constexpr int list_capacity = 1 << 16;

//! @brief The integral of `Peaks` over [a, b], in closed form (sum of arctangents).
double exact_integral(double a, double b);

//! @brief What the CPU's adaptive integration found: the same algorithm as the steps, level by level, in double.
struct AdaptiveResult {
    double integral = 0;
    int levels = 0;          //!< levels that had intervals
    long long intervals = 0; //!< intervals evaluated, over all levels
    int widest_level = 0;    //!< the most intervals one level had
};

//! @brief Adaptive Simpson integration as the steps do it (accept where |halves - whole| <= 15 tol (b - a) /
//!        (upper - lower), else refine), with at most `max_levels` levels.
AdaptiveResult adaptive_reference(double a, double b, int initial, double tolerance, int max_levels);

}  // namespace stepwise::dynamic_parallelism
