// What the GEMM chapters' GPU tests share (SGEMM, tensor cores): a problem's shape, its text, the shapes a step
// accepts.
#pragma once

#include "support/gpu_test_support.hpp"

#include <string>
#include <vector>

namespace stepwise::testing {

//! @brief C (M x N) = A (M x K) B (K x N).
struct GemmShape {
    int M, N, K;
};

inline std::string shape_text(GemmShape s)
{
    return std::to_string(s.M) + " x " + std::to_string(s.N) + " x " + std::to_string(s.K);
}

//! @brief The shapes of `all` that `step`'s launcher accepts (`step.accepts(M, N, K)`), in their order.
template <class Step>
std::vector<GemmShape> accepted_shapes(const Step& step, const std::vector<GemmShape>& all)
{
    return kept(all, [&](const GemmShape& s) { return step.accepts(s.M, s.N, s.K); });
}

}  // namespace stepwise::testing
