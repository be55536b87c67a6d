// The y-twist chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"

#include <cuda_runtime.h>

#include <vector>

namespace stepwise::twist {

//! @brief A step's launcher: twists `num_points` vertices in place.
using TwistFunction = cudaError_t (*)(float4* d_points, int num_points, float magnitude, float env,
                                      cudaStream_t stream);

//! @brief One step of the chapter.
struct Step : StepSource {
    bool beyond_article;     //!< not one of the source's four steps
    bool same_operation;     //!< accurate for every angle (exact sincosf), not only within [-pi, pi]
    bool one_thread;         //!< all the work in a single thread: timed and tested at small sizes only
    double tolerance_ulp;    //!< allowed error, in ulps of r, for angles in [-pi, pi] (and any, if same_operation)
    TwistFunction twist;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

}  // namespace stepwise::twist
