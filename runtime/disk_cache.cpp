#include "runtime/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "runtime/entry_read.h"
#include "runtime/private_dir.h"
#include "runtime/safe_file.h"
#include "support/debug.h"
#include "support/env.h"
#include "support/error.h"

namespace attnjit::runtime {

DiskCache::DiskCache(std::string root, std::chrono::milliseconds lock_timeout)
    : root_(std::move(root)), lock_timeout_(lock_timeout) {
    if (!root_.empty()) dir_ = root_ + "/v" + std::to_string(kCompiledKernelFormatVersion);
}

std::string DiskCache::root_from_env() {
    return env::disk_cache_disabled() ? std::string() : env::cache_dir();
}

std::string DiskCache::entry_path(const std::string& key) const {
    return dir_ + "/kernels/" + key.substr(0, 2) + "/" + key + ".kernel";
}

bool DiskCache::writable() const { return trusted() && writable_.load(); }

bool DiskCache::trusted() const {
    if (!enabled()) return false;
    std::call_once(checked_, [this] { check_directories(); });
    return !refused_.load();
}

void DiskCache::check_directories() const {
    // A directory that cannot be made leaves a cache that cannot be written (and has
    // nothing to read); one that exists must be private, or nothing in it is trusted.
    for (const std::string* d : {&root_, &dir_}) {
        int err = make_private_dirs(*d);
        if (err != 0) {
            disable_writes("create directory", *d, err);
            if (err != EACCES && err != EROFS) return;  // absent: nothing to check
        }
        struct stat st {};
        if (::lstat(d->c_str(), &st) != 0) return;
        // The root may be a link the user made (~/.cache on another disk); what attnjit
        // makes inside it may not.
        if (!private_or_refuse(*d, d == &root_)) return;
    }
}

bool DiskCache::entry_directories_ok(const std::string& key, bool create, bool quiet) const {
    const std::string kernels = dir_ + "/kernels";
    for (const std::string& d : {kernels, kernels + "/" + key.substr(0, 2)}) {
        if (create && ::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
            if (!quiet) disable_writes("create directory", d, errno);
            return false;
        }
        struct stat st {};
        if (::lstat(d.c_str(), &st) != 0) return false;
        if (!private_or_refuse(d, false)) return false;
    }
    return true;
}

bool DiskCache::private_or_refuse(const std::string& path, bool follow_link) const {
    std::string why = why_not_private(path, follow_link);
    if (why.empty()) return true;
    refuse(path, why);
    return false;
}

void DiskCache::refuse(const std::string& path, const std::string& why) const {
    if (refused_.exchange(true)) return;
    std::cerr << "attnjit: warning: not using the kernel cache at " << root_ << ": " << path
              << " " << why
              << ", so its entries could have been planted by someone else. Kernels are kept "
                 "in memory only. Use a directory that only you own and can write (chmod "
                 "go-w, or set ATTNJIT_CACHE_DIR to another path), or set "
                 "ATTNJIT_DISABLE_DISK_CACHE=1 to silence this.\n";
}

DiskCache::Lookup DiskCache::load(const std::string& key, const EntryCheck& check) const {
    Lookup result;
    if (!trusted() || !entry_directories_ok(key, false)) return result;
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
    if (!writable() || !entry_directories_ok(key, true)) return false;
    const std::string path = entry_path(key);
    const char* step = "";
    if (int err = replace_file(path, serialize(k), 0644, /*durable=*/true, &step)) {
        disable_writes(step, path, err);
        return false;
    }
    debug(2) << "disk cache: wrote " << path;
    return true;
}

std::string DiskCache::toolchain_index_path(const std::string& index_key) const {
    return dir_ + "/kernels/" + index_key.substr(0, 2) + "/" + index_key + ".toolchain";
}

std::optional<std::string> DiskCache::load_toolchain(const std::string& index_key) const {
    if (!trusted() || !entry_directories_ok(index_key, false)) return std::nullopt;
    RegularFile file(toolchain_index_path(index_key));
    if (file.status() != RegularFile::Status::kOpen) return std::nullopt;
    const auto size = static_cast<uint64_t>(file.st().st_size);
    std::string id;
    if (size == 0 || size > kMaxToolchainIdBytes || !file.read_exact(size, id)) return std::nullopt;
    return id;
}

bool DiskCache::store_toolchain(const std::string& index_key, const std::string& toolchain) {
    if (!writable() || !entry_directories_ok(index_key, true, /*quiet=*/true)) return false;
    if (toolchain.empty() || toolchain.size() > kMaxToolchainIdBytes) return false;
    const std::string path = toolchain_index_path(index_key);
    const char* step = "";
    // Not fsynced, and a failure is not reported (nor stops the cache writing): the index
    // is a hint, written on disk hits too, so a read-only cache of complete entries must
    // not warn; a lost index only costs a process without NVRTC a miss.
    if (int err = replace_file(path, toolchain, 0644, /*durable=*/false, &step)) {
        debug(1) << "disk cache: cannot " << step << " " << path << " (" << std::strerror(err) << ")";
        return false;
    }
    debug(2) << "disk cache: wrote " << path;
    return true;
}

FileLock DiskCache::lock(const std::string& key) const {
    if (!writable() || !entry_directories_ok(key, true)) return FileLock();
    const std::string path = entry_path(key) + ".lock";
    FileLock lock = FileLock::acquire(path, lock_timeout_);
    if (lock.timed_out() && !warned_lock_timeout_.exchange(true))
        std::cerr << "attnjit: warning: waited " << lock_timeout_.count() / 1000.0
                  << " s for the lock " << path
                  << ", held by another process that has not finished compiling this kernel "
                     "(is it stopped or hung?); compiling it here without the disk cache. "
                     "Further lock timeouts are not reported.\n";
    else if (!lock.held() && !lock.timed_out())
        debug(1) << "disk cache: cannot lock " << path << "; compiling without the lock";
    return lock;
}

void DiskCache::disable_writes(const std::string& what, const std::string& path, int err) const {
    if (!writable_.exchange(false)) return;
    std::cerr << "attnjit: warning: cannot " << what << " " << path << " (" << std::strerror(err)
              << "); the kernel cache at " << dir_
              << " is read-only for the rest of this process, so kernels are kept in memory "
                 "only. Set ATTNJIT_CACHE_DIR to a writable directory, or "
                 "ATTNJIT_DISABLE_DISK_CACHE=1 to silence this.\n";
}

}  // namespace attnjit::runtime
