// KernelCache with a fake compiler: counters, single flight, disk hits across cache
// instances, rebuilt corrupt entries, read-only degradation, the env switch, the fast
// path, and keys.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/compiler.h"
#include "runtime/kernel_cache.h"
#include "runtime/kernel_key.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::fake_options;
using testing::FakeCompiler;
using testing::files_under;
using testing::ScopedEnv;
using testing::TempDir;
using testing::tiny_source;

TEST(KernelCache, CountsMissesMemoryHitsAndDiskHits) {
    TempDir tmp;
    FakeCompiler fake;
    auto src = tiny_source();
    {
        KernelCache cache(fake_options(fake, tmp.path()));
        auto a = cache.get_compiled(src, "sm_80");
        auto b = cache.get_compiled(src, "sm_80");
        EXPECT_EQ(a, b);
        CacheStats s = cache.stats();
        EXPECT_EQ(s.misses, 1u);
        EXPECT_EQ(s.memory_hits, 1u);
        EXPECT_EQ(s.disk_hits, 0u);
        EXPECT_DOUBLE_EQ(s.compile_seconds, 0.25);
        cache.get_compiled(src, "sm_90a");  // another arch is another kernel
        EXPECT_EQ(cache.stats().misses, 2u);

        std::ostringstream os;
        os << cache.stats();
        EXPECT_NE(os.str().find("misses 2"), std::string::npos) << os.str();
        cache.reset_stats();
        EXPECT_EQ(cache.stats().misses, 0u);
        EXPECT_EQ(cache.stats().memory_hits, 0u);

        cache.clear_memory();
        auto c = cache.get_compiled(src, "sm_80");
        EXPECT_EQ(cache.stats().disk_hits, 1u);
        EXPECT_EQ(c->cubin, a->cubin);
    }
    KernelCache fresh(fake_options(fake, tmp.path()));
    auto d = fresh.get_compiled(src, "sm_80");
    EXPECT_EQ(fresh.stats().disk_hits, 1u);
    EXPECT_EQ(fresh.stats().misses, 0u);
    EXPECT_EQ(fake.calls, 2);
    EXPECT_EQ(d->entry, src.entry);
}

TEST(KernelCache, ConcurrentRequestsForOneKernelCompileOnce) {
    TempDir tmp;
    FakeCompiler fake;
    fake.delay = std::chrono::milliseconds(200);
    KernelCache cache(fake_options(fake, tmp.path()));
    std::vector<std::shared_ptr<const CompiledKernel>> got(8);
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i)
        threads.emplace_back([&, i] { got[i] = cache.get_compiled(tiny_source(), "sm_80"); });
    for (auto& t : threads) t.join();
    EXPECT_EQ(fake.calls, 1);
    for (auto& g : got) EXPECT_EQ(g, got[0]);
    EXPECT_EQ(cache.stats().misses, 1u);
    EXPECT_EQ(cache.stats().memory_hits, 7u);
}

TEST(KernelCache, DifferentKernelsCompileInParallel) {
    TempDir tmp;
    FakeCompiler fake;
    fake.delay = std::chrono::milliseconds(300);
    KernelCache cache(fake_options(fake, tmp.path()));
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int salt = 0; salt < 4; ++salt)
        threads.emplace_back([&, salt] { cache.get_compiled(tiny_source(salt), "sm_80"); });
    for (auto& t : threads) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(fake.calls, 4);
    // Serialised (one global lock, or one file lock per shard) would take 1.2 s.
    EXPECT_LT(s, 1.0);
}

TEST(KernelCache, ABatchCompilesItsMissesAtOnceInOrder) {
    TempDir tmp;
    FakeCompiler fake;
    fake.delay = std::chrono::milliseconds(300);
    KernelCache cache(fake_options(fake, tmp.path()));
    std::vector<KernelCache::Request> batch;
    for (int salt = 0; salt < 4; ++salt)
        batch.push_back({"fast key " + std::to_string(salt), [salt] { return tiny_source(salt); }});
    auto start = std::chrono::steady_clock::now();
    std::vector<double> seconds;
    auto got = cache.get_compiled(batch, "sm_80", &seconds);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(s, 1.0);  // one after another: 1.2 s
    ASSERT_EQ(got.size(), 4u);
    ASSERT_EQ(seconds.size(), 4u);
    for (int salt = 0; salt < 4; ++salt) {
        EXPECT_EQ(got[salt]->name, "tiny_add_" + std::to_string(salt));
        EXPECT_GE(seconds[salt], 0.29) << salt;
    }
    CacheStats st = cache.stats();
    EXPECT_EQ(st.misses, 4u);
    EXPECT_EQ(st.memory_hits, 0u);
    // Again: memory hits by the fast keys, the same kernels, nothing compiled.
    auto again = cache.get_compiled(batch, "sm_80", &seconds);
    EXPECT_EQ(again, got);
    EXPECT_EQ(cache.stats().memory_hits, 4u);
    EXPECT_EQ(fake.calls, 4);
    for (double t : seconds) EXPECT_LT(t, 0.1);
    // The single-kernel form finds the batch's kernels under the same fast key.
    EXPECT_EQ(cache.get_compiled("fast key 2", [] { return tiny_source(2); }, "sm_80"), got[2]);
}

TEST(KernelCache, ABatchThrowsItsFirstFailureAndKeepsTheOthers) {
    TempDir tmp;
    std::atomic<int> calls{0};
    KernelCache::Options o;
    o.disk_root = tmp.path();
    o.toolchain = "fake-compiler 1";
    // Kernels 1 and 3 fail; 3 fails first, 1 after 100 ms.
    o.compile = [&calls](const codegen::KernelSource& s, const std::string& arch) {
        ++calls;
        if (s.name == "tiny_add_3") throw std::runtime_error("kernel 3");
        if (s.name == "tiny_add_1") {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            throw std::runtime_error("kernel 1");
        }
        FakeCompiler fake;
        return fake(s, arch);
    };
    KernelCache cache(o);
    std::vector<KernelCache::Request> batch;
    for (int salt = 0; salt < 4; ++salt)
        batch.push_back({"fast key " + std::to_string(salt), [salt] { return tiny_source(salt); }});
    try {
        cache.get_compiled(batch, "sm_80");
        FAIL() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "kernel 1");
    }
    EXPECT_EQ(calls, 4);
    // The kernels that compiled are cached; the failed ones are tried again.
    EXPECT_NO_THROW(cache.get_compiled("fast key 2", [] { return tiny_source(2); }, "sm_80"));
    EXPECT_EQ(calls, 4);
    EXPECT_THROW(cache.get_compiled("fast key 3", [] { return tiny_source(3); }, "sm_80"), std::runtime_error);
    EXPECT_EQ(calls, 5);
}

TEST(KernelCache, FailedCompileIsNotCachedAndIsRetried) {
    TempDir tmp;
    FakeCompiler fake;
    fake.fail_next = 1;
    KernelCache cache(fake_options(fake, tmp.path()));
    EXPECT_THROW(cache.get_compiled(tiny_source(), "sm_80"), std::runtime_error);
    EXPECT_NO_THROW(cache.get_compiled(tiny_source(), "sm_80"));
    EXPECT_EQ(fake.calls, 2);
    EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(KernelCache, CorruptDiskEntryIsRebuiltAndCountedAsMiss) {
    TempDir tmp;
    FakeCompiler fake;
    auto src = tiny_source();
    std::string path;
    {
        KernelCache cache(fake_options(fake, tmp.path()));
        cache.get_compiled(src, "sm_80");
        path = cache.disk().entry_path(cache.key_for(src, "sm_80"));
    }
    ASSERT_EQ(::truncate(path.c_str(), 100), 0);
    KernelCache cache(fake_options(fake, tmp.path()));
    auto k = cache.get_compiled(src, "sm_80");
    CacheStats s = cache.stats();
    EXPECT_EQ(s.corrupt_entries, 1u);
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.disk_hits, 0u);
    EXPECT_EQ(fake.calls, 2);
    // The rebuilt entry is whole again.
    cache.clear_memory();
    cache.get_compiled(src, "sm_80");
    EXPECT_EQ(cache.stats().disk_hits, 1u);
}

TEST(KernelCache, EntryForAnotherKernelIsTreatedAsCorrupt) {
    TempDir tmp;
    FakeCompiler fake;
    auto src = tiny_source();
    KernelCache cache(fake_options(fake, tmp.path()));
    const std::string key = cache.key_for(src, "sm_80");
    CompiledKernel wrong = fake(src, "sm_80");
    wrong.key = key;
    wrong.entry = "something_else";
    ASSERT_TRUE(const_cast<DiskCache&>(cache.disk()).store(key, wrong));
    auto k = cache.get_compiled(src, "sm_80");
    EXPECT_EQ(k->entry, "tiny_add");
    EXPECT_EQ(cache.stats().corrupt_entries, 1u);
    EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(KernelCache, UnwritableCacheDegradesToMemoryOnly) {
    TempDir tmp;
    const std::string blocker = tmp.path() + "/file";
    std::ofstream(blocker) << "x";
    FakeCompiler fake;
    KernelCache cache(fake_options(fake, blocker + "/cache"));
    ::testing::internal::CaptureStderr();
    EXPECT_NO_THROW(cache.get_compiled(tiny_source(0), "sm_80"));
    EXPECT_NO_THROW(cache.get_compiled(tiny_source(1), "sm_80"));
    EXPECT_NO_THROW(cache.get_compiled(tiny_source(0), "sm_80"));
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("memory only"), std::string::npos) << err;
    EXPECT_EQ(err.find("warning"), err.rfind("warning")) << err;
    CacheStats s = cache.stats();
    EXPECT_EQ(s.misses, 2u);
    EXPECT_EQ(s.memory_hits, 1u);
    EXPECT_EQ(s.disk_write_failures, 2u);
}

TEST(KernelCache, EnvironmentCanDisableTheDiskCache) {
    TempDir tmp;
    ScopedEnv dir("ATTNJIT_CACHE_DIR", tmp.path());
    ScopedEnv off("ATTNJIT_DISABLE_DISK_CACHE", "1");
    FakeCompiler fake;
    KernelCache::Options o;  // disk root from the environment
    o.compile = [&fake](const codegen::KernelSource& s, const std::string& a) { return fake(s, a); };
    o.toolchain = "fake";
    KernelCache cache(o);
    EXPECT_FALSE(cache.disk().enabled());
    cache.get_compiled(tiny_source(), "sm_80");
    EXPECT_TRUE(files_under(tmp.path()).empty());
    EXPECT_EQ(cache.stats().disk_write_failures, 0u);

    ScopedEnv on("ATTNJIT_DISABLE_DISK_CACHE", std::nullopt);
    KernelCache::Options o2 = o;
    o2.disk_root = DiskCache::root_from_env();
    KernelCache enabled(o2);
    enabled.get_compiled(tiny_source(), "sm_80");
    EXPECT_EQ(files_under(tmp.path()).size(), 2u);  // the entry and its toolchain index
}

// ---- no NVRTC: a warm disk cache still serves (the in-process seam; the real one, a
// child process with ATTNJIT_LIBNVRTC=/nonexistent, is in compiler_test.cpp) ---------------

// What a KernelCache gets when NVRTC cannot be loaded: the unavailable toolchain and a
// compiler that fails as compile_kernel does.
KernelCache::Options no_nvrtc_options(const std::string& root, std::atomic<int>* calls = nullptr) {
    KernelCache::Options o;
    o.disk_root = root;
    o.toolchain = kNvrtcUnavailable;
    o.compile = [calls](const codegen::KernelSource&, const std::string&) -> CompiledKernel {
        if (calls) ++*calls;
        environment_error << "libnvrtc (the CUDA runtime compiler, needed to compile kernels) could "
                             "not be loaded; dlopen said: no such file\n  Install the CUDA toolkit's "
                             "NVRTC (12.x or 13.x), or set ATTNJIT_LIBNVRTC to the full path of libnvrtc.so.";
        return {};
    };
    return o;
}

TEST(KernelCache, WithoutNvrtcServesTheEntryTheLastCompilerWrote) {
    TempDir tmp;
    FakeCompiler fake;
    auto src = tiny_source(3);
    std::shared_ptr<const CompiledKernel> compiled;
    {
        KernelCache warm(fake_options(fake, tmp.path()));
        compiled = warm.get_compiled(src, "sm_80");
        EXPECT_EQ(warm.disk().load_toolchain(toolchain_index_key(src, "sm_80")), "fake-compiler 1");
    }
    std::atomic<int> calls{0};
    KernelCache cold(no_nvrtc_options(tmp.path(), &calls));
    auto k = cold.get_compiled(src, "sm_80");
    EXPECT_EQ(k->cubin, compiled->cubin);
    EXPECT_EQ(k->key, compiled->key) << "the entry of the compiler that built it";
    EXPECT_EQ(cold.stats().disk_hits, 1u);
    EXPECT_EQ(cold.stats().misses, 0u);
    EXPECT_EQ(calls, 0);
    cold.get_compiled(src, "sm_80");
    EXPECT_EQ(cold.stats().memory_hits, 1u);
    // Another arch of the same source was never compiled: a miss, explained.
    std::string msg = testing::environment_error_of([&] { cold.get_compiled(src, "sm_90a"); });
    EXPECT_NE(msg.find("cannot get kernel tiny_add_3 for sm_90a: it is not in a kernel bundle (none is loaded or linked) nor in the kernel cache (" +
                       cold.disk().directory() + " has no entry for it), and compiling it needs NVRTC"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("set ATTNJIT_LIBNVRTC"), std::string::npos) << msg;
    EXPECT_EQ(calls, 1);
}

TEST(KernelCache, WithoutNvrtcNoCompilerEverServesAStaleCubin) {
    TempDir tmp;
    FakeCompiler fake;
    auto src = tiny_source(4);
    KernelCache v1(fake_options(fake, tmp.path()));
    auto old_kernel = v1.get_compiled(src, "sm_80");

    // Another compiler build never sees the first one's entry: it compiles its own.
    FakeCompiler fake2;
    auto o2 = fake_options(fake2, tmp.path());
    o2.toolchain = "fake-compiler 2";
    KernelCache v2(o2);
    auto new_kernel = v2.get_compiled(src, "sm_80");
    EXPECT_EQ(fake2.calls, 1);
    EXPECT_EQ(v2.stats().disk_hits, 0u);
    EXPECT_NE(new_kernel->key, old_kernel->key);

    // Without a compiler: the last one's entry.
    KernelCache cold(no_nvrtc_options(tmp.path()));
    EXPECT_EQ(cold.get_compiled(src, "sm_80")->key, new_kernel->key);

    // A disk hit by the first compiler points the index back at its entry.
    KernelCache v1_again(fake_options(fake, tmp.path()));
    v1_again.get_compiled(src, "sm_80");
    EXPECT_EQ(v1_again.stats().disk_hits, 1u);
    KernelCache cold2(no_nvrtc_options(tmp.path()));
    EXPECT_EQ(cold2.get_compiled(src, "sm_80")->key, old_kernel->key);
}

TEST(KernelCache, WithoutNvrtcADamagedIndexIsAMissNeverAnotherKernel) {
    TempDir tmp;
    FakeCompiler fake;
    auto a = tiny_source(5), b = tiny_source(6);
    {
        KernelCache warm(fake_options(fake, tmp.path()));
        warm.get_compiled(a, "sm_80");
        warm.get_compiled(b, "sm_80");
    }
    DiskCache disk(tmp.path());
    const std::string index_a = toolchain_index_key(a, "sm_80");
    // Garbage, the unavailable toolchain itself, or an id nothing compiled a with: a miss.
    for (const std::string& planted : {std::string("garbage\n"), std::string(kNvrtcUnavailable),
                                       std::string("fake-compiler 9")}) {
        ASSERT_TRUE(disk.store_toolchain(index_a, planted));
        KernelCache cold(no_nvrtc_options(tmp.path()));
        std::string msg = testing::environment_error_of([&] { cold.get_compiled(a, "sm_80"); });
        EXPECT_NE(msg.find("nor in the kernel cache"), std::string::npos) << planted << ": " << msg;
        EXPECT_EQ(cold.stats().disk_hits, 0u);
        EXPECT_NE(cold.get_compiled(b, "sm_80"), nullptr) << "b's index is untouched";
    }
    // A link or an oversized file is not read.
    const std::string path = disk.toolchain_index_path(index_a);
    ::unlink(path.c_str());
    ASSERT_EQ(::symlink(disk.toolchain_index_path(toolchain_index_key(b, "sm_80")).c_str(), path.c_str()), 0);
    EXPECT_FALSE(disk.load_toolchain(index_a));
    ::unlink(path.c_str());
    std::ofstream(path) << std::string(DiskCache::kMaxToolchainIdBytes + 1, 'x');
    EXPECT_FALSE(disk.load_toolchain(index_a));
    // The toolchain index and entry keys never coincide.
    EXPECT_NE(index_a, kernel_key(a, "sm_80", "fake-compiler 1"));
    EXPECT_NE(index_a, kernel_key(a, "sm_80", ""));
}

TEST(KernelCache, WithoutNvrtcOrDiskCacheTheMissSaysSo) {
    KernelCache cold(no_nvrtc_options(""));
    std::string msg = testing::environment_error_of([&] { cold.get_compiled(tiny_source(), "sm_80"); });
    EXPECT_NE(msg.find("nor in the kernel cache (the disk cache is disabled)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ATTNJIT_LIBNVRTC"), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind("attnjit: ", 0), 0u) << msg;
    EXPECT_EQ(msg.find("attnjit: ", 1), std::string::npos) << "one prefix: " << msg;
}

TEST(KernelCache, FastPathSkipsSourceGenerationOnHits) {
    FakeCompiler fake;
    KernelCache cache(fake_options(fake, ""));
    int generated = 0;
    auto make = [&] {
        ++generated;
        return tiny_source();
    };
    const std::string fast_key = "spec:0123456789abcdef tile:128x64x4x2";
    auto first = cache.get_compiled(fast_key, make, "sm_80");
    constexpr int kCalls = 20000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) EXPECT_EQ(cache.get_compiled(fast_key, make, "sm_80"), first);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() / kCalls;
    EXPECT_EQ(generated, 1);
    EXPECT_LT(us, 50.0);
    RecordProperty("fast_path_us", std::to_string(us));
    // The arch is part of the fast key.
    cache.get_compiled(fast_key, make, "sm_90a");
    EXPECT_EQ(generated, 2);
    EXPECT_EQ(cache.stats().misses, 2u);
}

TEST(KernelKey, CoversSourceArchAndToolchain) {
    auto src = tiny_source();
    const std::string k = kernel_key(src, "sm_80", "nvrtc 13.0");
    EXPECT_EQ(k.size(), 64u);
    EXPECT_EQ(k, kernel_key(tiny_source(), "sm_80", "nvrtc 13.0")) << "deterministic";
    EXPECT_NE(k, kernel_key(src, "sm_90a", "nvrtc 13.0"));
    EXPECT_NE(k, kernel_key(src, "sm_80", "nvrtc 12.8"));
    EXPECT_NE(k, kernel_key(tiny_source(1), "sm_80", "nvrtc 13.0"));
    auto opts = src;
    opts.options.push_back("-DX=1");
    EXPECT_NE(k, kernel_key(opts, "sm_80", "nvrtc 13.0"));
    auto smem = src;
    smem.smem_bytes = 1024;
    EXPECT_NE(k, kernel_key(smem, "sm_80", "nvrtc 13.0"));
}

// ATTNJIT_LINEINFO=1 compiles with -lineinfo; a kernel cached without it is not reused.
TEST(KernelKey, LineInfoIsACompileOptionOfItsOwnKey) {
    ScopedEnv off("ATTNJIT_LINEINFO", std::nullopt);  // whatever the test's environment holds
    const std::string plain = kernel_key(tiny_source(), "sm_90a", "nvrtc 13.0");
    const auto without = base_compile_options("sm_90a");
    EXPECT_EQ(std::count(without.begin(), without.end(), "-lineinfo"), 0);
    ScopedEnv on("ATTNJIT_LINEINFO", "1");
    const auto with = base_compile_options("sm_90a");
    EXPECT_EQ(std::count(with.begin(), with.end(), "-lineinfo"), 1);
    EXPECT_NE(plain, kernel_key(tiny_source(), "sm_90a", "nvrtc 13.0"));
}

}  // namespace
}  // namespace attnjit::runtime
