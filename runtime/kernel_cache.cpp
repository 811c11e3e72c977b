#include "runtime/kernel_cache.h"

#include <algorithm>
#include <chrono>

#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/entry_check.h"
#include "runtime/kernel_bundle.h"
#include "runtime/kernel_key.h"
#include "support/at_once.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit::runtime {

KernelCache::KernelCache() : KernelCache(Options{}) {}

KernelCache::KernelCache(Options options)
    : compile_(options.compile ? std::move(options.compile) : CompileFn(compile_kernel)),
      toolchain_(std::move(options.toolchain)),
      disk_(std::move(options.disk_root), options.lock_timeout) {
    debug(1) << "kernel cache: " << (disk_.enabled() ? disk_.directory() : "memory only");
}

// Asked for on the first kernel that memory and the bundles do not hold: a process whose
// kernels all come from bundles never loads NVRTC.
const std::string& KernelCache::toolchain() const {
    std::call_once(toolchain_once_, [this] {
        if (toolchain_.empty()) toolchain_ = nvrtc_toolchain_id();
        debug(1) << "kernel cache toolchain: " << toolchain_;
    });
    return toolchain_;
}

KernelCache& KernelCache::global() {
    static KernelCache* cache = new KernelCache();
    return *cache;
}

std::string KernelCache::key_for(const codegen::KernelSource& source,
                                 const std::string& arch) const {
    return kernel_key(source, arch, toolchain());
}

std::shared_ptr<const CompiledKernel> KernelCache::get_compiled(
    const codegen::KernelSource& source, const std::string& arch) {
    return get_compiled_by_key(toolchain_index_key(source, arch), source, arch);
}

// `key`: toolchain_index_key(source, arch), the memory maps' key (one toolchain a cache).
KernelCache::CompiledPtr KernelCache::get_compiled_by_key(const std::string& key,
                                                          const codegen::KernelSource& source,
                                                          const std::string& arch) {
    // Single flight: the first thread to miss owns the build; the others wait on its
    // future (and see its exception if it fails, after which the slot is free again).
    std::promise<CompiledPtr> promise;
    std::shared_future<CompiledPtr> future;
    bool owner = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = compiled_.find(key);
        if (it != compiled_.end()) {
            future = it->second;
        } else {
            future = promise.get_future().share();
            compiled_.emplace(key, future);
            owner = true;
        }
    }
    if (!owner) {
        CompiledPtr p = future.get();
        count([](CacheStats& s) { ++s.memory_hits; });
        return p;
    }
    try {
        CompiledPtr p = build(key, source, arch);
        promise.set_value(p);
        return p;
    } catch (...) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            compiled_.erase(key);
        }
        promise.set_exception(std::current_exception());
        throw;
    }
}

KernelCache::CompiledPtr KernelCache::build(const std::string& index_key,
                                            const codegen::KernelSource& source,
                                            const std::string& arch) {
    // Kernels compiled ahead of time (kernel_bundle.h) first: no toolchain needed.
    if (auto hit = BundleRegistry::global().find(index_key, source, arch)) {
        count([](CacheStats& s) { ++s.bundle_hits; });
        debug(1) << "bundle hit " << source.name << " (" << arch << ") from " << hit->bundle;
        return std::make_shared<const CompiledKernel>(std::move(hit->kernel));
    }
    const std::string key = kernel_key(source, arch, toolchain());
    // An entry that decodes but is not this kernel is as bad as a corrupt one.
    auto check = [&](const CompiledKernel& k) { return why_entry_does_not_match(k, source, arch); };
    auto try_disk_at = [&](const std::string& entry_key) -> CompiledPtr {
        auto found = disk_.load(entry_key, check);
        if (found.corrupt) count([](CacheStats& s) { ++s.corrupt_entries; });
        if (!found.kernel) return nullptr;
        count([](CacheStats& s) { ++s.disk_hits; });
        debug(1) << "disk hit " << source.name << " (" << arch << ")";
        return std::make_shared<const CompiledKernel>(std::move(*found.kernel));
    };
    // Records that this toolchain compiled the kernel, for processes without NVRTC.
    auto index = [&] {
        if (disk_.writable() && disk_.load_toolchain(index_key) != toolchain())
            disk_.store_toolchain(index_key, toolchain());
    };

    if (toolchain() == kNvrtcUnavailable) {
        // No compiler: the entry of the NVRTC that last compiled this kernel, if any. Its
        // key is derived from this source and arch, so the index cannot lead elsewhere.
        if (disk_.enabled())
            if (auto id = disk_.load_toolchain(index_key); id && *id != kNvrtcUnavailable)
                if (auto hit = try_disk_at(kernel_key(source, arch, *id))) return hit;
        return compile_without_nvrtc(key, source, arch);
    }

    auto try_disk = [&]() -> CompiledPtr {
        CompiledPtr hit = try_disk_at(key);
        if (hit) index();
        return hit;
    };
    if (auto hit = try_disk()) return hit;
    // Other processes missing the same key wait here, then find our entry on disk.
    FileLock lock = disk_.lock(key);
    if (lock.held())
        if (auto hit = try_disk()) return hit;
    // A holder that outlived the timeout is still expected to write the entry itself.
    const bool write_to_disk = disk_.enabled() && !lock.timed_out();
    if (lock.timed_out()) count([](CacheStats& s) { ++s.lock_timeouts; });

    debug(1) << "compiling " << source.name << " for " << arch;
    CompiledKernel built = compile_(source, arch);
    built.key = key;
    auto compiled = std::make_shared<const CompiledKernel>(std::move(built));
    count([&](CacheStats& s) {
        ++s.misses;
        s.compile_seconds += compiled->compile_seconds;
    });
    if (write_to_disk) {
        if (disk_.store(key, *compiled)) index();
        else count([](CacheStats& s) { ++s.disk_write_failures; });
    }
    return compiled;
}

KernelCache::CompiledPtr KernelCache::compile_without_nvrtc(const std::string& key,
                                                            const codegen::KernelSource& source,
                                                            const std::string& arch) {
    CompiledKernel built;
    try {
        built = compile_(source, arch);
    } catch (const EnvironmentError& e) {
        std::string why = e.what();
        if (why.rfind("attnjit: ", 0) == 0) why.erase(0, 9);
        const std::string bundles = BundleRegistry::global().describe();
        environment_error << "cannot get kernel " << source.name << " for " << arch
                          << ": it is not in a kernel bundle ("
                          << (bundles.empty() ? std::string("none is loaded or linked") : bundles)
                          << ") nor in the kernel cache ("
                          << (disk_.enabled() ? disk_.directory() + " has no entry for it"
                                              : std::string("the disk cache is disabled"))
                          << "), and compiling it needs NVRTC, which this process cannot load. "
                          << why
                          << "\n  (A process without NVRTC runs the kernels of the bundles attnjit-aot made "
                             "(docs/aot.md) for this attnjit and this arch, and those a process with NVRTC "
                             "compiled into the same ATTNJIT_CACHE_DIR before.)";
    }
    built.key = key;
    auto compiled = std::make_shared<const CompiledKernel>(std::move(built));
    count([&](CacheStats& s) {
        ++s.misses;
        s.compile_seconds += compiled->compile_seconds;
    });
    return compiled;
}

std::shared_ptr<const LoadedKernel> KernelCache::get_loaded(const codegen::KernelSource& source) {
    CUcontext ctx = current_context();
    return finish_load(ctx, find_or_compile(ctx, source, current_device().arch()));
}

KernelCache::PendingLoad KernelCache::find_or_compile(CUcontext ctx, const codegen::KernelSource& source,
                                                      const std::string& arch) {
    const std::string key = toolchain_index_key(source, arch);
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = loaded_.find({ctx, key});
        if (it != loaded_.end()) {
            count([](CacheStats& s) { ++s.memory_hits; });
            return {it->second, key, nullptr};
        }
    }
    return {nullptr, key, get_compiled_by_key(key, source, arch)};
}

KernelCache::LoadedPtr KernelCache::finish_load(CUcontext ctx, PendingLoad pending) {
    return pending.loaded ? pending.loaded : load_in(ctx, pending.key, pending.compiled);
}

KernelCache::LoadedPtr KernelCache::load_in(CUcontext ctx, const std::string& key,
                                            const CompiledPtr& compiled) {
    std::lock_guard<std::mutex> load_lock(load_mu_);
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = loaded_.find({ctx, key}); it != loaded_.end()) return it->second;
    }
    auto loaded = std::make_shared<const LoadedKernel>(compiled);
    count([](CacheStats& s) { ++s.loads; });
    std::lock_guard<std::mutex> lock(mu_);
    loaded_.emplace(ContextKey{ctx, key}, loaded);
    return loaded;
}

// The fast paths below cost a map lookup on a hit (no allocation): launch paths call them.
std::shared_ptr<const CompiledKernel> KernelCache::get_compiled(
    const std::string& fast_key, const std::function<codegen::KernelSource()>& make_source,
    const std::string& arch) {
    std::string full = arch + '\n' + fast_key;
    if (CompiledPtr hit = find_fast_compiled(full)) return hit;
    CompiledPtr compiled = get_compiled(make_source(), arch);
    std::lock_guard<std::mutex> lock(mu_);
    fast_compiled_.emplace(std::move(full), compiled);
    return compiled;
}

std::shared_ptr<const LoadedKernel> KernelCache::get_loaded(
    const std::string& fast_key, const std::function<codegen::KernelSource()>& make_source) {
    CUcontext ctx = current_context();
    if (LoadedPtr hit = find_fast_loaded(ctx, fast_key)) return hit;
    LoadedPtr loaded = get_loaded(make_source());
    std::lock_guard<std::mutex> lock(mu_);
    fast_loaded_.emplace(ContextKey{ctx, fast_key}, loaded);
    return loaded;
}

KernelCache::CompiledPtr KernelCache::find_fast_compiled(const std::string& arch_and_fast_key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fast_compiled_.find(arch_and_fast_key);
    if (it == fast_compiled_.end()) return nullptr;
    count([](CacheStats& s) { ++s.memory_hits; });
    return it->second;
}

KernelCache::LoadedPtr KernelCache::find_fast_loaded(CUcontext ctx, const std::string& fast_key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fast_loaded_.find({ctx, fast_key});
    if (it == fast_loaded_.end()) return nullptr;
    count([](CacheStats& s) { ++s.memory_hits; });
    return it->second;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<std::shared_ptr<const CompiledKernel>> KernelCache::get_compiled(const std::vector<Request>& requests,
                                                                             const std::string& arch,
                                                                             std::vector<double>* seconds) {
    std::vector<CompiledPtr> out(requests.size());
    std::vector<double> took(requests.size());
    std::vector<size_t> misses;  // memory hits start no thread
    for (size_t i = 0; i < requests.size(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        out[i] = find_fast_compiled(arch + '\n' + requests[i].fast_key);
        if (out[i]) took[i] = seconds_since(start);
        else misses.push_back(i);
    }
    run_at_once(misses.size(), [&](size_t m) {
        const size_t i = misses[m];
        const auto start = std::chrono::steady_clock::now();
        out[i] = get_compiled(requests[i].make_source(), arch);
        took[i] = seconds_since(start);
        std::lock_guard<std::mutex> lock(mu_);
        fast_compiled_.emplace(arch + '\n' + requests[i].fast_key, out[i]);
    });
    if (seconds) *seconds = std::move(took);
    return out;
}

std::vector<std::shared_ptr<const LoadedKernel>> KernelCache::get_loaded(const std::vector<Request>& requests,
                                                                         std::vector<double>* seconds) {
    CUcontext ctx = current_context();
    std::vector<LoadedPtr> out(requests.size());
    std::vector<double> took(requests.size());
    std::vector<size_t> misses;
    for (size_t i = 0; i < requests.size(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        out[i] = find_fast_loaded(ctx, requests[i].fast_key);
        if (out[i]) took[i] = seconds_since(start);
        else misses.push_back(i);
    }
    // All hits: no device query (and run_at_once starts no thread).
    const std::string arch = misses.empty() ? std::string() : current_device().arch();
    // The compiles at once; the loads (into ctx, this thread's context) one after another here.
    std::vector<PendingLoad> pending(misses.size());
    run_at_once(misses.size(), [&](size_t m) {
        const auto start = std::chrono::steady_clock::now();
        pending[m] = find_or_compile(ctx, requests[misses[m]].make_source(), arch);
        took[misses[m]] = seconds_since(start);
    });
    for (size_t m = 0; m < misses.size(); ++m) {
        const size_t i = misses[m];
        const auto start = std::chrono::steady_clock::now();
        out[i] = finish_load(ctx, std::move(pending[m]));
        took[i] += seconds_since(start);
        std::lock_guard<std::mutex> lock(mu_);
        fast_loaded_.emplace(ContextKey{ctx, requests[i].fast_key}, out[i]);
    }
    if (seconds) *seconds = std::move(took);
    return out;
}

CacheStats KernelCache::stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
}

void KernelCache::reset_stats() {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_ = CacheStats{};
}

std::vector<std::pair<std::string, std::shared_ptr<const CompiledKernel>>> KernelCache::compiled_kernels() const {
    std::vector<std::pair<std::string, std::shared_future<CompiledPtr>>> futures;
    {
        std::lock_guard<std::mutex> lock(mu_);
        futures.assign(compiled_.begin(), compiled_.end());
    }
    std::sort(futures.begin(), futures.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<std::string, CompiledPtr>> out;
    for (const auto& [key, future] : futures) {
        try {
            out.emplace_back(key, future.get());
        } catch (...) {
            // a compile that failed: its caller saw the error, and it is no kernel
        }
    }
    return out;
}

void KernelCache::clear_memory() {
    std::lock_guard<std::mutex> lock(mu_);
    compiled_.clear();
    fast_compiled_.clear();
    loaded_.clear();
    fast_loaded_.clear();
}

}  // namespace attnjit::runtime
