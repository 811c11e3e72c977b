// On a GPU: load and launch hand-written kernels through KernelCache, with the Params
// struct as the single argument; shared-memory opt-in; the fast path's cost. Each test
// skips with the reason when there is no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::TempDir;
using testing::TinyParams;
using testing::tiny_source;

#define REQUIRE_GPU()                                          \
    do {                                                       \
        if (auto why = why_no_gpu()) GTEST_SKIP() << *why;     \
    } while (0)

// Device memory for the test's lifetime.
class DeviceBuffer {
public:
    explicit DeviceBuffer(size_t bytes) {
        check_cu(cuda().cuMemAlloc(&ptr_, bytes), "cuMemAlloc");
    }
    ~DeviceBuffer() { cuda().cuMemFree(ptr_); }
    void* get() const { return reinterpret_cast<void*>(ptr_); }
    CUdeviceptr ptr() const { return ptr_; }

private:
    CUdeviceptr ptr_ = 0;
};

TEST(GpuLaunch, TrivialKernelWithParamsStruct) {
    REQUIRE_GPU();
    TempDir tmp;
    KernelCache cache(KernelCache::Options::with_disk_root(tmp.path()));
    auto k = cache.get_loaded(tiny_source());
    std::cout << "[ info ] " << current_device() << "\n[ info ] " << *k << "\n";
    EXPECT_EQ(k->compiled().arch, current_device().arch());

    constexpr int n = 1000;
    std::vector<float> in(n), out(n, -1.f);
    for (int i = 0; i < n; ++i) in[i] = float(i);
    DeviceBuffer d_in(n * sizeof(float)), d_out(n * sizeof(float));
    const auto& cu = cuda();
    check_cu(cu.cuMemcpyHtoD(d_in.ptr(), in.data(), n * sizeof(float)), "cuMemcpyHtoD");
    TinyParams p{static_cast<float*>(d_out.get()), static_cast<const float*>(d_in.get()), 0.5f, n};
    if (k->params_size()) {
        EXPECT_EQ(*k->params_size(), sizeof(TinyParams));
    }
    k->launch(Dim3{(n + 127) / 128}, Dim3{128}, 0, p);
    check_cu(cu.cuCtxSynchronize(), "cuCtxSynchronize");
    check_cu(cu.cuMemcpyDtoH(out.data(), d_out.ptr(), n * sizeof(float)), "cuMemcpyDtoH");
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], float(i) + 0.5f) << i;
    EXPECT_EQ(cache.get_loaded(tiny_source()), k) << "second request is a memory hit";
    EXPECT_EQ(cache.stats().loads, 1u);
}

TEST(GpuLaunch, LaunchArgumentsAreChecked) {
    REQUIRE_GPU();
    KernelCache cache(KernelCache::Options::with_disk_root(""));
    auto k = cache.get_loaded(tiny_source());
    TinyParams p{};
    p.n = 0;
    EXPECT_THROW(k->launch(Dim3{1}, Dim3{256}, 0, p), UserError) << "block size != 128";
    EXPECT_THROW(k->launch(Dim3{1}, Dim3{128}, 1 << 20, p), UserError) << "too much smem";
    if (k->params_size()) {
        int wrong = 0;
        EXPECT_THROW(k->launch(Dim3{1}, Dim3{128}, 0, wrong), InternalError);
    }
}

codegen::KernelSource smem_source(int bytes) {
    codegen::KernelSource s;
    s.name = "smem_" + std::to_string(bytes);
    s.entry = "smem_kernel";
    s.source = R"(
struct Params { int* out; int words; };
extern "C" __global__ void smem_kernel(const __grid_constant__ Params p) {
    extern __shared__ int buf[];
    for (int i = threadIdx.x; i < p.words; i += blockDim.x) buf[i] = i;
    __syncthreads();
    int sum = 0;
    if (threadIdx.x == 0) {
        for (int i = 0; i < p.words; ++i) sum += buf[i] == i;
        p.out[0] = sum;
    }
}
)";
    s.threads = 128;
    s.smem_bytes = bytes;
    return s;
}

TEST(GpuLaunch, LargeDynamicSharedMemoryIsOptedIn) {
    REQUIRE_GPU();
    DeviceInfo dev = current_device();
    const int bytes = std::min(dev.max_smem_per_block_optin, 160 * 1024);
    ASSERT_GT(bytes, 48 * 1024) << dev;
    KernelCache cache(KernelCache::Options::with_disk_root(""));
    auto k = cache.get_loaded(smem_source(bytes));
    EXPECT_EQ(k->max_dynamic_smem(), bytes);
    DeviceBuffer out(sizeof(int));
    struct {
        int* out;
        int words;
    } p{static_cast<int*>(out.get()), bytes / 4};
    k->launch(Dim3{1}, Dim3{128}, bytes, p);
    check_cu(cuda().cuCtxSynchronize(), "cuCtxSynchronize");
    int got = 0;
    check_cu(cuda().cuMemcpyDtoH(&got, out.ptr(), sizeof(int)), "cuMemcpyDtoH");
    EXPECT_EQ(got, bytes / 4);
}

TEST(GpuLaunch, MoreSharedMemoryThanTheDeviceHasIsAClearError) {
    REQUIRE_GPU();
    KernelCache cache(KernelCache::Options::with_disk_root(""));
    try {
        cache.get_loaded(smem_source(1 << 20));
        FAIL() << "1 MiB of shared memory should not fit";
    } catch (const EnvironmentError& e) {
        EXPECT_NE(std::string(e.what()).find("allows at most"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("smaller tile"), std::string::npos) << e.what();
    }
}

TEST(GpuLaunch, FastPathHitIsCheap) {
    REQUIRE_GPU();
    KernelCache cache(KernelCache::Options::with_disk_root(""));
    int generated = 0;
    auto make = [&] {
        ++generated;
        return tiny_source();
    };
    auto first = cache.get_loaded("fast-key", make);
    constexpr int kCalls = 20000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) ASSERT_EQ(cache.get_loaded("fast-key", make), first);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() / kCalls;
    std::cout << "[ info ] fast-path hit: " << us << " us\n";
    EXPECT_EQ(generated, 1);
    EXPECT_LT(us, 50.0);
}

TEST(GpuLaunch, ThreadsWithoutAContextGetThePrimaryOne) {
    REQUIRE_GPU();
    KernelCache cache(KernelCache::Options::with_disk_root(""));
    auto main_k = cache.get_loaded(tiny_source());
    std::shared_ptr<const LoadedKernel> other;
    std::thread t([&] { other = cache.get_loaded(tiny_source()); });
    t.join();
    EXPECT_EQ(other, main_k) << "same primary context, same loaded module";
}

}  // namespace
}  // namespace attnjit::runtime
