// The per-key lock file: a link planted at its name is never followed (O_CREAT through
// a link creates any file the process may create), and a holder that is stopped or hung
// delays others only for the lock timeout. The holder is a forked child that takes the
// lock and stops itself; every wait is bounded, and a watchdog kills the holder if the
// waiter does not come back, so a regression fails instead of hanging CI.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "runtime/disk_cache.h"
#include "runtime/file_lock.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"

namespace attnjit::runtime {
namespace {

using testing::FakeCompiler;
using testing::files_under;
using testing::TempDir;
using testing::tiny_source;
using namespace std::chrono_literals;

// Locks time out quickly here.
KernelCache::Options quick_lock_options(FakeCompiler& fake, const std::string& root) {
    KernelCache::Options o = testing::fake_options(fake, root);
    o.lock_timeout = 300ms;
    return o;
}

std::string lock_path_of(KernelCache& cache, const codegen::KernelSource& src) {
    const std::string path = cache.disk().entry_path(cache.key_for(src, "sm_80")) + ".lock";
    std::filesystem::create_directories(path.substr(0, path.rfind('/')));
    return path;
}

TEST(CacheLock, LinkAtTheLockPathIsNotFollowed) {
    TempDir tmp;
    const std::string victim = tmp.path() + "/created-through-the-link";
    FakeCompiler fake;
    const auto src = tiny_source();
    KernelCache cache(quick_lock_options(fake, tmp.path() + "/cache"));
    const std::string lock = lock_path_of(cache, src);
    ASSERT_EQ(::symlink(victim.c_str(), lock.c_str()), 0);

    EXPECT_FALSE(cache.disk().lock(cache.key_for(src, "sm_80")).held());
    EXPECT_NE(::access(victim.c_str(), F_OK), 0) << "the lock created a file through a link";
    // Without the lock the kernel is still compiled and cached.
    auto k = cache.get_compiled(src, "sm_80");
    EXPECT_NE(::access(victim.c_str(), F_OK), 0) << "the lock created a file through a link";
    EXPECT_EQ(k->cubin, fake(src, "sm_80").cubin);
    EXPECT_EQ(::access(cache.disk().entry_path(cache.key_for(src, "sm_80")).c_str(), F_OK), 0);
}

TEST(CacheLock, FifoAtTheLockPathIsNotALock) {
    TempDir tmp;
    const std::string path = tmp.path() + "/x.lock";
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    auto result = testing::run_in_child(
        [&] { return FileLock::acquire(path, 30s).held() ? 1 : 0; }, 20s);
    EXPECT_EQ(result, 0) << "1: a FIFO was taken as a lock; nullopt: blocked";
}

// A child that holds the lock at `path` and stops itself (as under a debugger or ^Z).
class StoppedHolder {
public:
    explicit StoppedHolder(const std::string& path) {
        int ready[2];
        EXPECT_EQ(::pipe(ready), 0);
        pid_ = ::fork();
        if (pid_ == 0) {
            int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
            if (fd >= 0 && ::flock(fd, LOCK_EX) == 0) {
                char c = 1;
                if (::write(ready[1], &c, 1) != 1) ::_exit(1);
            }
            ::raise(SIGSTOP);
            ::pause();
            ::_exit(0);
        }
        ::close(ready[1]);
        struct pollfd p = {ready[0], POLLIN, 0};
        char c = 0;
        holding_ = ::poll(&p, 1, 10000) == 1 && ::read(ready[0], &c, 1) == 1;
        ::close(ready[0]);
    }
    ~StoppedHolder() { release(); }
    bool holding() const { return holding_; }
    // Kills it; the kernel releases its lock (the lock file stays, as after a crash).
    void release() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        testing::wait_child(pid_, 10s);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    bool holding_ = false;
};

// Runs `f` on another thread; if it has not returned after `limit`, kills the holder so
// that it can, and reports the overrun.
template <class F>
bool finishes_within(std::chrono::seconds limit, StoppedHolder& holder, F&& f) {
    auto done = std::async(std::launch::async, std::forward<F>(f));
    if (done.wait_for(limit) == std::future_status::ready) return done.get(), true;
    holder.release();
    done.get();
    return false;
}

TEST(CacheLock, StoppedHolderDelaysOthersOnlyForTheTimeout) {
    TempDir tmp;
    FakeCompiler fake;
    const auto src = tiny_source();
    KernelCache cache(quick_lock_options(fake, tmp.path()));
    StoppedHolder holder(lock_path_of(cache, src));
    ASSERT_TRUE(holder.holding());

    ::testing::internal::CaptureStderr();
    auto start = std::chrono::steady_clock::now();
    std::shared_ptr<const CompiledKernel> k;
    bool bounded = finishes_within(20s, holder, [&] {
        k = cache.get_compiled(src, "sm_80");
        cache.clear_memory();
        cache.get_compiled(src, "sm_80");  // waits again, warns no more
    });
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(bounded) << "waited for a stopped lock holder until it was killed";
    EXPECT_LT(seconds, 5.0);
    EXPECT_EQ(k->cubin, fake(src, "sm_80").cubin);
    CacheStats s = cache.stats();
    EXPECT_EQ(s.lock_timeouts, 2u);
    EXPECT_EQ(s.misses, 2u);
    EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once: " << err;
    EXPECT_NE(err.find("lock"), std::string::npos) << err;
    EXPECT_NE(err.find("without the disk cache"), std::string::npos) << err;
    const std::string entry = cache.disk().entry_path(cache.key_for(src, "sm_80"));
    EXPECT_NE(::access(entry.c_str(), F_OK), 0) << "the holder is the one to write it";

    // Once the holder is gone its lock is free, though its lock file stays.
    holder.release();
    cache.clear_memory();
    cache.get_compiled(src, "sm_80");
    EXPECT_EQ(cache.stats().lock_timeouts, 2u);
    EXPECT_EQ(::access(entry.c_str(), F_OK), 0);
    // The entry and its toolchain index (disk_cache.h).
    EXPECT_EQ(files_under(tmp.path()).size(), 2u) << ::testing::PrintToString(files_under(tmp.path()));
}

TEST(CacheLock, AcquireGivesUpAfterItsTimeout) {
    TempDir tmp;
    const std::string path = tmp.path() + "/x.lock";
    StoppedHolder holder(path);
    ASSERT_TRUE(holder.holding());
    FileLock lock;
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(finishes_within(20s, holder, [&] { lock = FileLock::acquire(path, 200ms); }));
    EXPECT_FALSE(lock.held());
    EXPECT_TRUE(lock.timed_out());
    EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
    holder.release();
    lock = FileLock::acquire(path, 200ms);
    EXPECT_TRUE(lock.held());
    EXPECT_FALSE(lock.timed_out());
}

}  // namespace
}  // namespace attnjit::runtime
