// The decode attention chapter's step registry: the one list of its steps, for the tests and the timing program.
#pragma once

#include "core/resources.hpp"
#include "core/step_source.hpp"
#include "decode_attention/decode_attention_reference.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

namespace stepwise::decode_attention {

using bf16 = __nv_bfloat16;

//! @brief The device side of a paged K/V cache: the K and V pools [num_pages, page_size, kv_heads, head_dim] bf16, the
//!        page table [batch, max_pages] and each sequence's length [batch] (the Problem gives the sizes).
struct DevicePages {
    const bf16* d_k;
    const bf16* d_v;
    const int* d_page_table;
    const int* d_lengths;
};

//! @brief A step's `decode_attention` on the chapter's Problem (each step's launcher takes its own `Cache` and `Shape`,
//!        with the same fields): two phases, as CUB (with `d_temp_storage == nullptr` it only sets
//!        `temp_storage_bytes`). Only the Problem's sizes are read (batch, q_len, heads, kv_heads, head_dim,
//!        page_size, num_pages, max_pages); its lengths and table are those of `pages`, on the device.
using DecodeFunction = cudaError_t (*)(void* d_temp_storage, std::size_t& temp_storage_bytes, const bf16* d_q,
                                       const DevicePages& pages, bf16* d_o, float* d_lse, const Problem& p,
                                       float scale, cudaStream_t stream);

//! @brief One step of the chapter: every step takes bf16 q, K, V and o, and head_dim 64 or 128.
struct Step : StepSource {
    DecodeFunction decode;
    //! The alignment in bytes the step needs of the K and V pools (16 where a lane reads 16 bytes of a key).
    std::size_t pool_alignment;
    //! Whether the step keeps something in its workspace (steps 2 and 3 ask for a byte they do not use).
    bool uses_workspace;
    std::vector<KernelEntry> kernels;  //!< what the step launches, with the launcher's block shapes
    const char* needs = "";             //!< what the GPU and the build must offer ("sm_80"), or nothing
    bool (*needs_met)() = nullptr;      //!< whether the code the driver loaded for the current GPU has it
};

//! @brief Every step, in teaching order.
const std::vector<Step>& steps();

//! @brief Why the current GPU cannot run `step` ("needs sm_80: ..."), or empty when it can.
std::string unsupported_reason(const Step& step);

}  // namespace stepwise::decode_attention
