#include "divergence/divergence_steps.hpp"

#include "../../snippets/divergence/01_interleaved_branch.cuh"
#include "../../snippets/divergence/02_predicate_variable.cuh"
#include "../../snippets/divergence/03_warp_aligned_branch.cuh"

namespace stepwise::divergence {

static_assert(interleaved_branch::work_iterations == work_iterations &&
                  predicate_variable::work_iterations == work_iterations &&
                  warp_aligned_branch::work_iterations == work_iterations,
              "the reference sums as many terms as the steps");
static_assert(interleaved_branch::angle_step == angle_step && predicate_variable::angle_step == angle_step &&
                  warp_aligned_branch::angle_step == angle_step,
              "the reference's angles are the steps'");

namespace {

constexpr int uniform_block_threads = warp_aligned_branch::block_threads;

//! Every thread runs the sine loop: what a step costs when no warp is split.
__global__ void __launch_bounds__(uniform_block_threads)
    uniform_work_kernel(const float* __restrict__ d_in, float* __restrict__ d_out, int num_items)
{
    const int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= num_items) {
        return;
    }
    const float x = d_in[index];
    float sum = 0.0f;
    for (int i = 0; i < work_iterations; ++i) {
        sum += __sinf(x + i * angle_step);
    }
    d_out[index] = sum;
}

}  // namespace

cudaError_t uniform_work(const float* d_in, float* d_out, int num_items, cudaStream_t stream)
{
    if (d_in == nullptr || d_out == nullptr || num_items <= 0) {
        return cudaErrorInvalidValue;
    }
    uniform_work_kernel<<<(num_items + uniform_block_threads - 1) / uniform_block_threads, uniform_block_threads, 0,
                          stream>>>(d_in, d_out, num_items);
    return cudaGetLastError();
}

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_interleaved_branch", "Even and odd threads branch apart (index % 2)",
         "snippets/divergence/01_interleaved_branch.cuh", "stepwise::divergence::interleaved_branch", false,
         BranchRule::by_index, interleaved_branch::branch,
         {kernel_entry("branch_kernel", interleaved_branch::branch_kernel, dim3(interleaved_branch::block_threads))}},
        {"02_predicate_variable", "The condition in a predicate variable", "snippets/divergence/02_predicate_variable.cuh",
         "stepwise::divergence::predicate_variable", false, BranchRule::by_index, predicate_variable::branch,
         {kernel_entry("branch_kernel", predicate_variable::branch_kernel, dim3(predicate_variable::block_threads))}},
        {"03_warp_aligned_branch", "Whole warps branch together ((index / warpSize) % 2)",
         "snippets/divergence/03_warp_aligned_branch.cuh", "stepwise::divergence::warp_aligned_branch", false,
         BranchRule::by_warp, warp_aligned_branch::branch,
         {kernel_entry("branch_kernel", warp_aligned_branch::branch_kernel, dim3(warp_aligned_branch::block_threads))}},
    };
    return all;
}

}  // namespace stepwise::divergence
