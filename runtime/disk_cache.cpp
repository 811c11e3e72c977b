#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

#include "support/debug.h"
#include "support/env.h"

namespace attnjit::runtime {
namespace {

// Reads the whole file; fills `st` with the stat of what was read. False if absent or
// unreadable.
bool read_file(const std::string& path, std::string& out, struct stat& st) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::fstat(fd, &st) == 0;
    out.clear();
    char buf[1 << 16];
    while (ok) {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) ok = false;
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return ok;
}

bool write_all(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// Unique per process, thread and call, so concurrent writers never share a temp file.
std::string temp_suffix() {
    static std::atomic<unsigned long> counter{0};
    thread_local std::mt19937_64 rng(std::random_device{}());
    return ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
           std::to_string(rng() % 1000000007ULL);
}

}  // namespace

DiskCache::DiskCache(std::string root) {
    if (!root.empty()) dir_ = root + "/v" + std::to_string(kCompiledKernelFormatVersion);
}

std::string DiskCache::root_from_env() {
    return env::disk_cache_disabled() ? std::string() : env::cache_dir();
}

std::string DiskCache::entry_path(const std::string& key) const {
    return dir_ + "/kernels/" + key.substr(0, 2) + "/" + key + ".kernel";
}

DiskCache::Lookup DiskCache::load(const std::string& key) const {
    Lookup result;
    if (!enabled()) return result;
    const std::string path = entry_path(key);
    std::string bytes;
    struct stat read_st{};
    if (!read_file(path, bytes, read_st)) return result;
    std::string why;
    result.kernel = deserialize(bytes, &why);
    if (result.kernel) return result;
    result.corrupt = true;
    // Remove it only if it is still the file we read: a writer may have just renamed a
    // good entry over it.
    struct stat now{};
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == read_st.st_ino &&
        now.st_dev == read_st.st_dev)
        ::unlink(path.c_str());
    debug(1) << "disk cache: corrupt entry " << path << " (" << why << "); removed, rebuilding";
    return result;
}

void DiskCache::remove(const std::string& key) const {
    if (enabled()) ::unlink(entry_path(key).c_str());
}

bool DiskCache::store(const std::string& key, const CompiledKernel& k) {
    if (!writable()) return false;
    const std::string path = entry_path(key);
    const std::string dir = path.substr(0, path.find_last_of('/'));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        disable_writes("create directory", dir, ec.value());
        return false;
    }
    const std::string tmp = path + temp_suffix();
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        disable_writes("create", tmp, errno);
        return false;
    }
    // fsync before rename: after a crash the entry is either whole or absent.
    bool ok = write_all(fd, serialize(k)) && ::fsync(fd) == 0;
    int err = errno;
    ok = (::close(fd) == 0) && ok;
    if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        ::unlink(tmp.c_str());
        disable_writes("write", path, err);
        return false;
    }
    debug(2) << "disk cache: wrote " << path;
    return true;
}

FileLock DiskCache::lock(const std::string& key) const {
    if (!writable()) return FileLock();
    const std::string path = entry_path(key);
    std::error_code ec;
    std::filesystem::create_directories(path.substr(0, path.find_last_of('/')), ec);
    return FileLock::acquire(path + ".lock");
}

void DiskCache::disable_writes(const std::string& what, const std::string& path, int err) {
    if (!writable_.exchange(false)) return;
    std::cerr << "attnjit: warning: cannot " << what << " " << path << " (" << std::strerror(err)
              << "); the kernel cache at " << dir_
              << " is read-only for the rest of this process, so kernels are kept in memory "
                 "only. Set ATTNJIT_CACHE_DIR to a writable directory, or "
                 "ATTNJIT_DISABLE_DISK_CACHE=1 to silence this.\n";
}

}  // namespace attnjit::runtime
