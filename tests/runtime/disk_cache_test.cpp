// DiskCache: layout, atomic writes under concurrency, corrupt entries, unwritable
// directories, and the environment switch. No NVRTC needed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "runtime/disk_cache.h"
#include "runtime/file_lock.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::files_under;
using testing::ScopedEnv;
using testing::TempDir;

const std::string kKey = "ab" + std::string(62, '0');

CompiledKernel kernel_with(size_t cubin_bytes, char fill) {
    CompiledKernel k;
    k.key = kKey;
    k.name = "k";
    k.entry = "entry";
    k.arch = "sm_80";
    k.cubin.assign(cubin_bytes, fill);
    return k;
}

bool has_temp_files(const std::string& dir) {
    for (const auto& f : files_under(dir))
        if (f.find(".tmp.") != std::string::npos || f.find(".lock") != std::string::npos) return true;
    return false;
}

TEST(DiskCache, StoresUnderVersionedContentAddressedPath) {
    TempDir tmp;
    DiskCache cache(tmp.path());
    EXPECT_EQ(cache.directory(), tmp.path() + "/v" + std::to_string(kCompiledKernelFormatVersion));
    EXPECT_EQ(cache.entry_path(kKey), cache.directory() + "/kernels/ab/" + kKey + ".kernel");
    EXPECT_FALSE(cache.load(kKey).kernel);
    ASSERT_TRUE(cache.store(kKey, kernel_with(100, 'x')));
    auto found = cache.load(kKey);
    ASSERT_TRUE(found.kernel);
    EXPECT_FALSE(found.corrupt);
    EXPECT_EQ(found.kernel->cubin, std::string(100, 'x'));
    EXPECT_EQ(files_under(tmp.path()),
              std::vector<std::string>{"v" + std::to_string(kCompiledKernelFormatVersion) +
                                       "/kernels/ab/" + kKey + ".kernel"});
}

// Writers keep replacing one entry with large, different, valid contents while readers
// read it: a reader must only ever see a miss or one whole entry, never a partial file.
TEST(DiskCache, ConcurrentWritesAreAtomicForReaders) {
    TempDir tmp;
    DiskCache cache(tmp.path());
    std::atomic<bool> stop{false};
    std::atomic<int> corrupt{0}, hits{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < 3; ++w)
        threads.emplace_back([&, w] {
            for (int i = 0; i < 20; ++i)
                EXPECT_TRUE(cache.store(kKey, kernel_with(2 << 20, char('a' + w))));
        });
    for (int r = 0; r < 2; ++r)
        threads.emplace_back([&] {
            while (!stop) {
                auto found = cache.load(kKey);
                if (found.corrupt) ++corrupt;
                if (found.kernel) {
                    ++hits;
                    const auto& c = found.kernel->cubin;
                    EXPECT_EQ(c.size(), size_t(2 << 20));
                    EXPECT_EQ(c.find_first_not_of(c[0]), std::string::npos) << "mixed writers";
                }
            }
        });
    for (int i = 0; i < 3; ++i) threads[i].join();
    stop = true;
    for (size_t i = 3; i < threads.size(); ++i) threads[i].join();
    EXPECT_EQ(corrupt, 0);
    EXPECT_GT(hits, 0);
    EXPECT_FALSE(has_temp_files(tmp.path()));
}

TEST(DiskCache, CorruptOrTruncatedEntryIsReportedAndRemoved) {
    TempDir tmp;
    DiskCache cache(tmp.path());
    ASSERT_TRUE(cache.store(kKey, kernel_with(1000, 'x')));
    const std::string path = cache.entry_path(kKey);
    ASSERT_EQ(::truncate(path.c_str(), 500), 0);
    auto found = cache.load(kKey);
    EXPECT_FALSE(found.kernel);
    EXPECT_TRUE(found.corrupt);
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "corrupt entry should be deleted";

    std::ofstream(path, std::ios::binary) << "garbage that is long enough to have a header.........."
                                             "..................................................";
    found = cache.load(kKey);
    EXPECT_TRUE(found.corrupt);
    EXPECT_FALSE(found.kernel);
    // And it can be written again.
    EXPECT_TRUE(cache.store(kKey, kernel_with(10, 'y')));
    EXPECT_TRUE(cache.load(kKey).kernel);
}

// The cache directory cannot be created (its parent is a file): one warning, no throw,
// and the cache stops writing.
TEST(DiskCache, UnwritableDirectoryWarnsOnceAndStopsWriting) {
    TempDir tmp;
    const std::string blocker = tmp.path() + "/not-a-dir";
    std::ofstream(blocker) << "x";
    DiskCache cache(blocker + "/cache");
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.store(kKey, kernel_with(10, 'x')));
    EXPECT_FALSE(cache.store(kKey, kernel_with(10, 'x')));
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning"), std::string::npos) << err;
    EXPECT_NE(err.find("memory only"), std::string::npos) << err;
    EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once: " << err;
    EXPECT_FALSE(cache.writable());
    EXPECT_FALSE(cache.load(kKey).kernel);
    EXPECT_FALSE(cache.lock(kKey).held());
}

TEST(DiskCache, ReadOnlyDirectoryWarnsAndStillReads) {
    if (::geteuid() == 0) GTEST_SKIP() << "running as root: permissions do not stop writes";
    TempDir tmp;
    {
        DiskCache writer(tmp.path());
        ASSERT_TRUE(writer.store(kKey, kernel_with(10, 'x')));
    }
    const std::string shard = DiskCache(tmp.path()).directory() + "/kernels/ab";
    ::chmod(shard.c_str(), 0555);
    DiskCache cache(tmp.path());
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(cache.store(kKey, kernel_with(10, 'y')));
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("warning"), std::string::npos) << err;
    EXPECT_TRUE(cache.load(kKey).kernel) << "existing entries stay readable";
    ::chmod(shard.c_str(), 0755);
}

TEST(DiskCache, EmptyRootDisablesIt) {
    DiskCache cache("");
    EXPECT_FALSE(cache.enabled());
    EXPECT_FALSE(cache.writable());
    EXPECT_FALSE(cache.store(kKey, kernel_with(10, 'x')));
    EXPECT_FALSE(cache.load(kKey).kernel);
}

TEST(DiskCache, RootComesFromTheEnvironment) {
    ScopedEnv dir("ATTNJIT_CACHE_DIR", "/some/where");
    {
        ScopedEnv off("ATTNJIT_DISABLE_DISK_CACHE", std::nullopt);
        EXPECT_EQ(DiskCache::root_from_env(), "/some/where");
    }
    {
        ScopedEnv off("ATTNJIT_DISABLE_DISK_CACHE", "1");
        EXPECT_EQ(DiskCache::root_from_env(), "");
    }
    {
        ScopedEnv off("ATTNJIT_DISABLE_DISK_CACHE", "0");
        EXPECT_EQ(DiskCache::root_from_env(), "/some/where");
    }
}

TEST(FileLock, ExcludesOtherHoldersAndLeavesNoFile) {
    TempDir tmp;
    const std::string path = tmp.path() + "/x.lock";
    int inside = 0, max_inside = 0;
    std::mutex mu;  // only protects the counters' reads/writes for TSan-cleanliness
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 25; ++i) {
                FileLock lock = FileLock::acquire(path, std::chrono::seconds(30));
                ASSERT_TRUE(lock.held());
                {
                    std::lock_guard<std::mutex> g(mu);
                    max_inside = std::max(max_inside, ++inside);
                }
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                std::lock_guard<std::mutex> g(mu);
                --inside;
            }
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(max_inside, 1);
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "lock file left behind";
}

}  // namespace
}  // namespace attnjit::runtime
