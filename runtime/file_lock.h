// A cross-process exclusive lock on a file (flock), so that processes that miss the
// disk cache for the same kernel at once compile it once: the others wait, then find it
// on disk. Best effort: where the lock file cannot be created (read-only cache) or is
// not a regular file (a planted link is never followed), the lock is a no-op, which
// costs duplicate compiles, never correctness (writes are atomic). The wait is bounded,
// so a stopped or hung holder cannot stall everyone else.
#pragma once

#include <chrono>
#include <string>

namespace attnjit::runtime {

class FileLock {
public:
    // Waits at most `timeout` until the lock is held. Returns an unheld lock if the
    // file can't be made safely, or if the wait ran out (then timed_out()).
    static FileLock acquire(const std::string& path, std::chrono::milliseconds timeout);

    FileLock() = default;
    FileLock(FileLock&& o) noexcept;
    FileLock& operator=(FileLock&& o) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    // Removes the lock file and releases the lock, so no lock files pile up.
    ~FileLock();

    bool held() const { return fd_ >= 0; }
    bool timed_out() const { return timed_out_; }

private:
    int fd_ = -1;
    bool timed_out_ = false;
    std::string path_;
};

}  // namespace attnjit::runtime
