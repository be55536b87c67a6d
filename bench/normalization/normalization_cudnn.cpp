#include "normalization/normalization_cudnn.hpp"

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

namespace stepwise::normalization {

#if STEPWISE_CUDNN_HEADER && STEPWISE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;
using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

//! One problem's graph (built, with its execution plan), its tensors (nullptr where the kind has no such tensor) and
//! its workspace.
struct CudnnNorm::Plan {
    fe::graph::Graph graph;
    Tensor x, gamma, beta, epsilon, y, mean, rstd;
    DeviceBuffer<unsigned char> workspace;
};

//! The handle, the cuDNN functions the baseline calls itself (core/cudnn_calls.hpp) and the kept plans (destroyed
//! before the handle).
struct CudnnNorm::Api : CudnnCalls {
    //! By kind, rows, columns and bf16.
    std::map<std::tuple<Kind, int, int, bool>, std::unique_ptr<Plan>> plans;
};

CudnnNorm::CudnnNorm() : api_(std::make_unique<Api>()) { reason_ = open_for_graphs(*api_, version_); }

CudnnNorm::~CudnnNorm() = default;

CudnnNorm::Plan* CudnnNorm::plan(Kind kind, int num_rows, int num_cols, bool bf16, cudaError_t& status)
{
    const auto describe = [&](Plan& p, int sm_version, std::int64_t& workspace_bytes) {
        fe::graph::Graph& g = p.graph;
        const fe::DataType_t io = bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::FLOAT;
        set_types(g, io, sm_version);
        const std::int64_t rows = num_rows, cols = num_cols;
        p.x = g.tensor(fe::graph::Tensor_attributes()
                           .set_name("x")
                           .set_dim({rows, cols, 1, 1})
                           .set_stride({cols, 1, cols, cols})
                           .set_data_type(io));
        const auto per_column = [&](const char* name) {
            return g.tensor(fe::graph::Tensor_attributes()
                                .set_name(name)
                                .set_dim({1, cols, 1, 1})
                                .set_stride({cols, 1, cols, cols})
                                .set_data_type(io));
        };
        p.gamma = per_column("gamma");
        // Passed by value, from the host, at each call.
        p.epsilon = g.tensor(fe::graph::Tensor_attributes()
                                 .set_name("epsilon")
                                 .set_dim({1, 1, 1, 1})
                                 .set_stride({1, 1, 1, 1})
                                 .set_data_type(fe::DataType_t::FLOAT)
                                 .set_is_pass_by_value(true));
        if (kind == Kind::layer_norm) {
            p.beta = per_column("beta");
            const auto [y, mean, rstd] = g.layernorm(p.x, p.gamma, p.beta,
                                                     fe::graph::Layernorm_attributes()
                                                         .set_forward_phase(fe::NormFwdPhase_t::TRAINING)
                                                         .set_epsilon(p.epsilon));
            mean->set_output(true).set_data_type(fe::DataType_t::FLOAT);
            rstd->set_output(true).set_data_type(fe::DataType_t::FLOAT);
            p.y = y;
            p.mean = mean;
            p.rstd = rstd;
        } else {
            p.y = g.rmsnorm(p.x, p.gamma,
                            fe::graph::Rmsnorm_attributes()
                                .set_forward_phase(fe::NormFwdPhase_t::INFERENCE)
                                .set_epsilon(p.epsilon))[0];
        }
        p.y->set_output(true).set_data_type(io);
        return build_graph_plans(g, api_->handle, workspace_bytes);
    };
    return kept_graph_plan(api_->plans, std::make_tuple(kind, num_rows, num_cols, bf16), *api_, reason_, last_status_,
                           status, describe);
}

cudaError_t CudnnNorm::execute(Plan& p, const void* d_in, const void* d_gamma, const void* d_beta, void* d_out,
                               float* d_mean, float* d_rstd, float epsilon, cudaStream_t stream)
{
    return execute_graph(*api_, stream, "execute", last_status_, [&] {
        std::unordered_map<Tensor, void*> pack = {{p.x, const_cast<void*>(d_in)},
                                                  {p.gamma, const_cast<void*>(d_gamma)},
                                                  {p.epsilon, &epsilon},
                                                  {p.y, d_out}};
        if (p.beta != nullptr) {
            pack.emplace(p.beta, const_cast<void*>(d_beta));
            pack.emplace(p.mean, d_mean);
            pack.emplace(p.rstd, d_rstd);
        }
        return p.graph.execute(api_->handle, pack, p.workspace.data());
    });
}

cudaError_t CudnnNorm::prepare_layer_norm(int num_rows, int num_cols, bool bf16)
{
    cudaError_t status = cudaSuccess;
    plan(Kind::layer_norm, num_rows, num_cols, bf16, status);
    return status;
}

cudaError_t CudnnNorm::prepare_rms_norm(int num_rows, int num_cols, bool bf16)
{
    cudaError_t status = cudaSuccess;
    plan(Kind::rms_norm, num_rows, num_cols, bf16, status);
    return status;
}

cudaError_t CudnnNorm::layer_norm(const void* d_in, const void* d_gamma, const void* d_beta, void* d_out,
                                  float* d_mean, float* d_rstd, int num_rows, int num_cols, float epsilon, bool bf16,
                                  cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(Kind::layer_norm, num_rows, num_cols, bf16, status);
    return p == nullptr ? status : execute(*p, d_in, d_gamma, d_beta, d_out, d_mean, d_rstd, epsilon, stream);
}

cudaError_t CudnnNorm::rms_norm(const void* d_in, const void* d_gamma, void* d_out, int num_rows, int num_cols,
                                float epsilon, bool bf16, cudaStream_t stream)
{
    cudaError_t status = cudaSuccess;
    Plan* p = plan(Kind::rms_norm, num_rows, num_cols, bf16, status);
    return p == nullptr ? status : execute(*p, d_in, d_gamma, nullptr, d_out, nullptr, nullptr, epsilon, stream);
}

#else  // built without cudnn.h or without cudnn-frontend's headers

struct CudnnNorm::Api {};

namespace {

//! Which header the build lacked.
std::string missing_headers()
{
#if STEPWISE_CUDNN_HEADER
    const bool cudnn_h = true;
#else
    const bool cudnn_h = false;
#endif
    std::string out = "the build found no ";
    if (!cudnn_h) {
        out += "cudnn.h (cuDNN 9's header) beside the CUDA toolkit";
    }
#if !STEPWISE_CUDNN_FRONTEND
    out += cudnn_h ? "" : " and no ";
    out += "cudnn_frontend.h (cuDNN's C++ frontend, which conf/requirements-headers.txt puts into .venv; or set "
           "STEPWISE_CUDNN_FRONTEND_INCLUDE_DIR)";
#endif
    return out;
}

}  // namespace

CudnnNorm::CudnnNorm() : reason_(missing_headers()) {}
CudnnNorm::~CudnnNorm() = default;

cudaError_t CudnnNorm::prepare_layer_norm(int, int, bool)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

cudaError_t CudnnNorm::prepare_rms_norm(int, int, bool)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

cudaError_t CudnnNorm::layer_norm(const void*, const void*, const void*, void*, float*, float*, int, int, float, bool,
                                  cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

cudaError_t CudnnNorm::rms_norm(const void*, const void*, void*, int, int, float, bool, cudaStream_t)
{
    last_status_ = reason_;
    return cudaErrorNotSupported;
}

#endif

}  // namespace stepwise::normalization
