#include "reduction/reduction_steps.hpp"

#include "../../snippets/reduction/01_neighbored_pairs.cuh"
#include "../../snippets/reduction/02_remapped_index.cuh"
#include "../../snippets/reduction/03_unrolled_last_warp.cuh"
#include "../../snippets/reduction/04_interleaved_pairs.cuh"
#include "../../snippets/reduction/05_interleaved_2_blocks.cuh"
#include "../../snippets/reduction/06_interleaved_4_blocks.cuh"
#include "../../snippets/reduction/07_interleaved_8_blocks.cuh"
#include "../../snippets/reduction/08_shared_memory_divergent.cuh"
#include "../../snippets/reduction/09_strided_index.cuh"
#include "../../snippets/reduction/10_sequential_addressing.cuh"
#include "../../snippets/reduction/11_first_add_during_load.cuh"
#include "../../snippets/reduction/12_unrolled_last_warp_shared.cuh"
#include "../../snippets/reduction/13_completely_unrolled.cuh"
#include "../../snippets/reduction/14_multiple_elements_per_thread.cuh"
#include "../../snippets/reduction/15_warp_shuffle.cuh"
#include "../../snippets/reduction/16_vector_loads.cuh"
#include "../../snippets/reduction/17_single_pass.cuh"

#include <cub/device/device_reduce.cuh>

#include <string>

namespace stepwise::reduction {
namespace {

//! Adapts a step that leaves its input alone (`const T* d_in`) to the registry's signature.
template <typename T, cudaError_t (*Sum)(void*, std::size_t&, const T*, T*, int, cudaStream_t)>
cudaError_t reading(void* d_temp_storage, std::size_t& temp_storage_bytes, T* d_in, T* d_out, int num_items,
                    cudaStream_t stream)
{
    return Sum(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, stream);
}

template <typename T>
cudaError_t cub_sum_of(void* d_temp_storage, std::size_t& temp_storage_bytes, T* d_in, T* d_out, int num_items,
                       cudaStream_t stream)
{
    return cub::DeviceReduce::Sum(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, stream);
}

//! Step 17's kernels: the lean single-block kernel at both of its block sizes, and the many-block kernel.
std::vector<KernelEntry> single_pass_kernels()
{
    namespace sp = single_pass;
    const auto named = [](const char* kernel, int block_threads, const char* type) {
        return std::string(kernel) + "<" + std::to_string(block_threads) + ", " + type + ">";
    };
    return {kernel_entry(named("single_block_kernel", sp::small_block_threads, "int"),
                         sp::single_block_kernel<sp::small_block_threads, int>, dim3(sp::small_block_threads)),
            kernel_entry(named("single_block_kernel", sp::small_block_threads, "float"),
                         sp::single_block_kernel<sp::small_block_threads, float>, dim3(sp::small_block_threads)),
            kernel_entry(named("single_block_kernel", sp::block_threads, "int"),
                         sp::single_block_kernel<sp::block_threads, int>, dim3(sp::block_threads)),
            kernel_entry(named("single_block_kernel", sp::block_threads, "float"),
                         sp::single_block_kernel<sp::block_threads, float>, dim3(sp::block_threads)),
            kernel_entry(named("reduce_kernel", sp::block_threads, "int"), sp::reduce_kernel<sp::block_threads, int>,
                         dim3(sp::block_threads)),
            kernel_entry(named("reduce_kernel", sp::block_threads, "float"),
                         sp::reduce_kernel<sp::block_threads, float>, dim3(sp::block_threads))};
}

}  // namespace

// The int and float instantiations of a step's kernel, `reduce_kernel<T>` or `reduce_kernel<block_threads, T>`.
#define STEPWISE_KERNELS(ns)                                                                                     \
    {kernel_entry("reduce_kernel<int>", ns::reduce_kernel<int>, dim3(ns::block_threads)),                        \
     kernel_entry("reduce_kernel<float>", ns::reduce_kernel<float>, dim3(ns::block_threads))}
#define STEPWISE_SIZED_KERNELS(ns)                                                                               \
    {kernel_entry("reduce_kernel<" + std::to_string(ns::block_threads) + ", int>",                               \
                  ns::reduce_kernel<ns::block_threads, int>, dim3(ns::block_threads)),                           \
     kernel_entry("reduce_kernel<" + std::to_string(ns::block_threads) + ", float>",                             \
                  ns::reduce_kernel<ns::block_threads, float>, dim3(ns::block_threads))}
#define STEPWISE_IN_PLACE(ns) ns::sum<int>, ns::sum<float>, STEPWISE_KERNELS(ns)
#define STEPWISE_READING(ns) reading<int, ns::sum<int>>, reading<float, ns::sum<float>>, STEPWISE_KERNELS(ns)
#define STEPWISE_READING_SIZED(ns) \
    reading<int, ns::sum<int>>, reading<float, ns::sum<float>>, STEPWISE_SIZED_KERNELS(ns)

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_neighbored_pairs", "Neighbored pairs, in place in global memory", "snippets/reduction/01_neighbored_pairs.cuh",
         "stepwise::reduction::neighbored_pairs", "003", true, STEPWISE_IN_PLACE(neighbored_pairs)},
        {"02_remapped_index", "Neighbored pairs with a remapped thread index", "snippets/reduction/02_remapped_index.cuh",
         "stepwise::reduction::remapped_index", "003", true, STEPWISE_IN_PLACE(remapped_index)},
        {"03_unrolled_last_warp", "The last warp unrolled, synchronized with __syncwarp",
         "snippets/reduction/03_unrolled_last_warp.cuh", "stepwise::reduction::unrolled_last_warp", "003", true,
         STEPWISE_IN_PLACE(unrolled_last_warp)},
        {"04_interleaved_pairs", "Interleaved pairs", "snippets/reduction/04_interleaved_pairs.cuh",
         "stepwise::reduction::interleaved_pairs", "003", true, STEPWISE_IN_PLACE(interleaved_pairs)},
        {"05_interleaved_2_blocks", "Interleaved pairs, two blocks of data per block",
         "snippets/reduction/05_interleaved_2_blocks.cuh", "stepwise::reduction::interleaved_2_blocks", "003", true,
         STEPWISE_IN_PLACE(interleaved_2_blocks)},
        {"06_interleaved_4_blocks", "Interleaved pairs, four blocks of data per block",
         "snippets/reduction/06_interleaved_4_blocks.cuh", "stepwise::reduction::interleaved_4_blocks", "003", true,
         STEPWISE_IN_PLACE(interleaved_4_blocks)},
        {"07_interleaved_8_blocks", "Interleaved pairs, eight blocks of data per block",
         "snippets/reduction/07_interleaved_8_blocks.cuh", "stepwise::reduction::interleaved_8_blocks", "003", true,
         STEPWISE_IN_PLACE(interleaved_8_blocks)},
        {"08_shared_memory_divergent", "Shared memory, interleaved addressing with divergent branching",
         "snippets/reduction/08_shared_memory_divergent.cuh", "stepwise::reduction::shared_memory_divergent",
         "Harris 1", false, STEPWISE_READING(shared_memory_divergent)},
        {"09_strided_index", "Strided index: no divergence, bank conflicts", "snippets/reduction/09_strided_index.cuh",
         "stepwise::reduction::strided_index", "Harris 2", false, STEPWISE_READING(strided_index)},
        {"10_sequential_addressing", "Sequential addressing", "snippets/reduction/10_sequential_addressing.cuh",
         "stepwise::reduction::sequential_addressing", "Harris 3", false, STEPWISE_READING(sequential_addressing)},
        {"11_first_add_during_load", "First add during load", "snippets/reduction/11_first_add_during_load.cuh",
         "stepwise::reduction::first_add_during_load", "Harris 4", false, STEPWISE_READING(first_add_during_load)},
        {"12_unrolled_last_warp_shared", "The last warp unrolled, done right",
         "snippets/reduction/12_unrolled_last_warp_shared.cuh", "stepwise::reduction::unrolled_last_warp_shared",
         "Harris 5", false, STEPWISE_READING(unrolled_last_warp_shared)},
        {"13_completely_unrolled", "Completely unrolled, block size as a template parameter",
         "snippets/reduction/13_completely_unrolled.cuh", "stepwise::reduction::completely_unrolled", "Harris 6",
         false, STEPWISE_READING_SIZED(completely_unrolled)},
        {"14_multiple_elements_per_thread", "Multiple elements per thread",
         "snippets/reduction/14_multiple_elements_per_thread.cuh", "stepwise::reduction::multiple_elements_per_thread",
         "Harris 7", false, STEPWISE_READING_SIZED(multiple_elements_per_thread)},
        {"15_warp_shuffle", "Warp shuffles instead of the shared-memory tree", "snippets/reduction/15_warp_shuffle.cuh",
         "stepwise::reduction::warp_shuffle", "beyond", false, STEPWISE_READING_SIZED(warp_shuffle)},
        {"16_vector_loads", "16-byte loads, one resident wave of blocks", "snippets/reduction/16_vector_loads.cuh",
         "stepwise::reduction::vector_loads", "beyond", false, STEPWISE_READING_SIZED(vector_loads)},
        {"17_single_pass", "One launch: the last block adds the block sums", "snippets/reduction/17_single_pass.cuh",
         "stepwise::reduction::single_pass", "beyond", false, reading<int, single_pass::sum<int>>,
         reading<float, single_pass::sum<float>>, single_pass_kernels()},
    };
    return all;
}

#undef STEPWISE_IN_PLACE
#undef STEPWISE_READING
#undef STEPWISE_READING_SIZED
#undef STEPWISE_KERNELS
#undef STEPWISE_SIZED_KERNELS

cudaError_t cub_sum(void* d_temp_storage, std::size_t& temp_storage_bytes, int* d_in, int* d_out, int num_items,
                    cudaStream_t stream)
{
    return cub_sum_of(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, stream);
}

cudaError_t cub_sum(void* d_temp_storage, std::size_t& temp_storage_bytes, float* d_in, float* d_out,
                    int num_items, cudaStream_t stream)
{
    return cub_sum_of(d_temp_storage, temp_storage_bytes, d_in, d_out, num_items, stream);
}

}  // namespace stepwise::reduction
