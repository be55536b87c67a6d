#include "twist/twist_steps.hpp"

#include "twist/twist_reference.hpp"

#include "../../snippets/twist/01_one_thread.cuh"
#include "../../snippets/twist/02_thread_per_vertex.cuh"
#include "../../snippets/twist/03_registers_x_z.cuh"
#include "../../snippets/twist/04_float4_load.cuh"
#include "../../snippets/twist/05_float_math.cuh"
#include "../../snippets/twist/06_exact_sincosf.cuh"

namespace stepwise::twist {

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_one_thread", "One thread twists every vertex", "snippets/twist/01_one_thread.cuh",
         "stepwise::twist::one_thread", false, false, true, approximate_tolerance_ulp, one_thread::twist,
         {kernel_entry("twist_kernel", one_thread::twist_kernel, dim3(1))}},
        {"02_thread_per_vertex", "One thread per vertex, blocks of 512", "snippets/twist/02_thread_per_vertex.cuh",
         "stepwise::twist::thread_per_vertex", false, false, false, approximate_tolerance_ulp, thread_per_vertex::twist,
         {kernel_entry("twist_kernel", thread_per_vertex::twist_kernel, dim3(thread_per_vertex::block_threads))}},
        {"03_registers_x_z", "x and z read once into registers", "snippets/twist/03_registers_x_z.cuh",
         "stepwise::twist::registers_x_z", false, false, false, approximate_tolerance_ulp, registers_x_z::twist,
         {kernel_entry("twist_kernel", registers_x_z::twist_kernel, dim3(registers_x_z::block_threads))}},
        {"04_float4_load", "One 16-byte load and store per vertex", "snippets/twist/04_float4_load.cuh",
         "stepwise::twist::float4_load", false, false, false, approximate_tolerance_ulp, float4_load::twist,
         {kernel_entry("twist_kernel", float4_load::twist_kernel, dim3(float4_load::block_threads))}},
        {"05_float_math", "The rotation in float, not double", "snippets/twist/05_float_math.cuh",
         "stepwise::twist::float_math", true, false, false, approximate_tolerance_ulp, float_math::twist,
         {kernel_entry("twist_kernel", float_math::twist_kernel, dim3(float_math::block_threads))}},
        {"06_exact_sincosf", "Exact sincosf for any angle", "snippets/twist/06_exact_sincosf.cuh",
         "stepwise::twist::exact_sincosf", true, true, false, exact_tolerance_ulp, exact_sincosf::twist,
         {kernel_entry("twist_kernel", exact_sincosf::twist_kernel, dim3(exact_sincosf::block_threads))}},
    };
    return all;
}

}  // namespace stepwise::twist
