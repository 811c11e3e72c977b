// What the disk cache does with an entry path that holds something it did not write:
// another kernel's valid entry (copied or linked), a forged entry with a consistent
// checksum, a FIFO, a link to /dev/zero, a sparse 2 GB file. Each must be treated as
// corrupt (removed, rebuilt), never loaded, never waited on, never read whole. The
// reads run in a child process with a deadline and a memory cap, so a regression
// fails the test instead of hanging CI or exhausting the machine.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/disk_cache.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::fake_options;
using testing::FakeCompiler;
using testing::run_in_child;
using testing::TempDir;
using testing::tiny_source;
using namespace std::chrono_literals;

constexpr size_t kChildMemory = size_t(512) << 20;
constexpr auto kChildTimeout = 20s;

// Writes the entries of both kernels into `root`; returns their entry paths.
std::pair<std::string, std::string> write_entries(const std::string& root,
                                                  const codegen::KernelSource& a,
                                                  const codegen::KernelSource& b) {
    FakeCompiler fake;
    KernelCache cache(fake_options(fake, root));
    cache.get_compiled(a, "sm_80");
    cache.get_compiled(b, "sm_80");
    return {cache.disk().entry_path(cache.key_for(a, "sm_80")),
            cache.disk().entry_path(cache.key_for(b, "sm_80"))};
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Every attention kernel has the same symbol, so the plain kernel's entry passes a
// symbol/arch check on the causal kernel's key: it must be rebuilt, never run.
TEST(PlantedEntries, AnotherKernelsEntryCopiedOrLinkedOntoAKeyIsRebuilt) {
    const auto causal = tiny_source(1), plain = tiny_source(0);
    ASSERT_EQ(causal.entry, plain.entry);
    for (bool link : {false, true}) {
        SCOPED_TRACE(link ? "symbolic link" : "copy");
        TempDir tmp;
        auto [causal_path, plain_path] = write_entries(tmp.path(), causal, plain);
        ASSERT_EQ(::unlink(causal_path.c_str()), 0);
        if (link) ASSERT_EQ(::symlink(plain_path.c_str(), causal_path.c_str()), 0);
        else std::filesystem::copy_file(plain_path, causal_path);

        FakeCompiler fake;
        KernelCache cache(fake_options(fake, tmp.path()));
        auto k = cache.get_compiled(causal, "sm_80");
        EXPECT_EQ(k->cubin, fake(causal, "sm_80").cubin) << "ran another kernel's cubin";
        EXPECT_EQ(cache.stats().disk_hits, 0u);
        EXPECT_EQ(cache.stats().corrupt_entries, 1u);
        EXPECT_EQ(cache.stats().misses, 1u);
        // The rebuilt entry is the causal kernel's own, and the plain one is untouched.
        KernelCache fresh(fake_options(fake, tmp.path()));
        EXPECT_EQ(fresh.get_compiled(causal, "sm_80")->cubin, k->cubin);
        EXPECT_EQ(fresh.get_compiled(plain, "sm_80")->cubin, fake(plain, "sm_80").cubin);
        EXPECT_EQ(fresh.stats().disk_hits, 2u);
    }
}

// A forged entry: garbage where the cubin goes and a checksum computed to match.
TEST(PlantedEntries, ForgedEntryWithAConsistentChecksumIsRebuilt) {
    const auto src = tiny_source();
    FakeCompiler fake;
    for (bool with_key : {false, true}) {
        SCOPED_TRACE(with_key ? "records the right key" : "records no key");
        TempDir tmp;
        KernelCache cache(fake_options(fake, tmp.path()));
        const std::string key = cache.key_for(src, "sm_80");
        CompiledKernel forged = fake(src, "sm_80");
        forged.cubin = "garbage, not a cubin";
        if (with_key) forged.key = key;
        const std::string path = cache.disk().entry_path(key);
        std::filesystem::create_directories(path.substr(0, path.rfind('/')));
        write_file(path, serialize(forged));

        auto k = cache.get_compiled(src, "sm_80");
        EXPECT_EQ(k->cubin, fake(src, "sm_80").cubin);
        EXPECT_EQ(cache.stats().disk_hits, 0u);
        EXPECT_EQ(cache.stats().corrupt_entries, 1u);
        EXPECT_EQ(cache.stats().misses, 1u);
    }
}

// The entry path of kKey in a cache under `root`, its directories made.
const std::string kKey = "cd" + std::string(62, '1');
std::string prepared_entry_path(const std::string& root) {
    DiskCache cache(root);
    CompiledKernel k;
    k.key = kKey;
    EXPECT_TRUE(cache.store(kKey, k));
    const std::string path = cache.entry_path(kKey);
    ::unlink(path.c_str());
    return path;
}

// Loads kKey in a bounded child: 0 when it was reported corrupt, not loaded, and the
// thing at the path was removed so the next store can succeed.
int load_rejects_and_removes(const std::string& root, const std::string& path) {
    DiskCache cache(root);
    auto found = cache.load(kKey);
    if (found.kernel) return 1;
    if (!found.corrupt) return 2;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) return 3;
    CompiledKernel k;
    k.key = kKey;
    if (!cache.store(kKey, k) || !cache.load(kKey).kernel) return 4;
    return 0;
}

// open() of a FIFO with no writer blocks forever.
TEST(PlantedEntries, FifoAtTheEntryPathDoesNotBlock) {
    TempDir tmp;
    const std::string path = prepared_entry_path(tmp.path());
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(run_in_child([&] { return load_rejects_and_removes(tmp.path(), path); },
                           kChildTimeout, kChildMemory),
              0)
        << "nullopt: the load blocked or crashed";
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// /dev/zero never ends: following the link reads until memory runs out.
TEST(PlantedEntries, LinkToDevZeroIsNotFollowed) {
    TempDir tmp;
    const std::string path = prepared_entry_path(tmp.path());
    ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
    EXPECT_EQ(run_in_child([&] { return load_rejects_and_removes(tmp.path(), path); },
                           kChildTimeout, kChildMemory),
              0)
        << "255: the load threw (out of memory?); nullopt: it was killed";
}

// The same through the kernel cache: the compile succeeds and the entry is replaced,
// so later compiles do not fail too.
TEST(PlantedEntries, LinkToDevZeroDoesNotBreakLaterCompiles) {
    TempDir tmp;
    const auto src = tiny_source();
    auto result = run_in_child(
        [&] {
            FakeCompiler fake;
            std::string path;
            {
                KernelCache cache(fake_options(fake, tmp.path()));
                path = cache.disk().entry_path(cache.key_for(src, "sm_80"));
                std::filesystem::create_directories(path.substr(0, path.rfind('/')));
                if (::symlink("/dev/zero", path.c_str()) != 0) return 1;
                cache.get_compiled(src, "sm_80");
                if (cache.stats().corrupt_entries != 1) return 2;
            }
            KernelCache later(fake_options(fake, tmp.path()));
            later.get_compiled(src, "sm_80");
            return later.stats().disk_hits == 1 ? 0 : 3;
        },
        kChildTimeout, kChildMemory);
    EXPECT_EQ(result, 0) << "255: a compile threw (out of memory?); nullopt: killed";
}

// Sparse files cost no disk, but a reader that trusts them allocates their size. Three
// shapes: 2 GB with no header, a real entry grown to 2 GB, and a real entry grown to
// 200 MB (under the size cap, so only its header's stated size tells it is wrong).
TEST(PlantedEntries, SparseFilesAreRejectedUnread) {
    const off_t sizes[] = {off_t(2) << 30, off_t(2) << 30, off_t(200) << 20};
    for (int shape = 0; shape < 3; ++shape) {
        SCOPED_TRACE(shape);
        TempDir tmp;
        const std::string path = prepared_entry_path(tmp.path());
        CompiledKernel k;
        k.key = kKey;
        write_file(path, shape == 0 ? std::string() : serialize(k));
        ASSERT_EQ(::truncate(path.c_str(), sizes[shape]), 0);
        auto start = std::chrono::steady_clock::now();
        EXPECT_EQ(run_in_child([&] { return load_rejects_and_removes(tmp.path(), path); },
                               kChildTimeout, kChildMemory),
                  0)
            << "255: the load threw (read it whole?); nullopt: killed";
        EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "read before rejecting";
    }
}

}  // namespace
}  // namespace attnjit::runtime
