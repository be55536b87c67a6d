// The element-wise chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::elementwise {

constexpr int assignment_dimx = 2048;  //!< the assignment's columns
constexpr int assignment_dimy = 2048;  //!< the assignment's rows

//! @brief The assignment's data: `10 + (random integer in 0..255)` for every element.
std::vector<float> assignment_input(int dimx, int dimy, std::uint64_t seed);

//! @brief Uniform random non-integer values in [low, high): inputs off the lookup table's domain.
std::vector<float> uniform_input(int dimx, int dimy, float low, float high, std::uint64_t seed);

//! @brief `applications` updates of `input` in double precision: odd columns `v + sqrt(log v + 1)`,
//!        even columns `v + sqrt(cos v + 1)`.
std::vector<double> reference_update(const std::vector<float>& input, int dimx, int dimy, int applications = 1);

//! @brief How accurate a step's inner function f (log or cos) is: |error| <= 2^exponent * max(|f(v)|, 1).
//! `logf` and `cosf` are within 2 ulp, and adding 1 rounds once more: 2^-22. The approximate
//! `__logf`/`__cosf` are documented to 2^-21.41 absolute near zero and 3 ulp elsewhere: 2^-20.
constexpr int accurate_inner_error_exponent = -22;
constexpr int approximate_inner_error_exponent = -20;

//! @brief The error a float evaluation of one update may make, beyond rounding the result.
//!
//! `sqrt(x)` with `x = f(v) + 1` is ill-conditioned where `cos(v)` is near -1: an absolute error
//! `delta` in x becomes `delta / (2 sqrt(x))`, and at most `sqrt(delta)`, in the result. The tolerance
//! of an element is `tolerance_ulp` units in the last place of float(reference) plus this term,
//! computed from the element's own input with `delta = 2^inner_error_exponent * max(|f(v)|, 1)`.
double propagated_error_bound(float input, bool odd_column, int inner_error_exponent);

//! @brief How far a GPU result is from the double reference.
struct Comparison {
    double max_ulp = 0;          //!< max |out - ref| in units in the last place of float(ref)
    double max_rel = 0;          //!< max |out - ref| / |ref|
    double max_tolerance_used = 0; //!< max |out - ref| / tolerance: <= 1 passes
    std::size_t not_finite = 0;  //!< outputs that are NaN or infinite (never within tolerance)
    std::size_t worst_index = 0;
    float worst_output = 0;
    double worst_reference = 0;

    bool within_tolerance() const { return not_finite == 0 && max_tolerance_used <= 1.0; }
    //! One line naming the worst element, for test failure messages.
    std::string describe(int dimx) const;
};

//! @brief Compares one update of `input` (`output`) with its double reference, element by element.
Comparison compare(const std::vector<float>& input, const std::vector<float>& output,
                   const std::vector<double>& reference, int dimx, double tolerance_ulp,
                   int inner_error_exponent);

//! @brief Max |out - ref| / |ref| (infinite if any output is not finite); no tolerance involved.
double max_relative_error(const std::vector<float>& output, const std::vector<double>& reference);

}  // namespace stepwise::elementwise
