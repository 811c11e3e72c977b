// With ATTNJIT_LIBNVRTC and ATTNJIT_LIBCUDA pointing nowhere (set in main(), before
// anything loads them, since libraries load once per process), every entry point fails
// with an EnvironmentError that names the library, quotes dlopen and says what to do.
#include <gtest/gtest.h>

#include <stdlib.h>

#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

TEST(MissingLibraries, CompileSaysNvrtcIsMissingAndHowToFixIt) {
    std::string msg = testing::environment_error_of([] { compile_kernel(testing::tiny_source(), "sm_80"); });
    EXPECT_NE(msg.find("libnvrtc"), std::string::npos) << msg;
    EXPECT_NE(msg.find("/nonexistent/libnvrtc.so.13"), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file"), std::string::npos) << "dlopen's answer: " << msg;
    EXPECT_NE(msg.find("ATTNJIT_LIBNVRTC"), std::string::npos) << msg;
    EXPECT_FALSE(libnvrtc_available());
    EXPECT_EQ(nvrtc_toolchain_id(), "nvrtc unavailable");
}

TEST(MissingLibraries, KernelCacheReportsTheMissingCompilerEveryTime) {
    KernelCache cache(KernelCache::Options::with_disk_root(""));
    for (int i = 0; i < 2; ++i) {
        std::string msg = testing::environment_error_of([&] { cache.get_compiled(testing::tiny_source(), "sm_80"); });
        EXPECT_NE(msg.find("libnvrtc"), std::string::npos) << msg;
        EXPECT_NE(msg.find("cannot get kernel tiny_add_0 for sm_80: it is not in a kernel bundle (none is loaded or "
                           "linked) nor in the kernel cache (the disk cache is disabled), and compiling it needs NVRTC"),
                  std::string::npos)
            << msg;
    }
    EXPECT_EQ(cache.stats().misses, 0u);
    // Without NVRTC only the arch's form is checked: cached kernels need no compiler.
    EXPECT_NO_THROW(check_arch("sm_80"));
    EXPECT_THROW(check_arch("compute_80"), UserError);
}

TEST(MissingLibraries, GpuIsReportedAbsentWithTheReason) {
    auto why = why_no_gpu();
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("/nonexistent/libcuda.so.1"), std::string::npos) << *why;
    std::string msg = testing::environment_error_of([] { current_context(); });
    EXPECT_NE(msg.find("Install the NVIDIA driver"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ATTNJIT_LIBCUDA"), std::string::npos) << msg;
    msg = testing::environment_error_of([] { current_device(); });
    EXPECT_NE(msg.find("libcuda"), std::string::npos) << msg;
}

}  // namespace
}  // namespace attnjit::runtime

int main(int argc, char** argv) {
    setenv("ATTNJIT_LIBNVRTC", "/nonexistent/libnvrtc.so.13", 1);
    setenv("ATTNJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
