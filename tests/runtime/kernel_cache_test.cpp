// KernelCache with a fake compiler: counters, single flight, disk hits across cache
// instances, rebuilt corrupt entries, read-only degradation, the env switch, the fast
// path, and keys.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

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
    EXPECT_EQ(files_under(tmp.path()).size(), 1u);
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

}  // namespace
}  // namespace attnjit::runtime
