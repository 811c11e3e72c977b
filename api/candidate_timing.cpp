#include "api/candidate_timing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <thread>

#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/kernel_cache.h"
#include "runtime/stream_buffer.h"
#include "support/at_once.h"
#include "support/debug.h"

namespace attnjit::api {

bool take_recorded_choice(const AttentionSpec& spec, const std::string& kind, const std::string& device,
                          const std::string& arch, const std::string& bucket,
                          const std::vector<KernelConfig>& candidates, const std::string& what,
                          const std::function<void(const KernelConfig&)>& take) {
    auto try_one = [&](const std::optional<KernelConfig>& c, const char* from, void (*count)()) {
        if (!c) return false;
        try {
            take(*c);
        } catch (const std::exception& e) {
            debug(1) << "autotune: " << what << " " << bucket << ": " << *c << " from " << from << " does not load ("
                     << e.what() << ")";
            return false;
        }
        count();
        debug(1) << "autotune: " << what << " " << bucket << " from " << from << ": " << *c;
        return true;
    };
    if (try_one(bundled_choice(spec, kind, device, arch, bucket, candidates), "a kernel bundle",
                count_autotune_bundle_hit))
        return true;
    // Only now the compiler's identity (the database's key names it): a bundle's choice needs none.
    const auto hit = tuning_db().find(
        tuning_key(spec, kind, device, arch, runtime::KernelCache::global().toolchain(), candidates), bucket);
    return try_one(hit ? candidate_named(candidates, *hit) : std::nullopt, "the tuning database",
                   count_autotune_database_hit);
}

std::vector<char> compile_at_once(const std::vector<KernelConfig>& candidates,
                                  const std::function<void(size_t)>& compile) {
    std::vector<char> compiled(candidates.size(), 0);
    const size_t at_once = std::max(1u, std::thread::hardware_concurrency());
    for (size_t first = 0; first < candidates.size(); first += at_once)
        run_at_once(std::min(at_once, candidates.size() - first), [&](size_t j) {
            const size_t i = first + j;
            try {
                compile(i);
                compiled[i] = 1;
            } catch (const std::exception& e) {
                debug(1) << "autotune: " << candidates[i] << " does not compile: " << e.what();
            }
        });
    return compiled;
}

std::unique_lock<std::mutex> lock_timing() {
    static std::mutex mu;
    return std::unique_lock<std::mutex>(mu);
}

size_t time_candidates(size_t n, const std::function<bool(size_t)>& launch, Stream stream,
                       std::vector<double>& medians) {
    const auto cu_stream = static_cast<CUstream>(stream);
    constexpr size_t kFlushBytes = size_t{256} << 20;
    const runtime::StreamBuffer flush(kFlushBytes, cu_stream);
    const auto& cu = runtime::cuda();
    CUevent events[2] = {nullptr, nullptr};
    struct Destroy {
        CUevent* e;
        ~Destroy() {
            for (int i = 0; i < 2; ++i)
                if (e[i]) runtime::cuda().cuEventDestroy(e[i]);
        }
    } destroy{events};
    for (CUevent& e : events) runtime::check_cu(cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    auto run_once = [&](size_t i) -> double {
        flush.zero(0, kFlushBytes);
        runtime::check_cu(cu.cuEventRecord(events[0], cu_stream), "cuEventRecord");
        if (!launch(i)) return std::numeric_limits<double>::infinity();
        runtime::check_cu(cu.cuEventRecord(events[1], cu_stream), "cuEventRecord");
        runtime::check_cu(cu.cuEventSynchronize(events[1]), "cuEventSynchronize");
        float ms = 0;
        runtime::check_cu(cu.cuEventElapsedTime(&ms, events[0], events[1]), "cuEventElapsedTime");
        return 1e-3 * ms;
    };
    const size_t best = pick_fastest(n, run_once, TimingPlan{}, &medians);
    runtime::synchronize("cuCtxSynchronize after autotuning");
    return best;
}

void record_tuning(const runtime::TuningKey& key, const std::string& bucket, const KernelConfig& chosen,
                   double seconds, double default_seconds, size_t timed, std::chrono::steady_clock::time_point start,
                   const std::string& what) {
    runtime::TuningResult result;
    result.tile = chosen.tile;
    result.mainloop = chosen.mainloop;
    result.schedule = chosen.schedule;
    result.seconds = seconds;
    result.default_seconds = std::isfinite(default_seconds) ? default_seconds : -1.0;  // -1: it did not run (JSON has no infinity)
    result.candidates = static_cast<int>(timed);
    result.tuning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tuning_db().store(key, bucket, result);
    count_autotune_tuning();
    debug(1) << "autotune: " << what << " " << bucket << ": " << timed << " candidates in " << result.tuning_seconds
             << " s; " << chosen << " " << 1e3 * result.seconds << " ms (default " << 1e3 * result.default_seconds
             << " ms)";
}

}  // namespace attnjit::api
