#include "attention/attention_cudnn.hpp"

#include "core/cudnn_library.hpp"

#include <string>

#if STEPWISE_CUDNN_HEADER && STEPWISE_CUDNN_FRONTEND
#ifndef NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#error "cudnn-frontend must open cuDNN at run time (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): nothing links libcudnn"
#endif
#include "core/cuda_check.hpp"
#include "core/cudnn_calls.hpp"
#include "core/cudnn_graph.hpp"
#include "core/device_buffer.hpp"

#include <cudnn_frontend.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#endif

namespace stepwise::attention {

#if STEPWISE_CUDNN_HEADER && STEPWISE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;
using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

//! One problem's graph (built, with every execution plan that built), its tensors, a workspace for the largest plan,
//! and the plan that run() executes (pick()'s, else the heuristics' first).
struct CudnnSdpa::Plan {
    fe::graph::Graph graph;
    Tensor q, k, v, o, lse;
    std::vector<GraphPlan> candidates;
    std::size_t kept = 0;
    DeviceBuffer<unsigned char> workspace;
};

//! The handle, the cuDNN functions the baseline calls itself (core/cudnn_calls.hpp) and the kept plans (destroyed
//! before the handle).
struct CudnnSdpa::Api : CudnnCalls {
    //! By batch, heads, kv_heads, seq, head_dim, causal and the scale's bits.
    std::map<std::tuple<int, int, int, int, int, bool, std::uint32_t>, std::unique_ptr<Plan>> plans;
};

CudnnSdpa::CudnnSdpa() : api_(std::make_unique<Api>()) { reason_ = open_for_graphs(*api_, version_); }

CudnnSdpa::~CudnnSdpa() = default;

CudnnSdpa::Plan* CudnnSdpa::plan(const Problem& pr, float scale, cudaError_t& status)
{
    std::uint32_t scale_bits = 0;
    std::memcpy(&scale_bits, &scale, sizeof(scale_bits));
    const auto describe = [&](Plan& p, int sm_version, std::int64_t& workspace_bytes) {
        fe::graph::Graph& g = p.graph;
        set_types(g, fe::DataType_t::BFLOAT16, sm_version);
        const std::int64_t b = pr.batch, h = pr.heads, hk = pr.kv_heads, s = pr.seq, d = pr.head_dim;
        const auto bhsd = [&](const char* name, std::int64_t heads) { return bhsd_tensor(g, name, b, heads, s, d); };
        p.q = bhsd("Q", h);
        p.k = bhsd("K", hk);
        p.v = bhsd("V", hk);
        auto [o, lse] = g.sdpa(p.q, p.k, p.v,
                               fe::graph::SDPA_attributes()
                                   .set_name("sdpa")
                                   .set_generate_stats(true)
                                   .set_attn_scale(scale)
                                   .set_causal_mask(pr.causal));
        o->set_output(true).set_dim({b, h, s, d}).set_stride({h * s * d, s * d, d, 1});
        lse->set_output(true).set_data_type(fe::DataType_t::FLOAT).set_dim({b, h, s, 1}).set_stride({h * s, s, 1, 1});
        p.o = o;
        p.lse = lse;
        return build_every_graph_plan(g, api_->handle, p.candidates, workspace_bytes);
    };
    return kept_graph_plan(api_->plans,
                           std::make_tuple(pr.batch, pr.heads, pr.kv_heads, pr.seq, pr.head_dim, pr.causal, scale_bits),
                           *api_, reason_, last_status_, status, describe);
}

cudaError_t CudnnSdpa::execute(Plan& p, std::int64_t plan_index, const void* d_q, const void* d_k, const void* d_v,
                               void* d_o, float* d_lse, cudaStream_t stream)
{
    return execute_graph(*api_, stream, "execute_plan_at_index", last_status_, [&] {
        std::unordered_map<Tensor, void*> pack = {{p.q, const_cast<void*>(d_q)},
                                                  {p.k, const_cast<void*>(d_k)},
                                                  {p.v, const_cast<void*>(d_v)},
                                                  {p.o, d_o},
                                                  {p.lse, d_lse}};
        return p.graph.execute_plan_at_index(api_->handle, pack, p.workspace.data(), plan_index);
    });
}

std::pair<std::vector<PickedCandidate>, std::size_t> CudnnSdpa::pick(const void* d_q, const void* d_k, const void* d_v,
                                                                     void* d_o, float* d_lse, const Problem& pr,
                                                                     float scale, const PickRule& rule, void* d_flush,
                                                                     std::size_t flush_bytes, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(pr, scale, status);
    if (p == nullptr) {
        return {};
    }
    // A plan that built but does not run here is left out of the pick (and of run()).
    return pick_graph_plan(*p, *api_, last_status_, rule, d_flush, flush_bytes, stream, [=, this](std::int64_t index) {
        return execute(*p, index, d_q, d_k, d_v, d_o, d_lse, stream);
    });
}

cudaError_t CudnnSdpa::run(const void* d_q, const void* d_k, const void* d_v, void* d_o, float* d_lse,
                           const Problem& pr, float scale, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(pr, scale, status);
    if (p == nullptr) {
        return status;
    }
    return execute(*p, p->candidates[p->kept].index, d_q, d_k, d_v, d_o, d_lse, stream);
}

#else  // built without cudnn.h or without cudnn-frontend's headers

struct CudnnSdpa::Api {};
struct CudnnSdpa::Plan {};

CudnnSdpa::CudnnSdpa() : reason_("the build found no cudnn.h or no cudnn_frontend.h (see the normalization baseline)") {}
CudnnSdpa::~CudnnSdpa() = default;

std::pair<std::vector<PickedCandidate>, std::size_t> CudnnSdpa::pick(const void*, const void*, const void*, void*,
                                                                     float*, const Problem&, float, const PickRule&,
                                                                     void*, std::size_t, cudaStream_t)
{
    last_status_ = reason_;
    return {};
}

cudaError_t CudnnSdpa::run(const void*, const void*, const void*, void*, float*, const Problem&, float, cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

#endif

}  // namespace stepwise::attention
