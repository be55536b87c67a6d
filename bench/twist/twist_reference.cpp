#include "twist/twist_reference.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

namespace stepwise::twist {

std::vector<float4> random_points(std::size_t count, float extent, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-extent, extent);
    std::vector<float4> out(count);
    for (float4& p : out) {
        p.x = uniform(rng);
        p.y = uniform(rng);
        p.z = uniform(rng);
        p.w = 1.f;
    }
    return out;
}

std::vector<float4> special_points()
{
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float big = std::numeric_limits<float>::max();
    const float tiny = std::numeric_limits<float>::denorm_min();
    return {
        {inf, 0.f, inf, 1.f},       {-inf, -0.f, inf, 2.f},   {nan, 0.f, 1.f, 3.f},    {1.f, 0.f, nan, 4.f},
        {1.f, 0.5f, inf, 5.f},      {inf, 0.5f, 1.f, 6.f},    {nan, 0.5f, 1.f, 7.f},   {1.f, nan, 1.f, 8.f},
        {1.f, inf, 1.f, 9.f},       {1.f, -inf, 1.f, 10.f},   {0.f, 1.f, 0.f, 11.f},   {-0.f, 1.f, -0.f, 12.f},
        {big, 0.25f, big, 13.f},    {tiny, 0.25f, tiny, 14.f}, {1e-30f, 1.f, 1e30f, 15.f}, {3.f, 1e-30f, 4.f, nan},
    };
}

float twist_angle(float y, float magnitude, float env)
{
    const volatile float product = magnitude * y;  // rounded to float here, as on the GPU
    return product * env;
}

std::vector<Twisted> reference_twist(const std::vector<float4>& points, float magnitude, float env)
{
    std::vector<Twisted> out(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
        const float4 p = points[i];
        const float angle = twist_angle(p.y, magnitude, env);
        out[i] = {p.x, p.y, p.z, p.w};
        if (angle != 0.f) {
            const double c = std::cos(static_cast<double>(angle));
            const double s = std::sin(static_cast<double>(angle));
            out[i].x = static_cast<double>(p.x) * c - static_cast<double>(p.z) * s;
            out[i].z = static_cast<double>(p.x) * s + static_cast<double>(p.z) * c;
        }
    }
    return out;
}

double ulp_of(double r)
{
    const double smallest = std::ldexp(1.0, -149);
    if (!(r > 0) || !std::isfinite(r)) {
        return smallest;
    }
    return std::max(std::ldexp(1.0, std::ilogb(r) - 23), smallest);
}

namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

//! Whether a reference has no finite float value: NaN, or beyond the float range (it rounds to an infinity).
bool special_reference(double expected) { return !std::isfinite(static_cast<float>(expected)); }

//! Whether a float output matches such a reference: NaN for NaN, else the infinity it rounds to.
bool matches_special(float got, double expected)
{
    if (std::isnan(expected)) {
        return std::isnan(got);
    }
    return got == static_cast<float>(expected);
}

}  // namespace

std::string Comparison::describe() const
{
    char text[240];
    if (special_mismatches > 0) {
        std::snprintf(text, sizeof text, "%zu special values mishandled; the first: %s", special_mismatches,
                      first_special.c_str());
    } else {
        std::snprintf(text, sizeof text, "max error %.3g ulp of r (vertex %zu), max relative error %.3g%s", max_ulp,
                      worst_index, max_rel, over_tolerance ? "; over tolerance" : "");
    }
    return text;
}

Comparison compare(const std::vector<float4>& input, const std::vector<float4>& output,
                   const std::vector<Twisted>& reference, double tolerance_ulp)
{
    if (input.size() != output.size() || input.size() != reference.size()) {
        throw std::invalid_argument("twist::compare: input, output and reference differ in size");
    }
    Comparison c;
    const auto special = [&](std::size_t i, const char* what, float got, double expected) {
        if (c.special_mismatches++ == 0) {
            char text[160];
            std::snprintf(text, sizeof text, "vertex %zu (%g, %g, %g, %g): %s is %g, expected %g", i, input[i].x,
                          input[i].y, input[i].z, input[i].w, what, got, expected);
            c.first_special = text;
        }
    };
    for (std::size_t i = 0; i < input.size(); ++i) {
        const float4 in = input[i];
        const float4 out = output[i];
        const Twisted& ref = reference[i];
        if (!same_bits(out.y, in.y)) {
            special(i, "y", out.y, ref.y);
        }
        if (!same_bits(out.w, in.w)) {
            special(i, "w", out.w, ref.w);
        }
        const double unit = ulp_of(std::hypot(static_cast<double>(in.x), static_cast<double>(in.z)));
        const std::pair<float, double> coordinates[] = {{out.x, ref.x}, {out.z, ref.z}};
        for (const auto& [got, expected] : coordinates) {
            if (special_reference(expected)) {
                if (!matches_special(got, expected)) {
                    special(i, &got == &coordinates[0].first ? "x" : "z", got, expected);
                }
                continue;
            }
            const double error = std::isfinite(got) ? std::fabs(static_cast<double>(got) - expected)
                                                    : std::numeric_limits<double>::infinity();
            const double in_ulp = error / unit;
            if (in_ulp > c.max_ulp || !std::isfinite(in_ulp)) {
                c.max_ulp = in_ulp;
                c.worst_index = i;
            }
            c.max_rel = std::max(c.max_rel, error / std::max(std::fabs(expected), unit));
            if (!(in_ulp <= tolerance_ulp)) {
                ++c.over_tolerance;
            }
        }
    }
    return c;
}

}  // namespace stepwise::twist
