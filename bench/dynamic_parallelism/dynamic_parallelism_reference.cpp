#include "dynamic_parallelism/dynamic_parallelism_reference.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace stepwise::dynamic_parallelism {

double exact_integral(double a, double b)
{
    const double centers[] = {0.3, 0.71, 0.9};
    const double widths[] = {1e-3, 1e-2, 3e-4};
    double sum = 0.0;
    for (int i = 0; i < 3; ++i) {
        sum += (std::atan((b - centers[i]) / widths[i]) - std::atan((a - centers[i]) / widths[i])) / widths[i];
    }
    return sum;
}

AdaptiveResult adaptive_reference(double a, double b, int initial, double tolerance, int max_levels)
{
    const Peaks f;
    const double tolerance_per_unit = tolerance / (b - a);
    std::vector<std::pair<double, double>> level_list;
    const double width = (b - a) / initial;
    for (int i = 0; i < initial; ++i) {
        level_list.emplace_back(a + i * width, i + 1 == initial ? b : a + (i + 1) * width);
    }
    AdaptiveResult result;
    for (int level = 0; level < max_levels && !level_list.empty(); ++level) {
        std::vector<std::pair<double, double>> next;
        result.levels = level + 1;
        result.intervals += static_cast<long long>(level_list.size());
        result.widest_level = std::max(result.widest_level, static_cast<int>(level_list.size()));
        for (const auto& [lo, hi] : level_list) {
            const double m = 0.5 * (lo + hi);
            const double fa = f(lo), fm = f(m), fb = f(hi), fl = f(0.5 * (lo + m)), fr = f(0.5 * (m + hi));
            const double whole = (hi - lo) / 6.0 * (fa + 4.0 * fm + fb);
            const double halves = (m - lo) / 6.0 * (fa + 4.0 * fl + fm) + (hi - m) / 6.0 * (fm + 4.0 * fr + fb);
            const double error = halves - whole;
            if (std::fabs(error) <= 15.0 * tolerance_per_unit * (hi - lo) || level + 1 == max_levels) {
                result.integral += halves + error / 15.0;
            } else {
                next.emplace_back(lo, m);
                next.emplace_back(m, hi);
            }
        }
        level_list = std::move(next);
    }
    return result;
}

}  // namespace stepwise::dynamic_parallelism
