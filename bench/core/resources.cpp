#include "core/resources.hpp"

#include "core/cuda_check.hpp"

#include <cuda_occupancy.h>
#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace stepwise {
namespace {

//! The limits of one compute capability that occupancy depends on (CUDA C++ Programming Guide, "Technical
//! Specifications per Compute Capability"); the rest (blocks per SM, register allocation) is in cuda_occupancy.h.
struct ArchitectureLimits {
    int major, minor;
    int max_threads_per_sm;
    std::size_t shared_per_sm;          //!< bytes of shared memory an SM can give its blocks
    std::size_t shared_per_block_optin; //!< the most one block can opt into
    std::size_t reserved_shared_per_block;
};

constexpr ArchitectureLimits known_architectures[] = {
    {7, 0, 2048, 96 * 1024, 96 * 1024, 0},       {7, 5, 1024, 64 * 1024, 64 * 1024, 0},
    {8, 0, 2048, 164 * 1024, 163 * 1024, 1024},  {8, 6, 1536, 100 * 1024, 99 * 1024, 1024},
    {8, 7, 1536, 164 * 1024, 163 * 1024, 1024},  {8, 9, 1536, 100 * 1024, 99 * 1024, 1024},
    {9, 0, 2048, 228 * 1024, 227 * 1024, 1024},  {10, 0, 2048, 228 * 1024, 227 * 1024, 1024},
    {12, 0, 1536, 100 * 1024, 99 * 1024, 1024},
};

std::size_t to_size(const std::string& text) { return static_cast<std::size_t>(std::stoull(text)); }

}  // namespace

std::optional<int> fp32_lanes_per_sm(int major, int minor)
{
    if (major == 7 || (major == 8 && minor == 0)) {
        return 64;
    }
    if ((major == 8 && (minor == 6 || minor == 7 || minor == 9)) || major == 9 || major == 10 || major == 12) {
        return 128;
    }
    return std::nullopt;
}

std::vector<CompiledKernel> parse_ptxas_report(const std::string& text, const std::string& where)
{
    static const std::regex entry(R"(ptxas info\s*: Compiling entry function '([^']+)' for '([^']+)')");
    static const std::regex properties(R"(ptxas info\s*: Function properties for (\S+))");
    static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
    static const std::regex used(R"(ptxas info\s*: Used (\d+) registers)");
    static const std::regex barriers(R"(used (\d+) barriers)");
    static const std::regex smem(R"((\d+) bytes smem)");

    std::vector<CompiledKernel> out;
    std::map<std::string, std::array<std::size_t, 3>> frames;  // symbol -> stack, spill stores, spill loads
    std::optional<CompiledKernel> current;
    std::string properties_of;
    std::istringstream lines(text);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
        ++number;
        std::smatch m;
        if (std::regex_search(line, m, entry)) {
            if (current) {
                throw std::runtime_error(where + ":" + std::to_string(number) + ": entry function " +
                                         current->mangled + " has no 'Used N registers' line");
            }
            current = CompiledKernel{};
            current->mangled = m[1];
            current->arch = m[2];
            current->qualified_name = qualified_name(demangle(current->mangled));
        } else if (std::regex_search(line, m, properties)) {
            properties_of = m[1];
        } else if (std::regex_search(line, m, frame)) {
            frames[properties_of] = {to_size(m[1]), to_size(m[2]), to_size(m[3])};
        } else if (std::regex_search(line, m, used)) {
            if (!current) {
                continue;  // the counts of a device function compiled on its own, not of a kernel
            }
            current->registers = std::stoi(m[1]);
            if (std::regex_search(line, m, barriers)) {
                current->barriers = std::stoi(m[1]);
            }
            if (std::regex_search(line, m, smem)) {
                current->static_shared_bytes = to_size(m[1]);
            }
            const auto f = frames.find(current->mangled);
            if (f == frames.end()) {
                throw std::runtime_error(where + ":" + std::to_string(number) + ": entry function " +
                                         current->mangled + " has no stack frame line");
            }
            current->stack_frame_bytes = f->second[0];
            current->spill_store_bytes = f->second[1];
            current->spill_load_bytes = f->second[2];
            out.push_back(*current);
            current.reset();
        }
    }
    if (current) {
        throw std::runtime_error(where + ": entry function " + current->mangled + " has no 'Used N registers' line");
    }
    return out;
}

std::string demangle(const std::string& symbol)
{
    // With relocatable device code (-rdc), ptxas names a kernel of internal linkage
    // "__nv_static_<n>__<hash>_<...>_<n>_" followed by its mangled name: demangle what follows.
    std::string mangled = symbol;
    if (mangled.rfind("__nv_static_", 0) == 0) {
        if (const std::size_t at = mangled.find("__Z", 12); at != std::string::npos) {
            mangled.erase(0, at + 1);
        }
    }
    int status = 0;
    const std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                     std::free);
    return status == 0 && text ? std::string(text.get()) : symbol;
}

std::string qualified_name(const std::string& demangled)
{
    std::string text = demangled;
    const std::string anonymous = "(anonymous namespace)";
    for (std::size_t at; (at = text.find(anonymous)) != std::string::npos;) {
        text.replace(at, anonymous.size(), "{anonymous}");
    }
    if (text.rfind("void ", 0) == 0) {
        text.erase(0, 5);
    }
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '<') {
            ++depth;
        } else if (text[i] == '>') {
            --depth;
        } else if (text[i] == '(' && depth == 0) {
            return text.substr(0, i);
        }
    }
    return text;
}

std::optional<std::pair<int, int>> compute_capability(const std::string& arch)
{
    static const std::regex pattern(R"(sm_(\d+)(\d)[a-z]?)");
    std::smatch m;
    if (!std::regex_match(arch, m, pattern)) {
        return std::nullopt;
    }
    return std::make_pair(std::stoi(m[1]), std::stoi(m[2]));
}

std::optional<Occupancy> theoretical_occupancy(const std::string& arch, const CompiledKernel& kernel,
                                               int block_threads, std::size_t dynamic_shared_bytes)
{
    const auto cc = compute_capability(arch);
    if (!cc) {
        return std::nullopt;
    }
    const auto* limits = std::find_if(std::begin(known_architectures), std::end(known_architectures),
                                      [&](const ArchitectureLimits& a) { return a.major == cc->first && a.minor == cc->second; });
    if (limits == std::end(known_architectures)) {
        return std::nullopt;
    }
    cudaOccDeviceProp device;
    device.computeMajor = limits->major;
    device.computeMinor = limits->minor;
    device.maxThreadsPerBlock = 1024;
    device.maxThreadsPerMultiprocessor = limits->max_threads_per_sm;
    device.regsPerBlock = 65536;
    device.regsPerMultiprocessor = 65536;
    device.warpSize = 32;
    device.sharedMemPerBlock = 48 * 1024;
    device.sharedMemPerMultiprocessor = limits->shared_per_sm;
    device.numSms = 1;  // occupancy is per SM
    device.sharedMemPerBlockOptin = limits->shared_per_block_optin;
    device.reservedSharedMemPerBlock = limits->reserved_shared_per_block;

    // As cudaOccFuncAttributes would be filled from cudaFuncGetAttributes (one barrier, opt-in limit).
    cudaOccFuncAttributes function;
    function.maxThreadsPerBlock = 1024;
    function.numRegs = kernel.registers;
    function.sharedSizeBytes = kernel.static_shared_bytes;
    function.partitionedGCConfig = PARTITIONED_GC_OFF;
    function.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
    function.maxDynamicSharedSizeBytes =
        std::max(dynamic_shared_bytes, device.sharedMemPerBlock - std::min(device.sharedMemPerBlock, kernel.static_shared_bytes));
    function.numBlockBarriers = 1;

    cudaOccDeviceState state;
    cudaOccResult result{};
    if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &device, &function, &state, block_threads,
                                               dynamic_shared_bytes) != CUDA_OCC_SUCCESS) {
        return std::nullopt;
    }
    Occupancy occupancy;
    occupancy.blocks_per_sm = result.activeBlocksPerMultiprocessor;
    occupancy.max_warps = limits->max_threads_per_sm / 32;
    occupancy.active_warps = occupancy.blocks_per_sm * ((block_threads + 31) / 32);
    const std::pair<unsigned, const char*> factors[] = {
        {OCC_LIMIT_WARPS, "warps"},   {OCC_LIMIT_REGISTERS, "registers"}, {OCC_LIMIT_SHARED_MEMORY, "shared memory"},
        {OCC_LIMIT_BLOCKS, "blocks"}, {OCC_LIMIT_BARRIERS, "barriers"},
    };
    for (const auto& [bit, name] : factors) {
        if (result.limitingFactors & bit) {
            occupancy.limited_by.push_back(name);
        }
    }
    return occupancy;
}

nlohmann::json kernel_registry_json(const std::string& step_namespace, const KernelEntry& kernel,
                                    const std::vector<CompiledKernel>& compiled)
{
    nlohmann::json out = {{"name", kernel.name},
                          {"block", {kernel.block.x, kernel.block.y, kernel.block.z}},
                          {"block_threads", kernel.block_threads()},
                          {"dynamic_shared_bytes", kernel.dynamic_shared_bytes}};
    if (compiled.empty()) {
        return out;
    }
    const std::string wanted = step_namespace + "::" + kernel.name;
    nlohmann::json per_arch = nlohmann::json::array();
    std::map<std::string, const CompiledKernel*> seen;  // arch -> first report of it
    for (const CompiledKernel& c : compiled) {
        if (c.qualified_name != wanted) {
            continue;
        }
        if (const auto s = seen.find(c.arch); s != seen.end()) {
            if (s->second->registers != c.registers || s->second->static_shared_bytes != c.static_shared_bytes ||
                s->second->stack_frame_bytes != c.stack_frame_bytes) {
                throw std::runtime_error("two translation units compiled " + wanted + " for " + c.arch +
                                         " with different resources");
            }
            continue;
        }
        seen[c.arch] = &c;
        nlohmann::json j = {{"arch", c.arch},
                            {"registers", c.registers},
                            {"barriers", c.barriers},
                            {"static_shared_bytes", c.static_shared_bytes},
                            {"stack_frame_bytes", c.stack_frame_bytes},
                            {"spill_store_bytes", c.spill_store_bytes},
                            {"spill_load_bytes", c.spill_load_bytes},
                            {"occupancy", nullptr}};
        if (const auto o = theoretical_occupancy(c.arch, c, kernel.block_threads(), kernel.dynamic_shared_bytes)) {
            j["occupancy"] = {{"blocks_per_sm", o->blocks_per_sm},
                              {"active_warps", o->active_warps},
                              {"max_warps", o->max_warps},
                              {"fraction", o->fraction()},
                              {"limited_by", o->limited_by}};
        }
        per_arch.push_back(j);
    }
    if (per_arch.empty()) {
        throw std::runtime_error("the ptxas reports list no kernel " + wanted +
                                 " (the registry names a kernel the build did not compile)");
    }
    out["compiled"] = per_arch;
    return out;
}

nlohmann::json runtime_resources_json(const KernelEntry& kernel)
{
    cudaFuncAttributes attributes{};
    STEPWISE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel.function));
    int device = 0;
    STEPWISE_CUDA_CHECK(cudaGetDevice(&device));
    int max_threads_per_sm = 0;
    STEPWISE_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    if (kernel.dynamic_shared_bytes > 0) {  // what the launcher does before it launches: opt in to this much
        STEPWISE_CUDA_CHECK(cudaFuncSetAttribute(kernel.function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(kernel.dynamic_shared_bytes)));
    }
    int blocks_per_sm = 0;
    STEPWISE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel.function,
                                                                      kernel.block_threads(),
                                                                      kernel.dynamic_shared_bytes));
    const int warps = blocks_per_sm * ((kernel.block_threads() + 31) / 32);
    return {{"kernel", kernel.name},
            {"block", {kernel.block.x, kernel.block.y, kernel.block.z}},
            {"registers", attributes.numRegs},
            {"static_shared_bytes", attributes.sharedSizeBytes},
            {"local_bytes", attributes.localSizeBytes},
            {"binary_version", attributes.binaryVersion},
            {"blocks_per_sm", blocks_per_sm},
            {"occupancy", static_cast<double>(warps) / (max_threads_per_sm / 32)}};
}

}  // namespace stepwise
