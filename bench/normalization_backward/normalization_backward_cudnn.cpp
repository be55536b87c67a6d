#include "normalization_backward/normalization_backward_cudnn.hpp"

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
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#endif

namespace stepwise::normalization_backward {

#if STEPWISE_CUDNN_HEADER && STEPWISE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;
using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

//! One problem's graph (built, with its execution plan), its tensors (nullptr where the operation has no such tensor)
//! and its workspace.
struct CudnnNormBackward::Plan {
    fe::graph::Graph graph;
    Tensor x, dy, gamma, mean, rstd, dx, dgamma, dbeta;
    DeviceBuffer<unsigned char> workspace;
};

//! The handle, the cuDNN functions the baseline calls itself (core/cudnn_calls.hpp) and the kept plans (destroyed
//! before the handle).
struct CudnnNormBackward::Api : CudnnCalls {
    //! By operation (true: LayerNorm), rows, columns and bf16.
    std::map<std::tuple<bool, int, int, bool>, std::unique_ptr<Plan>> plans;
};

CudnnNormBackward::CudnnNormBackward() : api_(std::make_unique<Api>()) { reason_ = open_for_graphs(*api_, version_); }

CudnnNormBackward::~CudnnNormBackward() = default;

CudnnNormBackward::Plan* CudnnNormBackward::plan(bool layer_norm, int num_rows, int num_cols, bool bf16,
                                                 cudaError_t& status)
{
    const auto describe = [&](Plan& p, int sm_version, std::int64_t& workspace_bytes) {
        fe::graph::Graph& g = p.graph;
        const fe::DataType_t io = bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT;
        set_types(g, io, sm_version);
        const std::int64_t rows = num_rows, cols = num_cols;
        const auto matrix = [&](const char* name) {
            return g.tensor(fe::graph::Tensor_attributes()
                                .set_name(name)
                                .set_dim({rows, cols, 1, 1})
                                .set_stride({cols, 1, cols, cols})
                                .set_data_type(io));
        };
        const auto per_row = [&](const char* name) {
            return g.tensor(fe::graph::Tensor_attributes()
                                .set_name(name)
                                .set_dim({rows, 1, 1, 1})
                                .set_stride({1, 1, 1, 1})
                                .set_data_type(fe::DataType_t::FLOAT));
        };
        p.x = matrix("x");
        p.dy = matrix("dy");
        p.gamma = g.tensor(fe::graph::Tensor_attributes()
                               .set_name("gamma")
                               .set_dim({1, cols, 1, 1})
                               .set_stride({cols, 1, cols, cols})
                               .set_data_type(fe::DataType_t::FLOAT));
        p.rstd = per_row("rstd");
        if (layer_norm) {
            p.mean = per_row("mean");
            const auto [dx, dgamma, dbeta] = g.layernorm_backward(
                p.dy, p.x, p.gamma, fe::graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(p.mean, p.rstd));
            p.dx = dx;
            p.dgamma = dgamma;
            p.dbeta = dbeta;
            p.dbeta->set_output(true).set_data_type(fe::DataType_t::FLOAT);
        } else {
            const auto [dx, dgamma, dbeta] =
                g.rmsnorm_backward(p.dy, p.x, p.gamma, p.rstd, fe::graph::Rmsnorm_backward_attributes().has_dbias(false));
            p.dx = dx;
            p.dgamma = dgamma;
        }
        p.dx->set_output(true).set_data_type(io);
        p.dgamma->set_output(true).set_data_type(fe::DataType_t::FLOAT);
        return build_graph_plans(g, api_->handle, workspace_bytes);
    };
    return kept_graph_plan(api_->plans, std::make_tuple(layer_norm, num_rows, num_cols, bf16), *api_, reason_,
                           last_status_, status, describe);
}

cudaError_t CudnnNormBackward::prepare(bool layer_norm, int num_rows, int num_cols, bool bf16)
{
    cudaError_t status = cudaSuccess;
    plan(layer_norm, num_rows, num_cols, bf16, status);
    return status;
}

cudaError_t CudnnNormBackward::layer_norm_backward(const void* d_x, const void* d_dy, const float* d_gamma,
                                                   const float* d_mean, const float* d_rstd, void* d_dx,
                                                   float* d_dgamma, float* d_dbeta, int num_rows, int num_cols,
                                                   bool bf16, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(true, num_rows, num_cols, bf16, status);
    if (p == nullptr) {
        return status;
    }
    return execute_graph(*api_, stream, "execute", last_status_, [&] {
        std::unordered_map<Tensor, void*> pack = {
            {p->x, const_cast<void*>(d_x)},          {p->dy, const_cast<void*>(d_dy)},
            {p->gamma, const_cast<float*>(d_gamma)}, {p->mean, const_cast<float*>(d_mean)},
            {p->rstd, const_cast<float*>(d_rstd)},   {p->dx, d_dx},
            {p->dgamma, d_dgamma},                   {p->dbeta, d_dbeta}};
        return p->graph.execute(api_->handle, pack, p->workspace.data());
    });
}

cudaError_t CudnnNormBackward::rms_norm_backward(const void* d_x, const void* d_dy, const float* d_gamma,
                                                 const float* d_rstd, void* d_dx, float* d_dgamma, int num_rows,
                                                 int num_cols, bool bf16, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(false, num_rows, num_cols, bf16, status);
    if (p == nullptr) {
        return status;
    }
    return execute_graph(*api_, stream, "execute", last_status_, [&] {
        std::unordered_map<Tensor, void*> pack = {{p->x, const_cast<void*>(d_x)},
                                                  {p->dy, const_cast<void*>(d_dy)},
                                                  {p->gamma, const_cast<float*>(d_gamma)},
                                                  {p->rstd, const_cast<float*>(d_rstd)},
                                                  {p->dx, d_dx},
                                                  {p->dgamma, d_dgamma}};
        return p->graph.execute(api_->handle, pack, p->workspace.data());
    });
}

#else  // built without cudnn.h or without cudnn-frontend's headers

struct CudnnNormBackward::Api {};

CudnnNormBackward::CudnnNormBackward()
    : reason_("the build found no cudnn.h or no cudnn_frontend.h (see the normalization baseline)")
{
}
CudnnNormBackward::~CudnnNormBackward() = default;

cudaError_t CudnnNormBackward::prepare(bool, int, int, bool)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

cudaError_t CudnnNormBackward::layer_norm_backward(const void*, const void*, const float*, const float*, const float*,
                                                   void*, float*, float*, int, int, bool, cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

cudaError_t CudnnNormBackward::rms_norm_backward(const void*, const void*, const float*, const float*, void*, float*,
                                                 int, int, bool, cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

#endif

}  // namespace stepwise::normalization_backward
