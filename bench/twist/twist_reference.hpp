// The y-twist chapter's CPU reference, inputs and comparison (shared by tests and timing program).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepwise::twist {

//! @brief The twist the chapter measures: 1.5 radians per unit of height (magnitude 2, envelope 0.75).
constexpr float measured_magnitude = 2.0f;
constexpr float measured_env = 0.75f;
//! @brief The measured vertices lie in the cube [-2, 2]^3: every angle is within [-3, 3] radians.
constexpr float measured_extent = 2.0f;

//! @brief Error bounds in units in the last place of r = hypot(x, z), the radius the rotation keeps.
//!
//! Exact `sincosf` (2 ulp) and four float multiply-adds: |error| <= (2 sqrt(2) + 2) u r plus rounding, under
//! 5.3 ulp of r. The approximate `__cosf`/`__sinf` are within 2^-21.41 absolute for angles in [-pi, pi]:
//! about 6 u each, so sqrt(2) * 6 + 2 < 11 ulp of r, and nothing is promised outside [-pi, pi].
constexpr double exact_tolerance_ulp = 6.0;
constexpr double approximate_tolerance_ulp = 11.0;

//! @brief `count` vertices with x, y and z uniform in [-extent, extent) and w = 1.
std::vector<float4> random_points(std::size_t count, float extent, std::uint64_t seed);

//! @brief Vertices the source's code handles specially or that stress it: angle exactly zero (y = +0 and -0, with
//!        infinite x and z, which a rotation by zero would turn into NaN), NaN and infinite coordinates, huge and
//!        tiny values, the origin.
std::vector<float4> special_points();

//! @brief The angle of a vertex as every step computes it, in float: `magnitude * y * env`.
float twist_angle(float y, float magnitude, float env);

//! @brief A twisted vertex in double precision.
struct Twisted {
    double x, y, z, w;
};

//! @brief The operation: where the float angle is not zero, x and z rotated by it (cos and sin in double, of the
//!        float angle); where it is zero, the vertex unchanged; y and w always unchanged.
std::vector<Twisted> reference_twist(const std::vector<float4>& points, float magnitude, float env);

//! @brief How far a GPU result is from the reference.
struct Comparison {
    double max_ulp = 0;            //!< max |out - ref| over x and z, in ulps of r (finite references only)
    double max_rel = 0;            //!< max |out - ref| / max(|ref|, ulp of r)
    std::size_t special_mismatches = 0;  //!< NaN or infinite references not matched, and changed y or w
    std::size_t over_tolerance = 0;
    std::size_t worst_index = 0;
    std::string first_special;     //!< the first special mismatch, described

    bool within_tolerance() const { return special_mismatches == 0 && over_tolerance == 0; }
    //! One line naming the worst element (or the first special mismatch).
    std::string describe() const;
};

//! @brief Compares `output` with `reference` (of `input`), every vertex within `tolerance_ulp` ulps of its r.
//!        Where the reference has no finite float value (NaN, or beyond the float range), the output must be NaN
//!        or the same infinity; y and w must keep their bits.
Comparison compare(const std::vector<float4>& input, const std::vector<float4>& output,
                   const std::vector<Twisted>& reference, double tolerance_ulp);

//! @brief One unit in the last place of a float of magnitude `r` (the smallest subnormal for r = 0).
double ulp_of(double r);

}  // namespace stepwise::twist
