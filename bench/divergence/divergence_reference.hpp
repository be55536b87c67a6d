// The warp-divergence chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::divergence {

//! @brief How a step assigns the two kinds of work to items: by the item's index or by its warp.
enum class BranchRule {
    by_index,  //!< `index % 2 == 0`: sine sum (steps 1 and 2)
    by_warp,   //!< `(index / 32) % 2 == 0`: sine sum (step 3)
};

//! @brief The problem every step solves (the snippets' constants, checked against them in divergence_steps.cu).
constexpr int work_iterations = 256;
constexpr float angle_step = 0.01f;

//! @brief Allowed absolute error of a sum of 256 terms, each within 2^-21.41 (about 3.6e-7) of its value for
//!        angles within [-pi, pi] (`__sinf`, `__cosf`; our angles reach 3 + 2.55, where the error stays of that
//!        order), plus float rounding of the running sum (below 256 * 2^-24 * 256 / 2): under 2.5e-3 in all.
constexpr double sum_tolerance = 4e-3;

//! @brief The angles the chapter measures: `count` values uniform in [-3, 3).
std::vector<float> random_angles(std::size_t count, std::uint64_t seed);

//! @brief The sums in double: for item i, the sum over k < work_iterations of sin (or cos, per `rule`) of the
//!        float angle `x + k * angle_step` as the GPU forms it.
std::vector<double> reference_sums(const std::vector<float>& input, BranchRule rule);

//! @brief How far a GPU result is from the reference.
struct Comparison {
    double max_abs_error = 0;
    double max_rel = 0;  //!< max |error| / max(|reference|, 1): relative where the sum is large, absolute near 0
    std::size_t over_tolerance = 0;
    std::size_t nan_mismatches = 0;  //!< NaN in one of output and reference, not the other
    std::size_t worst_index = 0;
    double worst_output = 0, worst_reference = 0;

    bool within_tolerance() const { return over_tolerance == 0 && nan_mismatches == 0; }
    std::string describe() const;
};

//! @brief Compares `output` with `reference` element by element, absolute error at most `tolerance`; a NaN
//!        reference must be matched by a NaN, and a NaN output never passes otherwise.
Comparison compare(const std::vector<float>& output, const std::vector<double>& reference, double tolerance);

}  // namespace stepwise::divergence
