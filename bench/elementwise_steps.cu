#include "elementwise_steps.hpp"

#include "elementwise_reference.hpp"

#include "../snippets/elementwise/01_original_kernel_a.cuh"
#include "../snippets/elementwise/02_block_512x1.cuh"
#include "../snippets/elementwise/03_split_odd_even.cuh"
#include "../snippets/elementwise/04_lookup_table.cuh"
#include "../snippets/elementwise/05_float2_2x2.cuh"
#include "../snippets/elementwise/06_float4.cuh"
#include "../snippets/elementwise/07_fast_intrinsics.cuh"

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

static __global__ void inplace_read_write_kernel(float4* d_quads, std::size_t num_quads, float scale)
{
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < num_quads) {
        float4 v = d_quads[i];
        v.x *= scale;
        v.y *= scale;
        v.z *= scale;
        v.w *= scale;
        d_quads[i] = v;
    }
}

static __global__ void empty_kernel() {}

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_original_kernel_a", "The original kernel A, (1, 512) blocks", "snippets/elementwise/01_original_kernel_a.cuh",
         "stepwise::elementwise::original_kernel_a", true, false, false, 1, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<original_kernel_a::update>},
        {"02_block_512x1", "(512, 1) blocks: a warp reads 32 consecutive floats", "snippets/elementwise/02_block_512x1.cuh",
         "stepwise::elementwise::block_512x1", true, false, false, 1, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<block_512x1::update>},
        {"03_split_odd_even", "Two kernels, one per column parity, stride 2", "snippets/elementwise/03_split_odd_even.cuh",
         "stepwise::elementwise::split_odd_even", true, false, false, 1, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<split_odd_even::update>},
        {"04_lookup_table", "A lookup table for integer inputs 10..265", "snippets/elementwise/04_lookup_table.cuh",
         "stepwise::elementwise::lookup_table", false, false, true, 1, exact_tolerance_ulp, accurate_inner_error_exponent, lookup_table::table_bytes,
         build_lookup_table, update_with_lookup_table},
        {"05_float2_2x2", "float2 accesses, 2 x 2 elements per thread", "snippets/elementwise/05_float2_2x2.cuh",
         "stepwise::elementwise::float2_2x2", true, false, false, 2, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<float2_2x2::update>},
        {"06_float4", "float4 accesses, 4 elements per thread", "snippets/elementwise/06_float4.cuh",
         "stepwise::elementwise::float4_vectors", true, true, false, 4, exact_tolerance_ulp, accurate_inner_error_exponent, 0, nullptr,
         without_workspace<float4_vectors::update>},
        {"07_fast_intrinsics", "Approximate __logf and __cosf (a different function)",
         "snippets/elementwise/07_fast_intrinsics.cuh", "stepwise::elementwise::fast_intrinsics", false, true, false, 4,
         exact_tolerance_ulp, approximate_inner_error_exponent, 0, nullptr, without_workspace<fast_intrinsics::update>},
    };
    return all;
}

cudaError_t inplace_read_write(float* d_data, std::size_t num_items, float scale, cudaStream_t stream)
{
    constexpr int block_threads = 256;
    if (d_data == nullptr || num_items == 0 || num_items % 4 != 0) {
        return cudaErrorInvalidValue;
    }
    const std::size_t num_quads = num_items / 4;
    const auto blocks = static_cast<unsigned>((num_quads + block_threads - 1) / block_threads);
    inplace_read_write_kernel<<<blocks, block_threads, 0, stream>>>(reinterpret_cast<float4*>(d_data), num_quads,
                                                                     scale);
    return cudaGetLastError();
}

cudaError_t empty_launch(cudaStream_t stream)
{
    empty_kernel<<<1, 1, 0, stream>>>();
    return cudaGetLastError();
}

}  // namespace stepwise::elementwise
