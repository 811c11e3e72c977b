#include "runtime/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "runtime/safe_file.h"
#include "support/debug.h"
#include "support/env.h"
#include "support/error.h"

namespace attnjit::runtime {
namespace {

enum class Read { kDone, kAbsent, kUnreadable, kCorrupt };

// Reads the entry at `path` into `bytes`, never more than its header states; `why` says
// what is wrong with a corrupt one. `file` stays open so the caller can check that a
// corrupt entry is still the one it read before removing it.
Read read_entry(RegularFile& file, std::string& bytes, std::string& why) {
    switch (file.status()) {
        case RegularFile::Status::kOpen: break;
        case RegularFile::Status::kAbsent: return Read::kAbsent;
        case RegularFile::Status::kUnreadable: return Read::kUnreadable;
        case RegularFile::Status::kNotRegular:
            why = S_ISLNK(file.st().st_mode) ? "a symbolic link, not a regular file"
                                             : "not a regular file";
            return Read::kCorrupt;
    }
    const uint64_t file_size = static_cast<uint64_t>(file.st().st_size);
    if (file_size > kCompiledKernelHeaderBytes + kMaxCompiledKernelPayloadBytes) {
        why = std::to_string(file_size) + " bytes, larger than any entry may be";
        return Read::kCorrupt;
    }
    if (!file.read_exact(kCompiledKernelHeaderBytes, bytes)) {
        why = "truncated header";
        return Read::kCorrupt;
    }
    auto size = serialized_size(bytes, &why);
    if (!size) return Read::kCorrupt;
    if (*size != file_size) {
        why = "the file is " + std::to_string(file_size) + " bytes, its header says " +
              std::to_string(*size) + " (truncated or appended to)";
        return Read::kCorrupt;
    }
    if (!file.read_exact(*size - kCompiledKernelHeaderBytes, bytes)) {
        why = "shorter than its header says";
        return Read::kCorrupt;
    }
    return Read::kDone;
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

DiskCache::Lookup DiskCache::load(const std::string& key, const EntryCheck& check) const {
    Lookup result;
    if (!enabled()) return result;
    const std::string path = entry_path(key);
    RegularFile file(path);
    std::string bytes, why;
    switch (read_entry(file, bytes, why)) {
        case Read::kAbsent:
        case Read::kUnreadable: return result;
        case Read::kCorrupt: break;
        case Read::kDone:
            result.kernel = deserialize(bytes, &why);
            if (result.kernel && result.kernel->key != key) {
                why = "it records the key " + result.kernel->key + " (copied or linked here?)";
                result.kernel.reset();
            } else if (result.kernel && check) {
                why = check(*result.kernel);
                if (!why.empty()) result.kernel.reset();
            }
            if (result.kernel) return result;
            break;
    }
    result.corrupt = true;
    // Remove it only if it is still the file we read: a writer may have just renamed a
    // good entry over it.
    if (file.still_at(path)) ::unlink(path.c_str());
    debug(1) << "disk cache: corrupt entry " << path << " (" << why << "); removed, rebuilding";
    return result;
}

bool DiskCache::store(const std::string& key, const CompiledKernel& k) {
    internal_check(k.key == key) << "DiskCache::store: the kernel records key '" << k.key
                                 << "' but is stored under '" << key << "'";
    if (!writable()) return false;
    const std::string path = entry_path(key);
    const std::string dir = path.substr(0, path.find_last_of('/'));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        disable_writes("create directory", dir, ec.value());
        return false;
    }
    const char* step = "";
    if (int err = replace_file(path, serialize(k), 0644, /*durable=*/true, &step)) {
        disable_writes(step, path, err);
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
