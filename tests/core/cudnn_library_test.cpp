// Where the timing program looks for cuDNN and what it says where it finds none (no GPU needed; the one test that
// needs cuDNN itself skips where no libcudnn.so.9 opens).
#include "core/cudnn_library.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace stepwise {
namespace {

//! Sets STEPWISE_CUDNN_LIBRARY (or unsets it, for std::nullopt) for one test, and puts back what was there.
class LibraryVariable {
public:
    explicit LibraryVariable(const std::optional<std::string>& value)
    {
        if (const char* old = std::getenv(name)) {
            old_ = old;
        }
        set(value);
    }
    ~LibraryVariable() { set(old_); }

private:
    static void set(const std::optional<std::string>& value)
    {
        if (value) {
            setenv(name, value->c_str(), 1);
        } else {
            unsetenv(name);
        }
    }
    static constexpr const char* name = "STEPWISE_CUDNN_LIBRARY";
    std::optional<std::string> old_;
};

TEST(CudnnLibrary, TheVariableComesFirstThenTheLoadersPath)
{
    const LibraryVariable variable("/nowhere/libcudnn.so.9");
    const std::vector<std::string> candidates = cudnn_library_candidates();
    ASSERT_GE(candidates.size(), 2u);
    EXPECT_EQ(candidates[0], "/nowhere/libcudnn.so.9");
    EXPECT_EQ(candidates[1], "libcudnn.so.9");
}

TEST(CudnnLibrary, AnEmptyOrUnsetVariableIsNoCandidate)
{
    for (const std::optional<std::string>& value : {std::optional<std::string>(""), std::optional<std::string>()}) {
        const LibraryVariable variable(value);
        const std::vector<std::string> candidates = cudnn_library_candidates();
        ASSERT_FALSE(candidates.empty());
        EXPECT_EQ(candidates[0], "libcudnn.so.9");
    }
}

TEST(CudnnLibrary, NoneOpensNamesWhatWasTried)
{
    const CudnnLibrary library = open_cudnn_library({"/nowhere/a/libcudnn.so.9", "/nowhere/b/libcudnn.so.9"}, 9);
    EXPECT_FALSE(library.available());
    EXPECT_EQ(library.handle, nullptr);
    EXPECT_TRUE(library.version.empty());
    EXPECT_EQ(library.reason, "cuDNN 9 not found (tried /nowhere/a/libcudnn.so.9, /nowhere/b/libcudnn.so.9; set "
                              "STEPWISE_CUDNN_LIBRARY to libcudnn.so.9)");
}

// libm, which every C++ program here has loaded, stands for a library that opens but is no cuDNN.
TEST(CudnnLibrary, AMissingPathFallsBackToTheNextAndTheFirstThatOpensIsChecked)
{
    const CudnnLibrary library = open_cudnn_library({"/nowhere/libcudnn.so.9", "libm.so.6", "libcudnn.so.9"}, 9);
    EXPECT_NE(library.handle, nullptr);
    EXPECT_EQ(library.path, "libm.so.6");
    EXPECT_EQ(library.reason, "libm.so.6 has no cudnnGetVersion");
}

TEST(CudnnLibrary, FindSymbolNamesTheFirstMissing)
{
    const CudnnLibrary library = open_cudnn_library({"libm.so.6"}, 9);
    ASSERT_NE(library.handle, nullptr);
    double (*cosine)(double) = nullptr;
    void (*create)() = nullptr;
    void (*destroy)() = nullptr;
    std::string missing;
    EXPECT_TRUE(library.find_symbol("cos", cosine, missing));
    ASSERT_NE(cosine, nullptr);
    EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
    EXPECT_TRUE(missing.empty());
    EXPECT_FALSE(library.find_symbol("cudnnCreate", create, missing));
    EXPECT_FALSE(library.find_symbol("cudnnDestroy", destroy, missing));
    EXPECT_EQ(create, nullptr);
    EXPECT_EQ(missing, "cudnnCreate");
}

TEST(CudnnLibrary, AnInstalledCudnnGivesItsVersionAndIsCheckedAgainstTheMajor)
{
    const CudnnLibrary library = open_cudnn_library({"libcudnn.so.9"}, 9);
    if (library.handle == nullptr) {
        GTEST_SKIP() << library.reason;
    }
    EXPECT_TRUE(library.available()) << library.reason;
    EXPECT_TRUE(std::regex_match(library.version, std::regex(R"(cuDNN 9\.\d+\.\d+ \(libcudnn\.so\.9\))")))
        << library.version;
    EXPECT_EQ(open_cudnn_library({"libcudnn.so.9"}, 8).reason, library.version + ": built against cuDNN 8");
}

}  // namespace
}  // namespace stepwise
