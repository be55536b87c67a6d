// The registry entry of one configuration of step 9's kernel: the step's list and the autotuning sweep both take it.
#pragma once

#include "core/resources.hpp"

#include "../../snippets/tensor_core_gemm/09_ping_pong.cuh"

#include <string>
#include <utility>

namespace stepwise::tensor_core_gemm {

//! @brief `ping_pong::gemm_kernel<Cfg>` under `name`, with the block and shared memory its launcher gives it.
template <class Cfg>
KernelEntry ping_pong_kernel(std::string name)
{
    return kernel_entry(std::move(name), ping_pong::gemm_kernel<Cfg>, dim3(Cfg::threads), Cfg::smem_bytes);
}

}  // namespace stepwise::tensor_core_gemm
