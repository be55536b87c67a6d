#include "decode_attention/decode_attention_cudnn.hpp"

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

#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#endif

namespace stepwise::decode_attention {

#if STEPWISE_CUDNN_HEADER && STEPWISE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;
using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

//! One problem's graph (built, with every execution plan that built), its tensors, a workspace for the largest plan,
//! and the plan that run() executes (pick()'s, else the heuristics' first).
struct CudnnPagedSdpa::Plan {
    fe::graph::Graph graph;
    Tensor q, k, v, o, lse, page_table_k, page_table_v, q_lens, kv_lens;
    std::vector<GraphPlan> candidates;
    std::size_t kept = 0;
    DeviceBuffer<unsigned char> workspace;
};

//! The handle, the cuDNN functions the baseline calls itself (core/cudnn_calls.hpp) and the kept plans (destroyed
//! before the handle).
struct CudnnPagedSdpa::Api : CudnnCalls {
    //! By batch, q_len, heads, kv_heads, head_dim, page_size, num_pages, max_pages and the scale's bits.
    std::map<std::tuple<int, int, int, int, int, int, int, int, std::uint32_t>, std::unique_ptr<Plan>> plans;
};

CudnnPagedSdpa::CudnnPagedSdpa() : api_(std::make_unique<Api>()) { reason_ = open_for_graphs(*api_, version_); }

CudnnPagedSdpa::~CudnnPagedSdpa() = default;

CudnnPagedSdpa::Plan* CudnnPagedSdpa::plan(const Problem& pr, float scale, cudaError_t& status)
{
    std::uint32_t scale_bits = 0;
    std::memcpy(&scale_bits, &scale, sizeof(scale_bits));
    const auto describe = [&](Plan& p, int sm_version, std::int64_t& workspace_bytes) {
        fe::graph::Graph& g = p.graph;
        set_types(g, fe::DataType_t::BFLOAT16, sm_version);
        const std::int64_t b = pr.batch, s = pr.q_len, h = pr.heads, hk = pr.kv_heads, d = pr.head_dim;
        const std::int64_t pages = pr.num_pages, page = pr.page_size, table = pr.max_pages;
        // q and O [batch, q_len, heads, head_dim], given to cuDNN as [batch, heads, q_len, head_dim] by their strides
        // (at q_len 1 the packed [batch, heads, 1, head_dim] that cuDNN takes by default: the same bytes), and the
        // log-sum-exps [batch, q_len, heads] as [batch, heads, q_len, 1].
        const std::int64_t token_stride = s == 1 ? d : h * d, lse_token_stride = s == 1 ? 1 : h;
        const auto bshd = [&](const char* name) {
            return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim({b, h, s, d}).set_stride(
                {s * h * d, d, token_stride, 1}));
        };
        // The pools [num_pages, page_size, kv_heads, head_dim], as cuDNN's containers [num_pages, kv_heads,
        // page_size, head_dim] by their strides.
        const auto container = [&](const char* name) {
            return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_dim({pages, hk, page, d}).set_stride(
                {page * hk * d, d, hk * d, 1}));
        };
        const auto ints = [&](const char* name, std::int64_t count) {
            return g.tensor(fe::graph::Tensor_attributes()
                                .set_name(name)
                                .set_dim({b, 1, count, 1})
                                .set_stride({count, count, 1, 1})
                                .set_data_type(fe::DataType_t::INT32));
        };
        p.q = bshd("q");
        p.k = container("k_pool");
        p.v = container("v_pool");
        p.page_table_k = ints("page_table_k", table);
        p.page_table_v = ints("page_table_v", table);  // the same table, given twice (cuDNN takes one for each)
        p.q_lens = ints("q_lens", 1);
        p.kv_lens = ints("kv_lens", 1);
        fe::graph::SDPA_attributes options = fe::graph::SDPA_attributes()
                                                 .set_name("paged_decode")
                                                 .set_generate_stats(true)
                                                 .set_attn_scale(scale)
                                                 .set_padding_mask(true)
                                                 .set_seq_len_q(p.q_lens)
                                                 .set_seq_len_kv(p.kv_lens)
                                                 .set_paged_attention_k_table(p.page_table_k)
                                                 .set_paged_attention_v_table(p.page_table_v)
                                                 .set_paged_attention_max_seq_len_kv(static_cast<int>(table * page));
        if (pr.q_len > 1) {  // query i sees the keys up to length - q_len + i: the diagonal at each sequence's end
            options.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT).set_diagonal_band_right_bound(0);
        }
        auto [o, lse] = g.sdpa(p.q, p.k, p.v, options);
        o->set_output(true).set_dim({b, h, s, d}).set_stride({s * h * d, d, token_stride, 1});
        lse->set_output(true).set_data_type(fe::DataType_t::FLOAT).set_dim({b, h, s, 1}).set_stride(
            {s * h, 1, lse_token_stride, 1});
        p.o = o;
        p.lse = lse;
        return build_every_graph_plan(g, api_->handle, p.candidates, workspace_bytes);
    };
    return kept_graph_plan(api_->plans,
                           std::make_tuple(pr.batch, pr.q_len, pr.heads, pr.kv_heads, pr.head_dim, pr.page_size,
                                           pr.num_pages, pr.max_pages, scale_bits),
                           *api_, reason_, last_status_, status, describe);
}

cudaError_t CudnnPagedSdpa::execute(Plan& p, std::int64_t plan_index, const PagedBuffers& x, cudaStream_t stream)
{
    return execute_graph(*api_, stream, "execute_plan_at_index", last_status_, [&] {
        std::unordered_map<Tensor, void*> pack = {{p.q, const_cast<void*>(x.d_q)},
                                                  {p.k, const_cast<void*>(x.d_k)},
                                                  {p.v, const_cast<void*>(x.d_v)},
                                                  {p.page_table_k, const_cast<int*>(x.d_page_table)},
                                                  {p.page_table_v, const_cast<int*>(x.d_page_table)},
                                                  {p.q_lens, const_cast<int*>(x.d_q_lens)},
                                                  {p.kv_lens, const_cast<int*>(x.d_lengths)},
                                                  {p.o, x.d_o},
                                                  {p.lse, x.d_lse}};
        return p.graph.execute_plan_at_index(api_->handle, pack, p.workspace.data(), plan_index);
    });
}

std::pair<std::vector<PickedCandidate>, std::size_t> CudnnPagedSdpa::pick(const PagedBuffers& buffers,
                                                                          const Problem& pr, float scale,
                                                                          const PickRule& rule, void* d_flush,
                                                                          std::size_t flush_bytes, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(pr, scale, status);
    if (p == nullptr) {
        return {};
    }
    // A plan that built but does not run here is left out of the pick (and of run()).
    return pick_graph_plan(*p, *api_, last_status_, rule, d_flush, flush_bytes, stream,
                           [=, this](std::int64_t index) { return execute(*p, index, buffers, stream); });
}

cudaError_t CudnnPagedSdpa::run(const PagedBuffers& buffers, const Problem& pr, float scale, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(pr, scale, status);
    if (p == nullptr) {
        return status;
    }
    return execute(*p, p->candidates[p->kept].index, buffers, stream);
}

#else  // built without cudnn.h or without cudnn-frontend's headers

struct CudnnPagedSdpa::Api {};
struct CudnnPagedSdpa::Plan {};

CudnnPagedSdpa::CudnnPagedSdpa()
    : reason_("the build found no cudnn.h or no cudnn_frontend.h (see the normalization baseline)")
{
}
CudnnPagedSdpa::~CudnnPagedSdpa() = default;

std::pair<std::vector<PickedCandidate>, std::size_t> CudnnPagedSdpa::pick(const PagedBuffers&, const Problem&, float,
                                                                          const PickRule&, void*, std::size_t,
                                                                          cudaStream_t)
{
    last_status_ = reason_;
    return {};
}

cudaError_t CudnnPagedSdpa::run(const PagedBuffers&, const Problem&, float, cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

#endif

}  // namespace stepwise::decode_attention
