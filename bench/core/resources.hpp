// What each step's kernels use of the GPU: registers, shared and local memory, and the theoretical occupancy at
// the block size the step's launcher uses. Taken at build time from the compiler's own report (nvcc
// --resource-usage, which prints ptxas's), so the pages show them without a GPU; at measure time also read back
// from the CUDA runtime, for the measurement file.
#pragma once

#include <cuda_runtime.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stepwise {

//! @brief A kernel of a step as the registry lists it.
struct KernelEntry {
    std::string name;                    //!< as compiled, inside the step's namespace: "reduce_kernel<int>"
    const void* function = nullptr;      //!< the kernel itself, for the runtime's attribute and occupancy queries
    dim3 block{1, 1, 1};                 //!< the block shape the step's launcher gives it
    std::size_t dynamic_shared_bytes = 0;//!< dynamic shared memory per block the launcher asks for

    int block_threads() const { return static_cast<int>(block.x * block.y * block.z); }
};

//! @brief A registry entry for `function`, a kernel the step launches with blocks of shape `block`.
template <typename... Params>
KernelEntry kernel_entry(std::string name, void (*function)(Params...), dim3 block,
                         std::size_t dynamic_shared_bytes = 0)
{
    return {std::move(name), reinterpret_cast<const void*>(function), block, dynamic_shared_bytes};
}

//! @brief The dynamic shared memory a step's own launch configuration gives blocks of `block_threads` threads:
//!        `configure(config, attribute, cluster_blocks, block_threads, stream)` is the step's function that fills a
//!        cluster launch (the registry takes the bytes from it rather than repeating its formula).
template <typename Configure>
std::size_t configured_shared_bytes(Configure configure, int block_threads)
{
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attribute{};
    configure(config, attribute, 1, block_threads, cudaStream_t{});
    return config.dynamicSmemBytes;
}

//! @brief What the compiler reported for one kernel on one architecture.
struct CompiledKernel {
    std::string mangled;          //!< the symbol, as ptxas names it
    std::string qualified_name;   //!< demangled, without return type and parameters: "ns::k<int>"
    std::string arch;             //!< "sm_90"
    int registers = 0;            //!< per thread
    int barriers = 0;
    std::size_t static_shared_bytes = 0;  //!< per block
    std::size_t stack_frame_bytes = 0;    //!< local memory per thread
    std::size_t spill_store_bytes = 0;
    std::size_t spill_load_bytes = 0;
};

//! @brief Every kernel of a ptxas report (the "ptxas info" lines nvcc --resource-usage prints).
//! @param where names the report in error messages
//! @throws std::runtime_error for a report that lists a kernel without its counts
std::vector<CompiledKernel> parse_ptxas_report(const std::string& text, const std::string& where);

//! @brief "void ns::k<int>(int*, int)" for "_ZN2ns1kIiEEvPii"; the symbol itself if it is not mangled.
std::string demangle(const std::string& symbol);

//! @brief The name without return type and parameter list: "ns::k<int>" for "void ns::k<int>(int*, int)".
std::string qualified_name(const std::string& demangled);

//! @brief The theoretical occupancy of one block shape on one architecture.
struct Occupancy {
    int blocks_per_sm = 0;
    int active_warps = 0;      //!< per SM
    int max_warps = 0;         //!< per SM, the architecture's limit
    std::vector<std::string> limited_by;  //!< "warps", "registers", "shared memory", "blocks", "barriers"

    double fraction() const { return max_warps > 0 ? static_cast<double>(active_warps) / max_warps : 0.0; }
};

//! @brief fp32 FMA units per SM of a compute capability (CUDA C++ Programming Guide, "Arithmetic Instructions":
//!        results per clock per SM of 32-bit floating-point multiply-add); nullopt for one this program does not know.
std::optional<int> fp32_lanes_per_sm(int major, int minor);

//! @brief The compute capability in an architecture name: "sm_90" -> {9, 0}; nullopt for anything else.
std::optional<std::pair<int, int>> compute_capability(const std::string& arch);

//! @brief Theoretical occupancy computed with NVIDIA's occupancy calculator (cuda_occupancy.h) from the
//!        architecture's limits (the CUDA programming guide's table of compute capabilities).
//! @return nullopt for an architecture whose limits this program does not know
std::optional<Occupancy> theoretical_occupancy(const std::string& arch, const CompiledKernel& kernel,
                                               int block_threads, std::size_t dynamic_shared_bytes);

//! @brief The registry's entry of one kernel: its launch shape and, per architecture compiled, the compiler's
//!        counts and the theoretical occupancy.
//! @param compiled every kernel of the build's reports (may be empty: no "compiled" field then)
//! @throws std::runtime_error when reports were given but none lists this kernel
nlohmann::json kernel_registry_json(const std::string& step_namespace, const KernelEntry& kernel,
                                    const std::vector<CompiledKernel>& compiled);

//! @brief The kernel's resources as the CUDA runtime reports them on the current device (cudaFuncGetAttributes,
//!        cudaOccupancyMaxActiveBlocksPerMultiprocessor): what the measurement file records.
//! @throws CudaError when a query fails
nlohmann::json runtime_resources_json(const KernelEntry& kernel);

}  // namespace stepwise
