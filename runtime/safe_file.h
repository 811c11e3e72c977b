// File access for paths that something other than this process may have put there
// (cache entries, lock files, dumps): never follow a planted link, never block on a
// FIFO or a device, never read more than the caller expects.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

namespace attnjit::runtime {

// A file opened read-only with O_NOFOLLOW | O_NONBLOCK, only if it is a regular file.
class RegularFile {
public:
    enum class Status {
        kOpen,        // a regular file, open
        kAbsent,      // nothing at the path
        kNotRegular,  // a link, FIFO, device, socket or directory; `st` is its lstat
        kUnreadable,  // a regular file we may not read (or another open error)
    };
    explicit RegularFile(const std::string& path);
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;
    ~RegularFile();

    Status status() const { return status_; }
    // fstat of the open file (lstat of the path for kNotRegular).
    const struct stat& st() const { return st_; }
    // Appends exactly `n` more bytes to `out`; false on an error or an early end of file.
    bool read_exact(size_t n, std::string& out);
    // Whether `path` still names the file described by st(), i.e. nothing replaced it
    // since (so removing it removes what was examined).
    bool still_at(const std::string& path) const;

private:
    int fd_ = -1;
    Status status_ = Status::kAbsent;
    struct stat st_ {};
};

// The whole regular file at `path` (never through a link), if it is at most `limit` bytes;
// nullopt otherwise, with `why_not` (when given) saying why.
std::optional<std::string> read_regular_file(const std::string& path, size_t limit, std::string* why_not = nullptr);

// Writes `data` to a fresh file next to `path` (created with O_EXCL | O_NOFOLLOW, so
// never through a link and never shared with another writer), fsyncs it when `durable`,
// and renames it over `path`; rename replaces a link at `path` instead of following it.
// Readers see the old file or the whole new one. Returns 0, or the errno of the step
// that failed (named in `failed_step`: "create", "write" or "rename"); nothing is left
// behind on failure.
int replace_file(const std::string& path, const std::string& data, mode_t mode, bool durable,
                 const char** failed_step);

}  // namespace attnjit::runtime
