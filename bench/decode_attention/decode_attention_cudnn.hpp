// The decode attention chapter's library baseline: cuDNN 9's scaled dot-product attention forward (SDPA) reading the
// same paged K/V cache through its page table, through its graph API (the header-only cudnn-frontend), with cuDNN
// opened at run time, as the attention chapter's baseline. Its fastest engine configuration per problem: every plan
// its heuristics offer is built and timed in turn (core/pick.hpp), so that a rerun does not hand back another engine
// than the one recorded.
#pragma once

#include "core/pick.hpp"
#include "decode_attention/decode_attention_reference.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stepwise::decode_attention {

//! @brief The device buffers of one call: q, the K and V pools, the page table, each sequence's length and q_len
//!        (`q_lens`: p.batch ints, each p.q_len, cuDNN's sequence lengths of q), o and the log-sum-exps.
struct PagedBuffers {
    const void* d_q;
    const void* d_k;
    const void* d_v;
    const int* d_page_table;
    const int* d_lengths;
    const int* d_q_lens;
    void* d_o;
    float* d_lse;
};

//! @brief cuDNN's SDPA forward over a paged cache: O = softmax(scale q K^T) V and each row's log-sum-exp, bf16 q, K, V,
//!        O, fp32 log-sum-exp, in the chapter's layouts (q and O [batch, q_len, heads, head_dim], the log-sum-exp
//!        [batch, q_len, heads], the pools [num_pages, page_size, kv_heads, head_dim] with the page table [batch,
//!        max_pages] for both K and V), each sequence's cache length from the lengths on the device (cuDNN's padding
//!        mask) and its q_len new tokens causal among themselves at the cache's end (cuDNN's bottom-right causal mask,
//!        where q_len > 1); one cudnn-frontend graph per problem, built once and kept.
class CudnnPagedSdpa {
public:
    //! @brief Creates a handle on the current device in the process's cuDNN; where it cannot, or where the build
    //!        had no cudnn.h or cudnn-frontend headers, `available()` is false and `reason()` says why in one line.
    CudnnPagedSdpa();
    ~CudnnPagedSdpa();
    CudnnPagedSdpa(const CudnnPagedSdpa&) = delete;
    CudnnPagedSdpa& operator=(const CudnnPagedSdpa&) = delete;

    bool available() const { return reason_.empty(); }
    const std::string& reason() const { return reason_; }
    const std::string& version() const { return version_; }

    //! @brief Builds and keeps the graph of one problem, every execution plan that the heuristics (A, then the
    //!        fallback list) offer and that builds, and a workspace for the largest, so that no timed call does; then
    //!        times the plans that run in turn on these buffers as `rule` says (L2 flushed by writing `d_flush` before
    //!        each sample) and keeps the fastest for run().
    //! @return every plan (its engine's name) with its medians, in the heuristics' order, and the index of the one
    //!         kept; no candidate where cuDNN refuses the problem (last_status() says why)
    //! @throws CudaError when a CUDA call fails
    std::pair<std::vector<PickedCandidate>, std::size_t> pick(const PagedBuffers& buffers, const Problem& p,
                                                              float scale, const PickRule& rule, void* d_flush,
                                                              std::size_t flush_bytes, cudaStream_t stream);

    //! @brief Runs the problem on `stream` with the plan pick() kept, else the heuristics' first plan (building the
    //!        problem's graph first where pick() has not).
    //! @return cudaSuccess, or cudaErrorNotSupported where cuDNN refuses the problem (see last_status())
    cudaError_t run(const PagedBuffers& buffers, const Problem& p, float scale, cudaStream_t stream);

    //! @brief What the last call came to, in one line: cuDNN's status, or where cuDNN refused, why.
    const std::string& last_status() const { return last_status_; }

private:
    struct Api;
    struct Plan;
    Plan* plan(const Problem& p, float scale, cudaError_t& status);
    cudaError_t execute(Plan& plan, std::int64_t plan_index, const PagedBuffers& buffers, cudaStream_t stream);
    std::unique_ptr<Api> api_;
    std::string reason_, version_, last_status_;
};

}  // namespace stepwise::decode_attention
