// Several processes compile-or-load the same kernel into one fresh cache directory at
// the same moment. Each must get a valid cubin, all identical; the cache ends with one
// whole entry and no temporary or lock files; the file lock means one process compiles.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"
#include "support/sha256.h"

namespace attnjit::runtime {
namespace {

using testing::files_under;
using testing::TempDir;
using testing::tiny_source;

// Runs in the child; never returns.
[[noreturn]] void child(int barrier_fd, const std::string& cache_root, const std::string& result) {
    char c;
    while (::read(barrier_fd, &c, 1) > 0) {
    }  // EOF: the parent has started everyone
    int code = 0;
    std::ofstream out(result);
    try {
        KernelCache cache(KernelCache::Options::with_disk_root(cache_root));
        auto k = cache.get_compiled(tiny_source(42), "sm_80");
        CacheStats s = cache.stats();
        out << sha256_hex(k->cubin) << " " << k->cubin.compare(0, 4, "\x7f" "ELF") << " "
            << s.misses << " " << s.disk_hits << "\n";
    } catch (const std::exception& e) {
        out << "error " << e.what() << "\n";
        code = 1;
    }
    out.close();
    ::_exit(code);
}

TEST(ConcurrentProcesses, ShareOneCacheDirectorySafely) {
    if (auto why = why_no_libnvrtc()) GTEST_SKIP() << *why;
    TempDir tmp;
    const std::string cache_root = tmp.path() + "/cache";
    constexpr int kProcesses = 6;
    int barrier[2];
    ASSERT_EQ(::pipe(barrier), 0);
    std::vector<pid_t> pids;
    for (int i = 0; i < kProcesses; ++i) {
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::close(barrier[1]);
            child(barrier[0], cache_root, tmp.path() + "/result." + std::to_string(i));
        }
        pids.push_back(pid);
    }
    ::close(barrier[0]);
    ::close(barrier[1]);  // go
    for (pid_t pid : pids) {
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed";
    }

    std::set<std::string> hashes;
    uint64_t total_misses = 0, total_disk_hits = 0;
    for (int i = 0; i < kProcesses; ++i) {
        std::ifstream in(tmp.path() + "/result." + std::to_string(i));
        std::string hash;
        int elf_cmp = -1;
        uint64_t misses = 0, disk_hits = 0;
        in >> hash >> elf_cmp >> misses >> disk_hits;
        ASSERT_NE(hash, "error") << in.rdbuf();
        EXPECT_EQ(elf_cmp, 0) << "process " << i << " got something that is not a cubin";
        hashes.insert(hash);
        total_misses += misses;
        total_disk_hits += disk_hits;
    }
    EXPECT_EQ(hashes.size(), 1u) << "processes got different cubins";
    EXPECT_EQ(total_misses + total_disk_hits, uint64_t(kProcesses));
    EXPECT_EQ(total_misses, 1u) << "the file lock should let exactly one process compile";

    auto files = files_under(cache_root);
    std::sort(files.begin(), files.end(), [](const std::string& x, const std::string& y) {
        return x.substr(x.rfind('.')) < y.substr(y.rfind('.'));
    });
    ASSERT_EQ(files.size(), 2u) << "temporary or lock files left: " << ::testing::PrintToString(files);
    EXPECT_NE(files[0].find(".kernel"), std::string::npos);
    EXPECT_NE(files[1].find(".toolchain"), std::string::npos) << "the toolchain index (disk_cache.h)";

    // And the entry they left is whole and the same kernel.
    KernelCache cache(KernelCache::Options::with_disk_root(cache_root));
    auto k = cache.get_compiled(tiny_source(42), "sm_80");
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(sha256_hex(k->cubin), *hashes.begin());
}

}  // namespace
}  // namespace attnjit::runtime
