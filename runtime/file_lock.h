// A cross-process exclusive lock on a file (flock), so that processes that miss the
// disk cache for the same kernel at once compile it once: the others wait, then find it
// on disk. Best effort: where the lock file cannot be created (read-only cache) the lock
// is a no-op, which costs duplicate compiles, never correctness (writes are atomic).
#pragma once

#include <string>

namespace attnjit::runtime {

class FileLock {
public:
    // Blocks until the lock is held, or returns an unheld lock if the file can't be made.
    static FileLock acquire(const std::string& path);

    FileLock() = default;
    FileLock(FileLock&& o) noexcept;
    FileLock& operator=(FileLock&& o) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    // Removes the lock file and releases the lock, so no lock files pile up.
    ~FileLock();

    bool held() const { return fd_ >= 0; }

private:
    int fd_ = -1;
    std::string path_;
};

}  // namespace attnjit::runtime
