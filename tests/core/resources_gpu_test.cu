// The resources the pages show come from the compiler's report at build time; here the CUDA runtime on the GPU
// must report the same counts for every step kernel, and the same occupancy as the build computed from the
// architecture's limits.
#include "core/chapter.hpp"
#include "support/gpu_test_support.hpp"
#include "core/resources.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace stepwise {
namespace {

//! The build's step registry: build/registry.json, next to the folder of this test binary (build/tests).
nlohmann::json build_registry()
{
    const std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() /
                                       "registry.json";
    std::ifstream in(path);
    if (!in) {
        ADD_FAILURE() << "no step registry at " << path << " (the build writes it)";
        return nullptr;
    }
    return nlohmann::json::parse(in);
}

TEST(Resources, TheRuntimeReportsWhatTheBuildCountedForEveryStepKernel)
{
    STEPWISE_SKIP_WITHOUT_GPU();
    if (std::getenv("STEPWISE_UNDER_SANITIZER") != nullptr) {
        GTEST_SKIP() << "compute-sanitizer's instrumentation changes register counts; checked in the plain run";
    }
    const nlohmann::json registry = build_registry();
    ASSERT_FALSE(registry.is_null());
    int device = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
    const std::string arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);

    int checked = 0;
    for (const auto& chapter : make_chapters()) {
        const auto& c = *std::find_if(registry.at("chapters").begin(), registry.at("chapters").end(),
                                      [&](const auto& j) { return j.at("id") == chapter->entry().id; });
        for (const StepEntry& step : chapter->entry().steps) {
            const auto& s = *std::find_if(c.at("steps").begin(), c.at("steps").end(),
                                          [&](const auto& j) { return j.at("id") == step.id; });
            for (const KernelEntry& kernel : step.kernels) {
                SCOPED_TRACE(chapter->entry().id + "/" + step.id + " " + kernel.name);
                const auto& k = *std::find_if(s.at("kernels").begin(), s.at("kernels").end(),
                                              [&](const auto& j) { return j.at("name") == kernel.name; });
                ASSERT_TRUE(k.contains("compiled")) << "the registry has no compiled counts";
                // The machine code for this GPU: its architecture, or its arch-specific variant (sm_90a, the
                // tensor-core chapter's, which is the only machine code of those kernels on a 9.0 GPU).
                const auto for_this_gpu = [&](const auto& j) {
                    return j.at("arch") == arch || j.at("arch") == arch + "a";
                };
                const auto compiled = std::find_if(k.at("compiled").begin(), k.at("compiled").end(), for_this_gpu);
                ASSERT_NE(compiled, k.at("compiled").end()) << "not compiled for this GPU's " << arch;
                const nlohmann::json runtime = runtime_resources_json(kernel);
                EXPECT_EQ(runtime.at("registers"), compiled->at("registers"));
                EXPECT_EQ(runtime.at("static_shared_bytes"), compiled->at("static_shared_bytes"));
                EXPECT_EQ(runtime.at("local_bytes"), compiled->at("stack_frame_bytes"));
                ASSERT_FALSE(compiled->at("occupancy").is_null()) << "no occupancy for " << arch;
                EXPECT_EQ(runtime.at("blocks_per_sm"), compiled->at("occupancy").at("blocks_per_sm"));
                ++checked;
            }
        }
    }
    EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace stepwise
