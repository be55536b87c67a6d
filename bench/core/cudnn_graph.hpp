// What every cudnn-frontend graph baseline (the normalization and attention chapters') does once its graph is
// described: build its plans and ask for its workspace, and report what went wrong. Include it only where the build
// found cudnn-frontend's headers (with cudnn.h).
#pragma once

#include "core/cuda_check.hpp"
#include "core/cudnn_calls.hpp"

#include <cudnn_frontend.h>

#include <cstdint>
#include <exception>
#include <string>

namespace stepwise {

//! @brief Validates `graph`, builds its plans on `handle` (heuristics A, else the fallback's), checks that they are
//!        supported, sets `workspace_bytes` to what they need, and makes the frontend's one look-up at the first
//!        execution (is a CUDA context current? through a libcudart it opens where it can, and assuming so where it
//!        cannot) here, so that no timed call makes it.
//! @return empty where it could, else "<step>: <the frontend's message's first line>"
inline std::string build_graph_plans(cudnn_frontend::graph::Graph& graph, cudnnHandle_t handle,
                                     std::int64_t& workspace_bytes)
{
    namespace fe = cudnn_frontend;
    std::string why;
    const auto failed = [&why](const char* step, fe::error_t e) {
        if (e.is_good()) {
            return false;
        }
        why = first_line(step, e.get_message());
        return true;
    };
    if (failed("validate", graph.validate()) || failed("build_operation_graph", graph.build_operation_graph(handle)) ||
        failed("create_execution_plans", graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})) ||
        failed("check_support", graph.check_support()) || failed("build_plans", graph.build_plans()) ||
        failed("get_workspace_size", graph.get_workspace_size(workspace_bytes))) {
        return why;
    }
    fe::detail::has_current_context();
    return why;
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

}  // namespace stepwise
