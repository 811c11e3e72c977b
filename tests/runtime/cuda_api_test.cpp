// The dlopen layer and device queries, as far as they can be checked on any machine:
// library search order, reasons when something is missing, arch naming.
#include <gtest/gtest.h>

#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/dynamic_library.h"
#include "runtime/tensor_view.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::ScopedEnv;

TEST(CudaApi, LibrarySearchOrder) {
    {
        ScopedEnv a("ATTNJIT_LIBNVRTC", std::nullopt);
        ScopedEnv b("CUDA_HOME", "/opt/cuda-x");
        auto c = libnvrtc_candidates();
        ASSERT_GE(c.size(), 9u);
        EXPECT_EQ(c[0], "libnvrtc.so.13");
        EXPECT_EQ(c[1], "libnvrtc.so.12");
        EXPECT_EQ(c[2], "libnvrtc.so");
        EXPECT_NE(std::find(c.begin(), c.end(), "/usr/local/cuda/lib64/libnvrtc.so.13"), c.end());
        EXPECT_EQ(c.back(), "/opt/cuda-x/lib64/libnvrtc.so");
    }
    {
        ScopedEnv a("ATTNJIT_LIBNVRTC", "/my/libnvrtc.so");
        EXPECT_EQ(libnvrtc_candidates(), std::vector<std::string>{"/my/libnvrtc.so"});
    }
    {
        ScopedEnv a("ATTNJIT_LIBCUDA", std::nullopt);
        EXPECT_EQ(libcuda_candidates(), (std::vector<std::string>{"libcuda.so.1", "libcuda.so"}));
    }
    {
        ScopedEnv a("ATTNJIT_LIBCUDA", "/x/libcuda.so.1");
        EXPECT_EQ(libcuda_candidates(), std::vector<std::string>{"/x/libcuda.so.1"});
    }
}

TEST(CudaApi, DynamicLibrarySaysWhatEveryCandidateAnswered) {
    auto lib = DynamicLibrary::open_first({"/nonexistent/a.so", "/nonexistent/b.so"});
    EXPECT_FALSE(lib.ok());
    EXPECT_NE(lib.error().find("/nonexistent/a.so"), std::string::npos) << lib.error();
    EXPECT_NE(lib.error().find("/nonexistent/b.so"), std::string::npos) << lib.error();
    EXPECT_EQ(lib.symbol("anything"), nullptr);
}

// Whatever this machine has, the predicates agree with the accessors and the reasons
// are readable.
TEST(CudaApi, AvailabilityAndReasonsAgree) {
    if (auto why = why_no_libcuda()) {
        EXPECT_FALSE(libcuda_available());
        EXPECT_NE(why->find("libcuda"), std::string::npos) << *why;
        EXPECT_NE(why->find("ATTNJIT_LIBCUDA"), std::string::npos) << *why;
        try {
            cuda();
            FAIL() << "cuda() should throw without libcuda";
        } catch (const EnvironmentError& e) {
            EXPECT_NE(std::string(e.what()).find("Install the NVIDIA driver"), std::string::npos);
        }
        EXPECT_THROW(current_context(), EnvironmentError);
        ASSERT_TRUE(why_no_gpu());
        EXPECT_NE(why_no_gpu()->find("libcuda"), std::string::npos);
        // Error names still print without a driver.
        EXPECT_EQ(cu_error_name(CUDA_ERROR_OUT_OF_MEMORY), "CUresult 2");
    } else {
        EXPECT_TRUE(libcuda_available());
        EXPECT_FALSE(cuda().library.empty());
        EXPECT_NE(cu_error_name(CUDA_ERROR_OUT_OF_MEMORY).find("CUDA_ERROR_OUT_OF_MEMORY"),
                  std::string::npos);
    }
    if (libnvrtc_available()) {
        EXPECT_NE(nvrtc_error_name(NVRTC_ERROR_COMPILATION).find("NVRTC_ERROR_COMPILATION"),
                  std::string::npos);
    }
    if (auto why = why_no_gpu()) std::cout << "[ info ] no GPU here: " << *why << "\n";
}

TEST(Device, ArchForComputeCapability) {
    EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
    EXPECT_EQ(arch_for_compute_capability(8, 6), "sm_86");
    EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
    EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
    EXPECT_EQ(arch_for_compute_capability(10, 0), "sm_100");
    EXPECT_EQ(arch_for_compute_capability(12, 0), "sm_120");
}

TEST(TensorView, ContiguousStridesAndPrinting) {
    float x = 0;
    auto t = TensorView::contiguous(&x, DType::bf16, {2, 3, 4, 5});
    EXPECT_EQ(t.strides, (std::vector<int64_t>{60, 20, 5, 1}));
    EXPECT_EQ(t.numel(), 120);
    EXPECT_EQ(t.rank(), 4);
    std::ostringstream s;
    s << t;
    EXPECT_NE(s.str().find("bf16[2, 3, 4, 5] strides [60, 20, 5, 1]"), std::string::npos) << s.str();
}

}  // namespace
}  // namespace attnjit::runtime
