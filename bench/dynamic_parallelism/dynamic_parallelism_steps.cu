#include "dynamic_parallelism/dynamic_parallelism_steps.hpp"

#include "dynamic_parallelism/dynamic_parallelism_reference.hpp"

#include "../../snippets/dynamic_parallelism/01_nested_hello_world.cuh"
#include "../../snippets/dynamic_parallelism/02_children_from_one_thread.cuh"
#include "../../snippets/dynamic_parallelism/03_children_from_every_block.cuh"
#include "../../snippets/dynamic_parallelism/04_adaptive_host_driven.cuh"
#include "../../snippets/dynamic_parallelism/05_adaptive_device_driven.cuh"

#include <string>

namespace stepwise::dynamic_parallelism {

namespace host = adaptive_host_driven;
namespace device = adaptive_device_driven;
static_assert(host::workspace_bytes(list_capacity) == device::workspace_bytes(list_capacity) &&
                  host::max_levels == device::max_levels,
              "steps 4 and 5 share one workspace layout");
static_assert(children_from_one_thread::max_children == children_from_every_block::max_children,
              "steps 2 and 3 launch as many children");

namespace {

template <cudaError_t (*Integrate)(Peaks, double, double, int, double, double*, unsigned int*, void*, int,
                                   cudaStream_t)>
cudaError_t integrate_peaks(double a, double b, int initial, double tolerance, double* d_result,
                            unsigned int* d_status, void* d_workspace, int capacity, cudaStream_t stream)
{
    return Integrate(Peaks{}, a, b, initial, tolerance, d_result, d_status, d_workspace, capacity, stream);
}

}  // namespace

const std::vector<Step>& steps()
{
    static const std::vector<Step> all = {
        {"01_nested_hello_world", "A kernel that launches itself", "snippets/dynamic_parallelism/01_nested_hello_world.cuh",
         "stepwise::dynamic_parallelism::nested_hello_world", "nested_hello", false, nested_hello_world::nested_hello,
         nullptr, nullptr,
         {kernel_entry("nested_hello_kernel", nested_hello_world::nested_hello_kernel,
                       dim3(nested_hello_world::block_threads))}},
        {"02_children_from_one_thread", "1,024 children launched by one device thread",
         "snippets/dynamic_parallelism/02_children_from_one_thread.cuh",
         "stepwise::dynamic_parallelism::children_from_one_thread", "launch_children", true, nullptr,
         children_from_one_thread::launch_children, nullptr,
         {kernel_entry("parent_kernel", children_from_one_thread::parent_kernel, dim3(1)),
          kernel_entry("child_kernel", children_from_one_thread::child_kernel,
                       dim3(children_from_one_thread::child_threads))}},
        {"03_children_from_every_block", "1,024 children, one from each parent block",
         "snippets/dynamic_parallelism/03_children_from_every_block.cuh",
         "stepwise::dynamic_parallelism::children_from_every_block", "launch_children", true, nullptr,
         children_from_every_block::launch_children, nullptr,
         {kernel_entry("parent_kernel", children_from_every_block::parent_kernel,
                       dim3(children_from_every_block::parent_threads)),
          kernel_entry("child_kernel", children_from_every_block::child_kernel,
                       dim3(children_from_every_block::child_threads))}},
        {"04_adaptive_host_driven", "Adaptive integration, the host launching each level",
         "snippets/dynamic_parallelism/04_adaptive_host_driven.cuh",
         "stepwise::dynamic_parallelism::adaptive_host_driven", "integrate", true, nullptr, nullptr,
         integrate_peaks<host::integrate<Peaks>>,
         {kernel_entry("init_kernel", host::init_kernel, dim3(host::block_threads)),
          kernel_entry("level_kernel<stepwise::dynamic_parallelism::Peaks>", host::level_kernel<Peaks>,
                       dim3(host::block_threads))}},
        {"05_adaptive_device_driven", "Adaptive integration, each level launching the next",
         "snippets/dynamic_parallelism/05_adaptive_device_driven.cuh",
         "stepwise::dynamic_parallelism::adaptive_device_driven", "integrate", true, nullptr, nullptr,
         integrate_peaks<device::integrate<Peaks>>,
         {kernel_entry("init_kernel", device::init_kernel, dim3(device::block_threads)),
          kernel_entry("level_kernel<stepwise::dynamic_parallelism::Peaks>", device::level_kernel<Peaks>,
                       dim3(device::block_threads))}},
    };
    return all;
}

int max_children() { return children_from_one_thread::max_children; }

cudaError_t host_launch_children(int* d_out, int num_children, cudaStream_t stream)
{
    if (d_out == nullptr || num_children < 1) {
        return cudaErrorInvalidValue;
    }
    for (int child = 0; child < num_children; ++child) {
        children_from_one_thread::child_kernel<<<1, children_from_one_thread::child_threads, 0, stream>>>(d_out, child);
        if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) {
            return status;
        }
    }
    return cudaSuccess;
}

std::size_t integrate_workspace_bytes(int capacity) { return host::workspace_bytes(capacity); }

std::string describe_integrate_status(unsigned int status)
{
    if (status == 0) {
        return "ok";
    }
    std::string text;
    const auto add = [&](unsigned int bit, const char* what) {
        if (status & bit) {
            text += (text.empty() ? "" : ", ") + std::string(what);
        }
    };
    add(host::list_overflow, "list overflow");
    add(host::too_deep, "too deep");
    add(host::launch_failed, "a device-side launch failed");
    return text;
}

}  // namespace stepwise::dynamic_parallelism
