#include "runtime/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace attnjit::runtime {

FileLock FileLock::acquire(const std::string& path) {
    FileLock lock;
    for (;;) {
        int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return lock;
        int r;
        do r = ::flock(fd, LOCK_EX);
        while (r != 0 && errno == EINTR);
        if (r != 0) {
            ::close(fd);
            return lock;
        }
        // The previous holder unlinks the file before unlocking; if we locked such an
        // orphan, the path now names another file (or none) and we must try again.
        struct stat held{}, named{};
        if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
            held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
            lock.fd_ = fd;
            lock.path_ = path;
            return lock;
        }
        ::close(fd);
    }
}

FileLock::FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
    if (this != &o) {
        this->~FileLock();
        fd_ = std::exchange(o.fd_, -1);
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
