#include "api/backward_tuning.h"

#include <chrono>
#include <sstream>
#include <thread>

#include "api/autotune.h"
#include "api/candidate_timing.h"
#include "api/tuned_buckets.h"
#include "codegen/kernel_config.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime/stream_buffer.h"
#include "support/at_once.h"
#include "support/debug.h"

namespace attnjit::api {

namespace {

// Bytes a view with these shape and strides reaches (0 when it has no element).
size_t extent_bytes(const TensorView& t) {
    if (t.numel() == 0) return 0;
    int64_t last = 0;
    for (size_t d = 0; d < t.shape.size(); ++d) last += (t.shape[d] - 1) * t.strides[d];
    return static_cast<size_t>(last + 1) * static_cast<size_t>(dtype_size(t.dtype));
}

}  // namespace

BackwardTuner::BackwardTuner(AttentionSpec spec, CompileOptions options, KernelConfig key_default, std::string arch)
    : spec_(std::move(spec)), options_(std::move(options)), arch_(std::move(arch)) {
    options_.autotune = false;  // the candidates are plain backwards
    candidates_ = backward_candidates(spec_, key_default, arch_);
}

std::shared_ptr<const AttentionBackward> BackwardTuner::build(size_t i, bool compile_only) const {
    CompileOptions o = options_;
    if (i > 0) {  // the default is built as given: on sm_90a it may take the sm90 loop
        o.tile = candidates_[i].tile;
        o.mainloop = candidates_[i].mainloop;
    }
    if (compile_only) o.arch = arch_;
    return std::make_shared<const AttentionBackward>(spec_, o);
}

std::shared_ptr<const AttentionBackward> BackwardTuner::for_call(const LaunchArgs& fwd, const GradArgs& grads,
                                                                 Stream stream) {
    const std::string bucket = shape_bucket(fwd.q.shape[2], fwd.k.shape[2]);
    return buckets_.choice(
        bucket, stream, "AttentionBackward", [&] { return tune(fwd, grads, stream, bucket); },
        [] { return std::shared_ptr<const AttentionBackward>(); });
}

std::shared_ptr<const AttentionBackward> BackwardTuner::tune(const LaunchArgs& fwd, const GradArgs& grads,
                                                             Stream stream, const std::string& bucket) {
    const auto start = std::chrono::steady_clock::now();
    const KernelKind kind = candidates_.front().kind;
    const runtime::DeviceInfo& device = runtime::current_device();
    auto chosen = [&](const KernelConfig& c) -> std::shared_ptr<const AttentionBackward> {
        if (c == candidates_.front()) return nullptr;
        for (size_t i = 1; i < candidates_.size(); ++i)
            if (candidates_[i] == c) return build(i, false);
        return nullptr;
    };
    // A bundle's recorded choice first (no NVRTC needed), then the database's. nullopt: none, or
    // it does not load.
    auto take = [&](const std::optional<KernelConfig>& c, const char* from, void (*count)())
        -> std::optional<std::shared_ptr<const AttentionBackward>> {
        if (!c) return std::nullopt;
        try {
            auto b = chosen(*c);
            count();
            debug(1) << "autotune: backward " << bucket << " from " << from << ": " << *c;
            return b;
        } catch (const std::exception& e) {
            debug(1) << "autotune: the backward " << *c << " from " << from << " does not load (" << e.what() << ")";
            return std::nullopt;
        }
    };
    if (auto b = take(bundled_choice(spec_, kind, device.name, arch_, bucket, candidates_), "a kernel bundle",
                      count_autotune_bundle_hit))
        return *b;
    const runtime::TuningKey key =
        tuning_key(spec_, kind, device.name, arch_, runtime::KernelCache::global().toolchain(), candidates_);
    const auto hit = tuning_db().find(key, bucket);
    if (auto b = take(hit ? candidate_named(candidates_, *hit) : std::nullopt, "the tuning database",
                      count_autotune_database_hit))
        return *b;
    // Every candidate compiled at once (compile only: no context needed), then built here, in
    // this thread's context, from the memory cache. One that fails is never chosen.
    const size_t n = candidates_.size();
    std::vector<char> compiled(n, 0);
    const size_t at_once = std::max(1u, std::thread::hardware_concurrency());
    for (size_t first = 0; first < n; first += at_once)
        run_at_once(std::min(at_once, n - first), [&](size_t j) {
            try {
                (void)build(first + j, true);
                compiled[first + j] = 1;
            } catch (const std::exception& e) {
                debug(1) << "autotune: backward " << candidates_[first + j] << " does not compile: " << e.what();
            }
        });
    std::vector<std::shared_ptr<const AttentionBackward>> backwards(n);
    for (size_t i = 0; i < n; ++i) {
        if (!compiled[i]) continue;
        try {
            backwards[i] = build(i, false);
        } catch (const std::exception& e) {
            debug(1) << "autotune: backward " << candidates_[i] << " does not load: " << e.what();
        }
    }
    const auto timing = lock_timing();
    // Scratch gradients with the caller's shapes and strides: the caller's are never written.
    const auto cu_stream = static_cast<CUstream>(stream);
    std::vector<std::unique_ptr<runtime::StreamBuffer>> buffers;
    auto scratch_of = [&](const TensorView& t) {
        buffers.push_back(std::make_unique<runtime::StreamBuffer>(extent_bytes(t), cu_stream));
        TensorView s = t;
        s.data = buffers.back()->data();
        return s;
    };
    GradArgs scratch{grads.d_o, scratch_of(grads.dq), scratch_of(grads.dk), scratch_of(grads.dv), {}};
    for (const auto& [name, t] : grads.grads) scratch.grads[name] = scratch_of(t);
    std::vector<double> medians;
    const size_t best = time_candidates(
        n,
        [&](size_t i) {
            if (!backwards[i]) return false;
            (*backwards[i])(fwd, scratch, stream);
            return true;
        },
        stream, medians);
    std::ostringstream what;
    what << spec_ << " backward";
    record_tuning(key, bucket, candidates_, best, medians, start, what.str());
    return best == 0 ? nullptr : backwards[best];
}

}  // namespace attnjit::api
