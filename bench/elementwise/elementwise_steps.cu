#include "elementwise/elementwise_steps.hpp"

#include "elementwise/elementwise_reference.hpp"

#include "../../snippets/elementwise/01_original_kernel_a.cuh"
#include "../../snippets/elementwise/02_block_512x1.cuh"
#include "../../snippets/elementwise/03_split_odd_even.cuh"
#include "../../snippets/elementwise/04_lookup_table.cuh"
#include "../../snippets/elementwise/05_float2_2x2.cuh"
#include "../../snippets/elementwise/06_float4.cuh"
#include "../../snippets/elementwise/07_fast_intrinsics.cuh"

namespace stepwise::elementwise {
namespace {

//! Adapts a snippet's `update(d_data, dimx, dimy, stream)` to the registry's signature.
template <cudaError_t (*Update)(float*, int, int, cudaStream_t)>
cudaError_t without_workspace(float* d_data, int dimx, int dimy, const void*, cudaStream_t stream)
{
    return Update(d_data, dimx, dimy, stream);
}

cudaError_t build_lookup_table(void* d_workspace, cudaStream_t stream)
{
    return lookup_table::build_table(static_cast<float*>(d_workspace), stream);
}

cudaError_t update_with_lookup_table(float* d_data, int dimx, int dimy, const void* d_workspace, cudaStream_t stream)
{
    return lookup_table::update(d_data, dimx, dimy, static_cast<const float*>(d_workspace), stream);
}

// One ulp of the result beyond the propagated error of the inner function (see propagated_error_bound):
// the final addition rounds to half an ulp, and sqrt(x) <= 1.42 added to v >= 10 costs at most half more.
constexpr double exact_tolerance_ulp = 1.0;

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_original_kernel_a", "The original kernel A, (1, 512) blocks", "snippets/elementwise/01_original_kernel_a.cuh",
         "stepwise::elementwise::original_kernel_a", true, false, false, 1, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<original_kernel_a::update>,
         {kernel_entry("update_kernel", original_kernel_a::update_kernel, dim3(1, original_kernel_a::block_y))}},
        {"02_block_512x1", "(512, 1) blocks: a warp reads 32 consecutive floats", "snippets/elementwise/02_block_512x1.cuh",
         "stepwise::elementwise::block_512x1", true, false, false, 1, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<block_512x1::update>,
         {kernel_entry("update_kernel", block_512x1::update_kernel, dim3(block_512x1::block_x))}},
        {"03_split_odd_even", "Two kernels, one per column parity, stride 2", "snippets/elementwise/03_split_odd_even.cuh",
         "stepwise::elementwise::split_odd_even", true, false, false, 1, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<split_odd_even::update>,
         {kernel_entry("update_odd_columns_kernel", split_odd_even::update_odd_columns_kernel, dim3(split_odd_even::block_x)),
          kernel_entry("update_even_columns_kernel", split_odd_even::update_even_columns_kernel, dim3(split_odd_even::block_x))}},
        {"04_lookup_table", "A lookup table for integer inputs 10..265", "snippets/elementwise/04_lookup_table.cuh",
         "stepwise::elementwise::lookup_table", false, false, true, 1, exact_tolerance_ulp, accurate_inner_error_exponent, lookup_table::table_bytes,
         build_lookup_table, update_with_lookup_table,
         {kernel_entry("build_table_kernel", lookup_table::build_table_kernel, dim3(lookup_table::table_values)),
          kernel_entry("update_kernel", lookup_table::update_kernel, dim3(lookup_table::block_x))}},
        {"05_float2_2x2", "float2 accesses, 2 x 2 elements per thread", "snippets/elementwise/05_float2_2x2.cuh",
         "stepwise::elementwise::float2_2x2", true, false, false, 2, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<float2_2x2::update>,
         {kernel_entry("update_kernel", float2_2x2::update_kernel, dim3(float2_2x2::block_x))}},
        {"06_float4", "float4 accesses, 4 elements per thread", "snippets/elementwise/06_float4.cuh",
         "stepwise::elementwise::float4_vectors", true, true, false, 4, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<float4_vectors::update>,
         {kernel_entry("update_kernel", float4_vectors::update_kernel, dim3(float4_vectors::block_x))}},
        {"07_fast_intrinsics", "Approximate __logf and __cosf (a different function)",
         "snippets/elementwise/07_fast_intrinsics.cuh", "stepwise::elementwise::fast_intrinsics", false, true, false, 4,
         exact_tolerance_ulp, approximate_inner_error_exponent, 0, nullptr, without_workspace<fast_intrinsics::update>,
         {kernel_entry("update_kernel", fast_intrinsics::update_kernel, dim3(fast_intrinsics::block_x))}},
    };
    return all;
}

}  // namespace stepwise::elementwise
