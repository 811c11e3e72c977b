// The process-wide kernel cache: memory -> bundles (kernel_bundle.h) -> disk -> compile, single-flight per key (two
// threads asking for the same kernel compile it once, the second waits), and loaded
// modules per CUDA context. A fast path keyed by a caller-chosen string skips source
// generation and hashing entirely on a hit.
//
//   auto& cache = KernelCache::global();
//   auto k = cache.get_loaded(fast_key, [&] { return codegen::generate(plan, tile); });
//   k->launch(grid, block, smem, params);
#pragma once

#include <cuda.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_source.h"
#include "runtime/cache_stats.h"
#include "runtime/compiled_kernel.h"
#include "runtime/disk_cache.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::runtime {

class KernelCache {
public:
    using CompileFn =
        std::function<CompiledKernel(const codegen::KernelSource&, const std::string& arch)>;

    struct Options {
        // Disk cache root; empty: memory only. Default: from the environment.
        std::string disk_root = DiskCache::root_from_env();
        // The compiler (tests substitute a fake). Default: compile_kernel (NVRTC).
        CompileFn compile;
        // Identifies the compiler in cache keys. Default: nvrtc_toolchain_id(). With
        // kNvrtcUnavailable (no NVRTC), kernels come from disk through the toolchain index
        // (disk_cache.h) and `compile` runs only to report the miss.
        std::string toolchain;
        // How long to wait for another process compiling the same kernel before
        // compiling it here, without the disk cache.
        std::chrono::milliseconds lock_timeout = DiskCache::kDefaultLockTimeout;

        // Defaults, with this disk root ("" = memory only).
        static Options with_disk_root(std::string root) {
            Options o;
            o.disk_root = std::move(root);
            return o;
        }
    };

    KernelCache();
    explicit KernelCache(Options options);
    KernelCache(const KernelCache&) = delete;
    KernelCache& operator=(const KernelCache&) = delete;

    // The one every launch path uses. Reads the environment on first use; never
    // destroyed (modules must not be unloaded after the driver shut down at exit).
    static KernelCache& global();

    // The cubin of `source` for `arch` (no GPU needed).
    std::shared_ptr<const CompiledKernel> get_compiled(const codegen::KernelSource& source,
                                                       const std::string& arch);
    // Compiled for the current device and loaded into the current context.
    std::shared_ptr<const LoadedKernel> get_loaded(const codegen::KernelSource& source);

    // Fast paths: memory-only lookup by `fast_key` (the caller makes it unique per
    // kernel and architecture, e.g. spec hash + tile + arch); on a miss, `make_source`
    // is called and the kernel goes through the full path above.
    std::shared_ptr<const CompiledKernel> get_compiled(
        const std::string& fast_key, const std::function<codegen::KernelSource()>& make_source,
        const std::string& arch);
    std::shared_ptr<const LoadedKernel> get_loaded(
        const std::string& fast_key, const std::function<codegen::KernelSource()>& make_source);

    // Several kernels: get_compiled / get_loaded(fast_key, make_source) of each, their
    // sources made and compiled at once, each miss on a thread of its own
    // (support/at_once.h: a backward's kernels take the longest compile's time, not the
    // sum); the loads stay on this thread, in its context. `seconds`, when given, gets each
    // request's time (making, compiling or reading the disk, loading; a memory hit's
    // lookup). On failure the first failing request's error, after every compile ended.
    struct Request {
        std::string fast_key;
        std::function<codegen::KernelSource()> make_source;
    };
    std::vector<std::shared_ptr<const CompiledKernel>> get_compiled(const std::vector<Request>& requests,
                                                                    const std::string& arch,
                                                                    std::vector<double>* seconds = nullptr);
    std::vector<std::shared_ptr<const LoadedKernel>> get_loaded(const std::vector<Request>& requests,
                                                                std::vector<double>* seconds = nullptr);

    // The content-addressed key (kernel_key.h) with this cache's toolchain: the disk
    // entry's. (Memory holds kernels by toolchain_index_key: one toolchain a cache.)
    std::string key_for(const codegen::KernelSource& source, const std::string& arch) const;
    // Options::toolchain, else nvrtc_toolchain_id(), asked for on first use (a kernel that
    // memory and the bundles do not hold), so that a process served by bundles never loads NVRTC.
    const std::string& toolchain() const;

    // Every kernel compiled or read into memory so far, keyed by toolchain_index_key (what
    // a bundle stores it under: tools/attnjit-aot), in key order.
    std::vector<std::pair<std::string, std::shared_ptr<const CompiledKernel>>> compiled_kernels() const;

    CacheStats stats() const;
    void reset_stats();
    // Forgets every compiled and loaded kernel held in memory (the disk is untouched).
    void clear_memory();

    const DiskCache& disk() const { return disk_; }

private:
    using CompiledPtr = std::shared_ptr<const CompiledKernel>;
    using LoadedPtr = std::shared_ptr<const LoadedKernel>;

    CompiledPtr get_compiled_by_key(const std::string& key, const codegen::KernelSource& source,
                                    const std::string& arch);
    CompiledPtr build(const std::string& key, const codegen::KernelSource& source,
                      const std::string& arch);
    // The miss path when NVRTC cannot be loaded: compile_ (which then normally fails),
    // its EnvironmentError explained as a cache miss that needs NVRTC.
    CompiledPtr compile_without_nvrtc(const std::string& key, const codegen::KernelSource& source,
                                      const std::string& arch);
    LoadedPtr load_in(CUcontext ctx, const std::string& key, const CompiledPtr& compiled);
    // get_loaded(source) in two halves: the lookup and compile, which any thread may run,
    // and the load, on the thread whose context is `ctx`.
    struct PendingLoad {
        LoadedPtr loaded;  // already loaded in ctx; else:
        std::string key;
        CompiledPtr compiled;
    };
    PendingLoad find_or_compile(CUcontext ctx, const codegen::KernelSource& source, const std::string& arch);
    LoadedPtr finish_load(CUcontext ctx, PendingLoad pending);
    // The fast maps' lookups (a hit is counted); compiled ones are keyed by arch + '\n' + fast key.
    CompiledPtr find_fast_compiled(const std::string& arch_and_fast_key);
    LoadedPtr find_fast_loaded(CUcontext ctx, const std::string& fast_key);
    template <class F>
    void count(F&& f) {
        std::lock_guard<std::mutex> lock(stats_mu_);
        f(stats_);
    }

    // Loaded kernels are per context: the key is (context, string).
    struct ContextKey {
        CUcontext ctx;
        std::string key;
        bool operator==(const ContextKey& o) const { return ctx == o.ctx && key == o.key; }
    };
    struct ContextKeyHash {
        size_t operator()(const ContextKey& k) const {
            return std::hash<std::string>()(k.key) ^ (std::hash<const void*>()(k.ctx) * 31);
        }
    };

    CompileFn compile_;
    mutable std::string toolchain_;  // toolchain(): set once
    mutable std::once_flag toolchain_once_;
    DiskCache disk_;

    mutable std::mutex mu_;  // guards the maps below
    std::unordered_map<std::string, std::shared_future<CompiledPtr>> compiled_;
    std::unordered_map<std::string, CompiledPtr> fast_compiled_;
    std::unordered_map<ContextKey, LoadedPtr, ContextKeyHash> loaded_;
    std::unordered_map<ContextKey, LoadedPtr, ContextKeyHash> fast_loaded_;
    std::mutex load_mu_;  // one module load at a time, outside mu_

    mutable std::mutex stats_mu_;
    CacheStats stats_;
};

}  // namespace attnjit::runtime
