// The compiler-report parser, the demangled names and the theoretical occupancy (no GPU needed).
#include "core/chapter.hpp"
#include "core/resources.hpp"

#include <gtest/gtest.h>

namespace stepwise {
namespace {

// What nvcc --resource-usage printed for two kernels (CUDA 13.0, sm_90), with a device function compiled on its
// own between them (its counts belong to no kernel).
const char* const report = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN8stepwise9reduction21sequential_addressing13reduce_kernelIfEEvPKT_PS3_i' for 'sm_90'
ptxas info    : Function properties for _ZN8stepwise9reduction21sequential_addressing13reduce_kernelIfEEvPKT_PS3_i
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 6.174 ms
ptxas info    : Function properties for __internal_trig_reduction_slowpathd
    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_ZN8stepwise9reduction11single_pass13reduce_kernelILi1024EiEEvPKT0_PS3_PjS6_i' for 'sm_90'
ptxas info    : Function properties for _ZN8stepwise9reduction11single_pass13reduce_kernelILi1024EiEEvPKT0_PS3_PjS6_i
    32 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 129 bytes smem
)";

TEST(PtxasReport, EveryKernelWithItsCounts)
{
    const auto kernels = parse_ptxas_report(report, "report.txt");
    ASSERT_EQ(kernels.size(), 2u);
    EXPECT_EQ(kernels[0].qualified_name, "stepwise::reduction::sequential_addressing::reduce_kernel<float>");
    EXPECT_EQ(kernels[0].arch, "sm_90");
    EXPECT_EQ(kernels[0].registers, 12);
    EXPECT_EQ(kernels[0].barriers, 1);
    EXPECT_EQ(kernels[0].static_shared_bytes, 1024u);
    EXPECT_EQ(kernels[0].stack_frame_bytes, 0u);
    EXPECT_EQ(kernels[1].qualified_name, "stepwise::reduction::single_pass::reduce_kernel<1024, int>");
    EXPECT_EQ(kernels[1].registers, 32);
    EXPECT_EQ(kernels[1].static_shared_bytes, 129u);
    EXPECT_EQ(kernels[1].stack_frame_bytes, 32u);
    EXPECT_EQ(kernels[1].spill_store_bytes, 8u);
    EXPECT_EQ(kernels[1].spill_load_bytes, 12u);
}

TEST(PtxasReport, AKernelWithoutItsCountsIsAnError)
{
    const std::string truncated =
        "ptxas info    : Compiling entry function '_ZN2ns1kEv' for 'sm_90'\n"
        "ptxas info    : Function properties for _ZN2ns1kEv\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    EXPECT_THROW(parse_ptxas_report(truncated, "t.txt"), std::runtime_error);
    EXPECT_TRUE(parse_ptxas_report("", "empty.txt").empty());
}

TEST(PtxasReport, NamesAreDemangledWithoutReturnTypeOrParameters)
{
    EXPECT_EQ(demangle("_ZN2ns1kIiEEvPii"), "void ns::k<int>(int*, int)");
    EXPECT_EQ(demangle("not_mangled"), "not_mangled");
    // relocatable device code names a kernel of internal linkage with a prefix before its mangled name
    EXPECT_EQ(demangle("__nv_static_32__fa0ed77c_5_dp_cu_b1283ccb_17134__ZN8stepwise5child12child_kernelEPii"),
              "stepwise::child::child_kernel(int*, int)");
    EXPECT_EQ(qualified_name("void ns::k<int>(int*, int)"), "ns::k<int>");
    EXPECT_EQ(qualified_name("void ns::k<(int)3, void (*)(int)>(float)"), "ns::k<(int)3, void (*)(int)>");
    EXPECT_EQ(qualified_name("void a::(anonymous namespace)::k(int)"), "a::{anonymous}::k");
}

CompiledKernel counts(int registers, std::size_t shared)
{
    CompiledKernel k;
    k.registers = registers;
    k.static_shared_bytes = shared;
    return k;
}

TEST(Occupancy, FromTheArchitecturesLimits)
{
    // Hopper: 64 warps, 32 blocks, 65536 registers and 228 KiB of shared memory per SM (1 KiB reserved per block).
    const auto full = theoretical_occupancy("sm_90", counts(32, 0), 256, 0);
    ASSERT_TRUE(full);
    EXPECT_EQ(full->blocks_per_sm, 8);
    EXPECT_EQ(full->active_warps, 64);
    EXPECT_EQ(full->max_warps, 64);
    EXPECT_DOUBLE_EQ(full->fraction(), 1.0);

    const auto registers = theoretical_occupancy("sm_90", counts(64, 0), 256, 0);  // 16384 registers a block
    ASSERT_TRUE(registers);
    EXPECT_EQ(registers->blocks_per_sm, 4);
    EXPECT_DOUBLE_EQ(registers->fraction(), 0.5);
    EXPECT_EQ(registers->limited_by, std::vector<std::string>{"registers"});

    const auto shared = theoretical_occupancy("sm_90", counts(16, 0), 128, 100 * 1024);  // 101 KiB a block
    ASSERT_TRUE(shared);
    EXPECT_EQ(shared->blocks_per_sm, 2);
    EXPECT_EQ(shared->limited_by, std::vector<std::string>{"shared memory"});

    const auto blocks = theoretical_occupancy("sm_90", counts(16, 0), 32, 0);  // 32 blocks of one warp
    ASSERT_TRUE(blocks);
    EXPECT_EQ(blocks->blocks_per_sm, 32);
    EXPECT_EQ(blocks->active_warps, 32);
    EXPECT_EQ(blocks->limited_by, std::vector<std::string>{"blocks"});

    EXPECT_EQ(theoretical_occupancy("sm_86", counts(32, 0), 1024, 0)->max_warps, 48);
    EXPECT_FALSE(theoretical_occupancy("sm_999", counts(32, 0), 256, 0));
    EXPECT_FALSE(theoretical_occupancy("compute_90", counts(32, 0), 256, 0));
}

TEST(Occupancy, ComputeCapabilityOfAnArchitectureName)
{
    EXPECT_EQ(compute_capability("sm_90"), std::make_pair(9, 0));
    EXPECT_EQ(compute_capability("sm_90a"), std::make_pair(9, 0));
    EXPECT_EQ(compute_capability("sm_120"), std::make_pair(12, 0));
    EXPECT_FALSE(compute_capability("gfx90a"));
}

TEST(RegistryKernels, EveryStepKernelIsFoundInTheReportsOrTheRegistryFails)
{
    const KernelEntry kernel{"reduce_kernel<float>", nullptr, dim3(256), 0};
    const auto compiled = parse_ptxas_report(report, "report.txt");
    const nlohmann::json j =
        kernel_registry_json("stepwise::reduction::sequential_addressing", kernel, compiled);
    EXPECT_EQ(j.at("block_threads"), 256);
    ASSERT_EQ(j.at("compiled").size(), 1u);
    EXPECT_EQ(j.at("compiled").at(0).at("registers"), 12);
    EXPECT_EQ(j.at("compiled").at(0).at("occupancy").at("blocks_per_sm"), 8);
    EXPECT_THROW(kernel_registry_json("stepwise::reduction::other", kernel, compiled), std::runtime_error);
    EXPECT_FALSE(kernel_registry_json("stepwise::reduction::other", kernel, {}).contains("compiled"));
}

TEST(RegistryKernels, EveryStepOfEveryChapterNamesItsKernels)
{
    for (const auto& chapter : make_chapters()) {
        for (const StepEntry& step : chapter->entry().steps) {
            EXPECT_FALSE(step.kernels.empty()) << chapter->entry().id << "/" << step.id;
            for (const KernelEntry& k : step.kernels) {
                EXPECT_NE(k.function, nullptr) << step.id << " " << k.name;
                EXPECT_GT(k.block_threads(), 0) << step.id << " " << k.name;
                EXPECT_LE(k.block_threads(), 1024) << step.id << " " << k.name;
            }
        }
    }
}

}  // namespace
}  // namespace stepwise
