#include "api/backward_tuning.h"

#include <chrono>
#include <sstream>
#include <algorithm>

#include "api/autotune.h"
#include "api/candidate_timing.h"
#include "api/tuned_buckets.h"
#include "codegen/kernel_config.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime/stream_buffer.h"
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

BackwardTuner::BackwardTuner(AttentionSpec spec, CompileOptions options, KernelConfig key_default, bool deterministic,
                             std::string arch)
    : spec_(std::move(spec)),
      options_(std::move(options)),
      arch_(std::move(arch)),
      kind_(tuning_kind(key_default.kind, deterministic)) {
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
    const runtime::DeviceInfo& device = runtime::current_device();
    std::shared_ptr<const AttentionBackward> recorded;  // nullptr: the default
    if (take_recorded_choice(spec_, kind_, device.name, arch_, bucket, candidates_, "backward", [&](const KernelConfig& c) {
            const size_t i = static_cast<size_t>(std::find(candidates_.begin(), candidates_.end(), c) - candidates_.begin());
            recorded = i == 0 ? nullptr : build(i, false);
        }))
        return recorded;
    const runtime::TuningKey key =
        tuning_key(spec_, kind_, device.name, arch_, runtime::KernelCache::global().toolchain(), candidates_);
    // Built here, in this thread's context, after every candidate compiled at once.
    const size_t n = candidates_.size();
    const std::vector<char> compiled = compile_at_once(candidates_, [&](size_t i) { (void)build(i, true); });
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
    record_tuning(key, bucket, candidates_[best], medians[best], medians[0], candidates_.size(), start, what.str());
    return best == 0 ? nullptr : backwards[best];
}

}  // namespace attnjit::api
