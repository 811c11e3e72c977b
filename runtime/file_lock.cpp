#include "runtime/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

namespace attnjit::runtime {
namespace {

// The lock file, opened without following a link and without blocking on a FIFO;
// -1 unless it is a regular file.
int open_lock_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

FileLock FileLock::acquire(const std::string& path, std::chrono::milliseconds timeout) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + timeout;
    // flock has no timeout: poll with LOCK_NB, backing off to a short pause.
    auto pause = std::chrono::milliseconds(1);
    FileLock lock;
    int fd = -1;
    for (;;) {
        if (fd < 0 && (fd = open_lock_file(path)) < 0) return lock;
        int r, err;
        do r = ::flock(fd, LOCK_EX | LOCK_NB), err = errno;
        while (r != 0 && err == EINTR);
        if (r == 0) {
            // The previous holder unlinks the file before unlocking; if we locked such an
            // orphan, the path now names another file (or none) and we must try again.
            struct stat held {}, named {};
            if (::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 &&
                held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
                lock.fd_ = fd;
                lock.path_ = path;
                return lock;
            }
            ::close(fd);
            fd = -1;
            continue;
        }
        if (err != EWOULDBLOCK || Clock::now() >= deadline) {
            lock.timed_out_ = err == EWOULDBLOCK;
            ::close(fd);
            return lock;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
}

FileLock::FileLock(FileLock&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), timed_out_(o.timed_out_), path_(std::move(o.path_)) {}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
    if (this != &o) {
        this->~FileLock();
        fd_ = std::exchange(o.fd_, -1);
        timed_out_ = o.timed_out_;
        path_ = std::move(o.path_);
    }
    return *this;
}

FileLock::~FileLock() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());  // while still holding it: see acquire()
    ::close(fd_);
    fd_ = -1;
}

}  // namespace attnjit::runtime
