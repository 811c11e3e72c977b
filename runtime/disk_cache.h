// Compiled kernels on disk, content-addressed by a key that covers everything that
// affects the cubin (see kernel_key.h), so entries are shared by processes and survive
// restarts (Triton's cache, jitify2's file cache). Layout:
//
//   <root>/v<kCompiledKernelFormatVersion>/kernels/<key[0:2]>/<key>.kernel
//   <root>/v<kCompiledKernelFormatVersion>/kernels/<ikey[0:2]>/<ikey>.toolchain
//
// The second is the toolchain index: `ikey` is toolchain_index_key() (the kernel's key
// without the compiler) and the file holds the toolchain id that last compiled it, so a
// process that cannot load NVRTC can still compute the entry's key. It is only a hint:
// the entry is found under kernel_key(source, arch, that id), which matches nothing else.
//
// Readers never lock and never see a partial file: a writer writes a temporary file in
// the same directory, fsyncs it and renames it into place. Cache I/O never throws.
//
// Trust (docs/cache.md): an entry is a binary this process will run, so the cache is
// used only while the root and every directory below it are owned by this user and
// writable by nobody else (directories it creates are 0700); otherwise it is refused
// with one warning on stderr and becomes memory-only. An entry is loaded only if it is
// a regular file (never through a link, never a FIFO or device), no larger than its
// header says, intact, and records the key it is stored under; anything else is
// corrupt: removed and rebuilt. An unwritable directory warns once and the cache stops
// writing.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/compiled_kernel.h"
#include "runtime/file_lock.h"

namespace attnjit::runtime {

class DiskCache {
public:
    // How long lock() waits for another process compiling the same key. Compiles take
    // about a second; a holder this late is stopped or hung.
    static constexpr std::chrono::milliseconds kDefaultLockTimeout{30000};

    // An empty root disables the cache: loads miss, stores do nothing.
    explicit DiskCache(std::string root,
                       std::chrono::milliseconds lock_timeout = kDefaultLockTimeout);
    // env::cache_dir(), or disabled when ATTNJIT_DISABLE_DISK_CACHE is set.
    static std::string root_from_env();

    DiskCache(const DiskCache&) = delete;
    DiskCache& operator=(const DiskCache&) = delete;

    // A root was given (it may still be refused or unwritable).
    bool enabled() const { return !dir_.empty(); }
    // Enabled, trusted, and no write has failed. Checks the directories on first use.
    bool writable() const;
    // <root>/v<format>; empty when disabled.
    const std::string& directory() const { return dir_; }
    std::string entry_path(const std::string& key) const;

    // Says why an entry that carries the right key is still not usable ("" if it is).
    using EntryCheck = std::function<std::string(const CompiledKernel&)>;

    struct Lookup {
        std::optional<CompiledKernel> kernel;  // set on a hit
        bool corrupt = false;                  // an entry was there but unusable; removed
    };
    // A hit only for an intact regular file that records `key` and passes `check`.
    Lookup load(const std::string& key, const EntryCheck& check = {}) const;

    // Writes the entry atomically; `k.key` must be `key`. False if it could not (first
    // failure: one warning).
    bool store(const std::string& key, const CompiledKernel& k);

    // The toolchain index (see above): the id stored under `index_key`, if any (a regular
    // file of at most kMaxToolchainIdBytes); storing writes it atomically, false if it
    // could not (silently: the index is a hint). Neither ever throws.
    static constexpr size_t kMaxToolchainIdBytes = 4096;
    std::string toolchain_index_path(const std::string& index_key) const;
    std::optional<std::string> load_toolchain(const std::string& index_key) const;
    bool store_toolchain(const std::string& index_key, const std::string& toolchain);

    // Held while compiling a key that missed, so concurrent processes compile it once.
    // Unheld when the cache is not writable or the lock file is not a regular file;
    // timed_out() after waiting the lock timeout (first time: one warning).
    FileLock lock(const std::string& key) const;

private:
    // Creates and checks root and version directory once; false if refused.
    bool trusted() const;
    void check_directories() const;
    // Checks (and with `create`, makes) kernels/ and the key's shard directory. A
    // directory it cannot make stops the cache writing (one warning) unless `quiet`.
    bool entry_directories_ok(const std::string& key, bool create, bool quiet = false) const;
    bool private_or_refuse(const std::string& path, bool follow_link) const;
    void refuse(const std::string& path, const std::string& why) const;
    void disable_writes(const std::string& what, const std::string& path, int err) const;

    std::string root_;
    std::string dir_;
    std::chrono::milliseconds lock_timeout_;
    mutable std::once_flag checked_;
    mutable std::atomic<bool> refused_{false};
    mutable std::atomic<bool> writable_{true};
    mutable std::atomic<bool> warned_lock_timeout_{false};
};

}  // namespace attnjit::runtime
