#include "runtime/safe_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <random>

namespace attnjit::runtime {
namespace {

bool write_all(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0) errno = EIO;
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return true;
}

// Unique per process, thread and call, so concurrent writers never share a temp file,
// and unpredictable, so nobody can plant something under the name first.
std::string temp_suffix() {
    static std::atomic<unsigned long> counter{0};
    thread_local std::mt19937_64 rng(std::random_device{}());
    return ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
           std::to_string(rng() % 1000000007ULL);
}

}  // namespace

RegularFile::RegularFile(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) {
        int err = errno;
        // O_NOFOLLOW fails on a link (ELOOP), a socket fails with ENXIO: look at what it is.
        if (err == ENOENT || err == ENOTDIR) status_ = Status::kAbsent;
        else if (::lstat(path.c_str(), &st_) == 0 && !S_ISREG(st_.st_mode))
            status_ = Status::kNotRegular;
        else status_ = Status::kUnreadable;
        return;
    }
    if (::fstat(fd_, &st_) != 0) {
        status_ = Status::kUnreadable;
    } else if (!S_ISREG(st_.st_mode)) {
        status_ = Status::kNotRegular;
    } else {
        status_ = Status::kOpen;
        return;
    }
    ::close(fd_);
    fd_ = -1;
}

RegularFile::~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
}

bool RegularFile::read_exact(size_t n, std::string& out) {
    if (fd_ < 0) return false;
    size_t start = out.size();
    out.resize(start + n);
    size_t done = 0;
    while (done < n) {
        ssize_t got = ::read(fd_, out.data() + start + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            out.resize(start + done);
            return false;
        }
        done += static_cast<size_t>(got);
    }
    return true;
}

bool RegularFile::still_at(const std::string& path) const {
    struct stat now {};
    return ::lstat(path.c_str(), &now) == 0 && now.st_ino == st_.st_ino &&
           now.st_dev == st_.st_dev;
}

int replace_file(const std::string& path, const std::string& data, mode_t mode, bool durable,
                 const char** failed_step) {
    const std::string tmp = path + temp_suffix();
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        if (failed_step) *failed_step = "create";
        return errno;
    }
    // Check after everything reached the file (close can report a deferred error), and
    // fsync before rename so that after a crash the file is either whole or absent.
    bool ok = write_all(fd, data) && (!durable || ::fsync(fd) == 0);
    int err = ok ? 0 : errno;
    if (::close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    const char* step = "write";
    if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
        ok = false;
        err = errno;
        step = "rename";
    }
    if (ok) return 0;
    ::unlink(tmp.c_str());
    if (failed_step) *failed_step = step;
    return err != 0 ? err : EIO;
}

std::optional<std::string> read_regular_file(const std::string& path, size_t limit, std::string* why_not) {
    RegularFile f(path);
    switch (f.status()) {
    case RegularFile::Status::kOpen: break;
    case RegularFile::Status::kAbsent: if (why_not) *why_not = path + " does not exist"; return std::nullopt;
    case RegularFile::Status::kNotRegular: if (why_not) *why_not = path + " is not a regular file"; return std::nullopt;
    case RegularFile::Status::kUnreadable: if (why_not) *why_not = path + " cannot be read"; return std::nullopt;
    }
    const auto size = static_cast<size_t>(f.st().st_size);
    if (size > limit) {
        if (why_not) *why_not = path + " is " + std::to_string(size) + " bytes, more than the " + std::to_string(limit) +
                                  " this file may have";
        return std::nullopt;
    }
    std::string bytes;
    if (!f.read_exact(size, bytes)) {
        if (why_not) *why_not = path + " could not be read whole";
        return std::nullopt;
    }
    return bytes;
}

}  // namespace attnjit::runtime
