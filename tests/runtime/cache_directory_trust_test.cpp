// Whose directory the disk cache trusts: only one owned by this user and writable by
// nobody else. Anything else is refused with one warning and the cache is memory-only,
// so an entry another account planted is never loaded. Works as root (CI runs as root):
// mode checks apply to root too, and the ownership test chowns to nobody (65534).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/disk_cache.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"
#include "support/env.h"

namespace attnjit::runtime {
namespace {

using testing::FakeCompiler;
using testing::files_under;
using testing::ScopedEnv;
using testing::TempDir;
using testing::tiny_source;

const std::string kKey = "ef" + std::string(62, '2');

CompiledKernel entry(const std::string& cubin) {
    CompiledKernel k;
    k.key = kKey;
    k.cubin = cubin;
    return k;
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// A cache over `root` is refused: the entry there is not loaded (nor removed), nothing
// is written, no lock is taken, and stderr gets one warning that says why and what to do.
void expect_refused(const std::string& root, const std::string& why) {
    const std::string planted = DiskCache(root).entry_path(kKey);
    ASSERT_EQ(::access(planted.c_str(), F_OK), 0) << "the test should have planted an entry";
    DiskCache cache(root);
    ::testing::internal::CaptureStderr();
    auto found = cache.load(kKey);
    EXPECT_FALSE(cache.store(kKey, entry("mine")));
    EXPECT_FALSE(cache.lock(kKey).held());
    EXPECT_FALSE(cache.load(kKey).kernel);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(found.kernel) << "loaded an entry from an untrusted directory";
    EXPECT_FALSE(found.corrupt);
    EXPECT_FALSE(cache.writable());
    EXPECT_EQ(::access(planted.c_str(), F_OK), 0) << "refused directories are left alone";
    EXPECT_EQ(count(err, "warning"), 1u) << err;
    EXPECT_NE(err.find(why), std::string::npos) << err;
    EXPECT_NE(err.find("memory only"), std::string::npos) << err;
    EXPECT_NE(err.find("ATTNJIT_CACHE_DIR"), std::string::npos) << err;
}

TEST(CacheDirectoryTrust, WorldWritableRootIsRefused) {
    TempDir tmp;
    const std::string root = tmp.path() + "/cache";
    ASSERT_TRUE(DiskCache(root).store(kKey, entry("planted")));
    ASSERT_EQ(::chmod(root.c_str(), 0777), 0);
    expect_refused(root, "writable by every user (mode 0777)");
}

TEST(CacheDirectoryTrust, GroupWritableVersionDirectoryIsRefused) {
    TempDir tmp;
    ASSERT_TRUE(DiskCache(tmp.path()).store(kKey, entry("planted")));
    ASSERT_EQ(::chmod(DiskCache(tmp.path()).directory().c_str(), 0770), 0);
    expect_refused(tmp.path(), "writable by its group");
}

TEST(CacheDirectoryTrust, WritableShardDirectoryIsRefused) {
    TempDir tmp;
    ASSERT_TRUE(DiskCache(tmp.path()).store(kKey, entry("planted")));
    const std::string shard = DiskCache(tmp.path()).directory() + "/kernels/ef";
    ASSERT_EQ(::chmod(shard.c_str(), 0757), 0);
    expect_refused(tmp.path(), "writable by every user");
}

TEST(CacheDirectoryTrust, RootOwnedByAnotherUserIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
    TempDir tmp;
    const std::string root = tmp.path() + "/cache";
    ASSERT_TRUE(DiskCache(root).store(kKey, entry("planted")));
    ASSERT_EQ(::chown(root.c_str(), 65534, 65534), 0);
    expect_refused(root, "owned by uid 65534, not by you (uid 0)");
}

// The version directory is made by attnjit: a link there redirects every entry.
TEST(CacheDirectoryTrust, LinkedVersionDirectoryIsRefused) {
    TempDir tmp;
    const std::string elsewhere = tmp.path() + "/elsewhere";
    ASSERT_TRUE(DiskCache(elsewhere).store(kKey, entry("planted")));
    const std::string root = tmp.path() + "/cache";
    ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
    ASSERT_EQ(::symlink(DiskCache(elsewhere).directory().c_str(),
                        DiskCache(root).directory().c_str()),
              0);
    expect_refused(root, "is a symbolic link");
}

// The root itself may be a link (~/.cache on another disk) to a private directory.
TEST(CacheDirectoryTrust, LinkedRootToAPrivateDirectoryIsUsed) {
    TempDir tmp;
    const std::string real = tmp.path() + "/real";
    ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
    const std::string root = tmp.path() + "/cache";
    ASSERT_EQ(::symlink(real.c_str(), root.c_str()), 0);
    DiskCache cache(root);
    ASSERT_TRUE(cache.store(kKey, entry("mine")));
    EXPECT_TRUE(cache.load(kKey).kernel);
}

TEST(CacheDirectoryTrust, DirectoriesItCreatesArePrivate) {
    TempDir tmp;
    const std::string root = tmp.path() + "/a/b/cache";
    DiskCache cache(root);
    ASSERT_TRUE(cache.store(kKey, entry("mine")));
    for (const std::string& d : {tmp.path() + "/a", root, cache.directory(),
                                 cache.directory() + "/kernels", cache.directory() + "/kernels/ef"}) {
        struct stat st {};
        ASSERT_EQ(::stat(d.c_str(), &st), 0) << d;
        EXPECT_EQ(st.st_mode & 0777, 0700u) << d;
    }
}

// Another account plants an entry for a real key in a shared, world-writable cache:
// the kernel cache compiles its own and warns once.
TEST(CacheDirectoryTrust, KernelCacheIgnoresEntriesInAWorldWritableRoot) {
    TempDir tmp;
    const std::string root = tmp.path() + "/cache";
    FakeCompiler fake;
    KernelCache::Options o;
    o.disk_root = root;
    o.compile = [&fake](const codegen::KernelSource& s, const std::string& a) { return fake(s, a); };
    o.toolchain = "fake";
    const auto src = tiny_source();
    {
        KernelCache planter(o);
        const std::string key = planter.key_for(src, "sm_80");
        CompiledKernel planted = fake(src, "sm_80");
        planted.key = key;
        planted.cubin = testing::fake_cubin("planted by someone else");
        ASSERT_TRUE(const_cast<DiskCache&>(planter.disk()).store(key, planted));
    }
    ASSERT_EQ(::chmod(root.c_str(), 0777), 0);
    KernelCache cache(o);
    ::testing::internal::CaptureStderr();
    auto k = cache.get_compiled(src, "sm_80");
    cache.get_compiled(tiny_source(1), "sm_80");
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(k->cubin, fake(src, "sm_80").cubin) << "ran a planted kernel";
    EXPECT_EQ(cache.stats().disk_hits, 0u);
    EXPECT_EQ(cache.stats().misses, 2u);
    EXPECT_EQ(count(err, "warning"), 1u) << err;
}

// With neither XDG_CACHE_HOME nor HOME the root is still per user, never a name every
// user shares.
TEST(CacheDirectoryTrust, FallbackRootIsPerUser) {
    ScopedEnv dir("ATTNJIT_CACHE_DIR", std::nullopt);
    ScopedEnv home("HOME", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    EXPECT_EQ(env::cache_dir(), "/tmp/attnjit-cache-" + std::to_string(::geteuid()));
    ScopedEnv relative("XDG_CACHE_HOME", "relative/cache");
    EXPECT_EQ(env::cache_dir(), "/tmp/attnjit-cache-" + std::to_string(::geteuid()))
        << "the XDG spec says to ignore a relative XDG_CACHE_HOME";
    ScopedEnv h("HOME", "/home/someone");
    EXPECT_EQ(env::cache_dir(), "/home/someone/.cache/attnjit");
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(env::cache_dir(), "/xdg/attnjit");
}

}  // namespace
}  // namespace attnjit::runtime
