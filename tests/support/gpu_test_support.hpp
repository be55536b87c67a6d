// What every GPU test needs: a skip with the reason when there is no GPU, and fresh seeds.
#pragma once

#include "core/cuda_check.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace stepwise::testing {

//! A new seed for every test run; tests print it with SCOPED_TRACE so a failure can be replayed.
inline std::uint64_t fresh_seed()
{
    std::random_device entropy;
    return (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
}

}  // namespace stepwise::testing

//! Skips the current test, with a one-line reason, when no CUDA GPU is usable.
#define STEPWISE_SKIP_WITHOUT_GPU()                                                              \
    do {                                                                                         \
        if (const std::string reason = ::stepwise::cuda_unavailable_reason(); !reason.empty()) { \
            GTEST_SKIP() << "no usable CUDA GPU: " << reason;                                    \
        }                                                                                        \
    } while (0)
