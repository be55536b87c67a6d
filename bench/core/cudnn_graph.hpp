// What every cudnn-frontend graph baseline (the normalization and attention chapters') does once its graph is
// described: build its plans and ask for its workspace, and report what went wrong. Include it only where the build
// found cudnn-frontend's headers (with cudnn.h).
#pragma once

#include "core/cuda_check.hpp"
#include "core/cudnn_calls.hpp"
#include "core/cudnn_library.hpp"
#include "core/device_buffer.hpp"
#include "core/pick.hpp"

#include <cudnn_frontend.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stepwise {

//! @brief Whether a cudnn-frontend call failed; where it did, `why` becomes "<step>: <its message's first line>".
inline bool graph_step_failed(const char* step, cudnn_frontend::error_t e, std::string& why)
{
    if (e.is_good()) {
        return false;
    }
    why = first_line(step, e.get_message());
    return true;
}

//! @brief Sets `graph`'s types as every graph baseline here has them: `io` in and out, fp32 inside, and the GPU's
//!        SM version (`sm_version`, major * 10 + minor).
inline cudnn_frontend::graph::Graph& set_types(cudnn_frontend::graph::Graph& graph, cudnn_frontend::DataType_t io,
                                               int sm_version)
{
    return graph.set_io_data_type(io)
        .set_intermediate_data_type(cudnn_frontend::DataType_t::FLOAT)
        .set_compute_data_type(cudnn_frontend::DataType_t::FLOAT)
        .set_sm_version(sm_version);
}

//! @brief A tensor of `graph` named `name`, [batch, heads, seq, head_dim] and packed in that order (the attention
//!        baselines' Q, K, V, O and their gradients).
inline std::shared_ptr<cudnn_frontend::graph::Tensor_attributes> bhsd_tensor(cudnn_frontend::graph::Graph& graph,
                                                                            const char* name, std::int64_t batch,
                                                                            std::int64_t heads, std::int64_t seq,
                                                                            std::int64_t head_dim)
{
    return graph.tensor(cudnn_frontend::graph::Tensor_attributes()
                            .set_name(name)
                            .set_dim({batch, heads, seq, head_dim})
                            .set_stride({heads * seq * head_dim, seq * head_dim, head_dim, 1}));
}

//! @brief Validates `graph`, builds its operation graph on `handle`, asks the heuristics (A, then the fallback list)
//!        for its execution plans and checks that cuDNN supports one of them.
//! @return empty where it could, else "<step>: <the frontend's message's first line>"
inline std::string prepare_graph(cudnn_frontend::graph::Graph& graph, cudnnHandle_t handle)
{
    namespace fe = cudnn_frontend;
    std::string why;
    if (graph_step_failed("validate", graph.validate(), why) ||
        graph_step_failed("build_operation_graph", graph.build_operation_graph(handle), why) ||
        graph_step_failed("create_execution_plans",
                          graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), why) ||
        graph_step_failed("check_support", graph.check_support(), why)) {
        return why;
    }
    return {};
}

//! @brief prepare_graph(), then builds the heuristics' choice of plan, sets `workspace_bytes` to what it needs, and
//!        makes the frontend's one look-up at the first execution (is a CUDA context current? through a libcudart it
//!        opens where it can, and assuming so where it cannot) here, so that no timed call makes it.
//! @return empty where it could, else "<step>: <the frontend's message's first line>"
inline std::string build_graph_plans(cudnn_frontend::graph::Graph& graph, cudnnHandle_t handle,
                                     std::int64_t& workspace_bytes)
{
    std::string why = prepare_graph(graph, handle);
    if (!why.empty() || graph_step_failed("build_plans", graph.build_plans(), why) ||
        graph_step_failed("get_workspace_size", graph.get_workspace_size(workspace_bytes), why)) {
        return why;
    }
    cudnn_frontend::detail::has_current_context();
    return why;
}

//! @brief One plan of a graph that built: its index among the graph's execution plans and its engine's name.
struct GraphPlan {
    std::int64_t index = 0;
    std::string name;
};

//! @brief prepare_graph(), then builds every execution plan that the heuristics offer and that cuDNN supports and
//!        can build, for a baseline that times them all and keeps the fastest (core/pick.hpp); sets
//!        `workspace_bytes` to the most any of them needs, and makes the frontend's look-up at the first execution
//!        here (see build_graph_plans).
//! @return empty where at least one plan built, else "<step>: <the frontend's message's first line>"
inline std::string build_every_graph_plan(cudnn_frontend::graph::Graph& graph, cudnnHandle_t handle,
                                          std::vector<GraphPlan>& plans, std::int64_t& workspace_bytes)
{
    plans.clear();
    workspace_bytes = 0;
    std::string why = prepare_graph(graph, handle);
    if (!why.empty()) {
        return why;
    }
    for (std::int64_t i = 0; i < graph.get_execution_plan_count(); ++i) {
        std::int64_t bytes = 0;
        GraphPlan plan{i, ""};
        if (graph_step_failed("build_plan_at_index", graph.build_plan_at_index(i), why) ||
            graph_step_failed("get_workspace_size_plan_at_index", graph.get_workspace_size_plan_at_index(i, bytes),
                              why) ||
            graph_step_failed("get_plan_name_at_index", graph.get_plan_name_at_index(i, plan.name), why)) {
            continue;  // this plan is left out; `why` says why the last one was
        }
        workspace_bytes = std::max(workspace_bytes, bytes);
        plans.push_back(std::move(plan));
    }
    if (plans.empty()) {
        return why.empty() ? "build_plan_at_index: the heuristics offered no plan" : why;
    }
    cudnn_frontend::detail::has_current_context();
    return {};
}

//! @brief Called inside a `catch (...)` around a graph baseline's plan: the exception being handled as the baseline
//!        reports it, a CudaError's code and message, else "cudnn-frontend: <its first line>" (`status` kept).
inline void describe_current_exception(cudaError_t& status, std::string& why)
{
    try {
        throw;
    } catch (const CudaError& e) {
        status = e.code();
        why = e.what();
    } catch (const std::exception& e) {
        why = first_line("cudnn-frontend", e.what());
    } catch (...) {
        why = "cudnn-frontend: an exception that is no std::exception";
    }
}

//! @brief Opens the process's cuDNN in `api` (CudnnCalls::open) for a graph baseline, and points cudnn-frontend's
//!        dynamic loading at it (cudnn_frontend::cudnn_dlhandle, defined in core/cudnn_calls.cpp); `version` becomes
//!        the library's.
//! @return empty where it opened, else why not (the baseline's reason())
inline std::string open_for_graphs(CudnnCalls& api, std::string& version)
{
    const CudnnLibrary& library = cudnn_library();
    version = library.version;
    std::string reason = api.open(library);
    if (reason.empty()) {
        cudnn_frontend::cudnn_dlhandle = library.handle;
    }
    return reason;
}

//! @brief A graph baseline's kept plan of one problem: `plans[key]` where it is kept, else a new `Plan` whose graph
//!        `describe(plan, sm_version, workspace_bytes)` describes and builds (empty: it built, and needs that many
//!        bytes of workspace; else why not), given a workspace of that size and kept. `Plan` has a `workspace`.
//! @return the plan; nullptr where `reason` (the baseline's: empty where cuDNN is available) or the build says why
//!         not, in `last_status`, with `status` cudaErrorNotSupported or the CUDA error that stopped it
template <class Plan, class Key, class Describe>
Plan* kept_graph_plan(std::map<Key, std::unique_ptr<Plan>>& plans, const Key& key, const CudnnCalls& api,
                      const std::string& reason, std::string& last_status, cudaError_t& status, Describe describe)
{
    status = cudaErrorNotSupported;
    if (!reason.empty()) {
        last_status = reason;
        return nullptr;
    }
    if (const auto kept = plans.find(key); kept != plans.end()) {
        status = cudaSuccess;
        return kept->second.get();
    }
    // check_support() asks for the GPU's compute capability where the graph has none: it is given this program's.
    int sm_version = 0;
    if (const cudaError_t e = graph_sm_version(sm_version, last_status); e != cudaSuccess) {
        status = e;
        return nullptr;
    }
    try {
        auto p = std::make_unique<Plan>();
        std::int64_t workspace_bytes = 0;
        if (std::string why = describe(*p, sm_version, workspace_bytes); !why.empty()) {
            last_status = std::move(why);
            return nullptr;
        }
        p->workspace = DeviceBuffer<unsigned char>(static_cast<std::size_t>(workspace_bytes));
        status = cudaSuccess;
        last_status = api.error_string(CUDNN_STATUS_SUCCESS);
        return (plans[key] = std::move(p)).get();
    } catch (...) {
        describe_current_exception(status, last_status);
    }
    return nullptr;
}

//! @brief Picks a graph baseline's fastest plan of one problem: the plans of `plan.candidates` that run here
//!        (`execute(index)`, cudaSuccess), timed in turn as `rule` says (core/pick.hpp, L2 flushed by writing
//!        `d_flush` before each sample); `plan.candidates` becomes those, `plan.kept` the fastest's place among them.
//! @return every plan that ran (its engine's name) with its medians, and the index of the one kept; none where no
//!         plan ran, with why in `last_status`
//! @throws CudaError when a CUDA call fails
template <class Plan, class Execute>
std::pair<std::vector<PickedCandidate>, std::size_t> pick_graph_plan(Plan& plan, const CudnnCalls& api,
                                                                     std::string& last_status, const PickRule& rule,
                                                                     void* d_flush, std::size_t flush_bytes,
                                                                     cudaStream_t stream, Execute execute)
{
    std::vector<GraphPlan> runnable;
    std::string refused;
    for (const GraphPlan& candidate : plan.candidates) {
        if (execute(candidate.index) == cudaSuccess) {
            STEPWISE_CUDA_CHECK(cudaStreamSynchronize(stream));
            runnable.push_back(candidate);
        } else {
            refused = candidate.name + ": " + last_status;
        }
    }
    if (runnable.empty()) {
        last_status = "no plan ran (" + refused + ")";
        return {};
    }
    plan.candidates = std::move(runnable);
    std::vector<std::function<cudaError_t()>> launches;
    std::vector<std::string> names;
    for (const GraphPlan& candidate : plan.candidates) {
        launches.push_back([=] { return execute(candidate.index); });
        names.push_back(candidate.name);
    }
    const PickTimes times = pick_fastest(launches, rule, d_flush, flush_bytes, stream);
    plan.kept = times.kept;
    last_status = api.error_string(CUDNN_STATUS_SUCCESS);
    return {picked_candidates(names, times), times.kept};
}

//! @brief Runs a graph baseline's plan on `stream`: `execute()` returns the frontend's error_t, `step` names it.
//! @return cudaSuccess; cudaErrorNotSupported where cuDNN refused, with why in `last_status`
template <class Execute>
cudaError_t execute_graph(const CudnnCalls& api, cudaStream_t stream, const char* step, std::string& last_status,
                          Execute execute)
{
    if (const cudnnStatus_t s = api.set_stream(api.handle, stream); s != CUDNN_STATUS_SUCCESS) {
        last_status = std::string("cudnnSetStream: ") + api.error_string(s);
        return cudaErrorNotSupported;
    }
    try {
        if (cudnn_frontend::error_t e = execute(); e.is_bad()) {
            last_status = first_line(step, e.get_message());
            return cudaErrorNotSupported;
        }
    } catch (...) {  // nothing here throws a CudaError: the status stays cudaErrorNotSupported
        cudaError_t status = cudaErrorNotSupported;
        describe_current_exception(status, last_status);
        return status;
    }
    last_status = api.error_string(CUDNN_STATUS_SUCCESS);
    return cudaSuccess;
}

}  // namespace stepwise
