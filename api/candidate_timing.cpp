#include "api/candidate_timing.h"

#include <cmath>
#include <limits>

#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/stream_buffer.h"
#include "support/debug.h"

namespace attnjit::api {

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

void record_tuning(const runtime::TuningKey& key, const std::string& bucket, const std::vector<KernelConfig>& candidates,
                   size_t best, const std::vector<double>& medians, std::chrono::steady_clock::time_point start,
                   const std::string& what) {
    runtime::TuningResult result;
    result.tile = candidates[best].tile;
    result.mainloop = candidates[best].mainloop;
    result.seconds = medians[best];
    result.default_seconds = std::isfinite(medians[0]) ? medians[0] : -1.0;  // -1: it did not run (JSON has no infinity)
    result.candidates = static_cast<int>(candidates.size());
    result.tuning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    tuning_db().store(key, bucket, result);
    count_autotune_tuning();
    debug(1) << "autotune: " << what << " " << bucket << ": " << candidates.size() << " candidates in "
             << result.tuning_seconds << " s; " << candidates[best] << " " << 1e3 * result.seconds << " ms (default "
             << 1e3 * result.default_seconds << " ms)";
}

}  // namespace attnjit::api
