// Compiled kernels on disk, content-addressed by a key that covers everything that
// affects the cubin (see kernel_key.h), so entries are shared by processes and survive
// restarts (Triton's cache, jitify2's file cache). Layout:
//
//   <root>/v<kCompiledKernelFormatVersion>/kernels/<key[0:2]>/<key>.kernel
//
// Readers never lock and never see a partial file: a writer writes a temporary file in
// the same directory, fsyncs it and renames it into place. Cache I/O never throws: a
// corrupt entry is removed and reported as such; an unwritable directory warns once on
// stderr and the cache stops writing (it becomes memory-only).
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "runtime/compiled_kernel.h"
#include "runtime/file_lock.h"

namespace attnjit::runtime {

class DiskCache {
public:
    // An empty root disables the cache: loads miss, stores do nothing.
    explicit DiskCache(std::string root);
    // env::cache_dir(), or disabled when ATTNJIT_DISABLE_DISK_CACHE is set.
    static std::string root_from_env();

    DiskCache(const DiskCache&) = delete;
    DiskCache& operator=(const DiskCache&) = delete;

    bool enabled() const { return !dir_.empty(); }
    // False once a write failed (or when disabled).
    bool writable() const { return enabled() && writable_.load(); }
    // <root>/v<format>; empty when disabled.
    const std::string& directory() const { return dir_; }
    std::string entry_path(const std::string& key) const;

    struct Lookup {
        std::optional<CompiledKernel> kernel;  // set on a hit
        bool corrupt = false;                  // an entry was there but unreadable; removed
    };
    Lookup load(const std::string& key) const;

    // Writes the entry atomically. False if it could not (first failure: one warning).
    bool store(const std::string& key, const CompiledKernel& k);

    // Removes an entry that decoded but does not belong to its key (e.g. wrong entry).
    void remove(const std::string& key) const;

    // Held while compiling a key that missed, so concurrent processes compile it once.
    FileLock lock(const std::string& key) const;

private:
    void disable_writes(const std::string& what, const std::string& path, int err);

    std::string dir_;
    std::atomic<bool> writable_{true};
};

}  // namespace attnjit::runtime
