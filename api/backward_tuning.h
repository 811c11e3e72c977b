// The backward's autotuning (api/autotune.h, docs/autotune.md), for AttentionBackward with
// CompileOptions.autotune or ATTNJIT_AUTOTUNE: on the first launch of a shape bucket it takes a
// kernel bundle's recorded choice, else the tuning database's, else compiles the candidates
// (api::backward_candidates: tiles of the kernel that owns the key tiles) at once, times each
// whole backward on scratch gradients (never the caller's) and stores the fastest. Each
// candidate is an AttentionBackward of its own (CompileOptions.tile and mainloop), so the
// chosen one runs exactly as one built with that tile would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/attention_backward.h"
#include "api/tuned_buckets.h"

namespace attnjit::api {

class BackwardTuner {
public:
    // `key_default`: the configuration of the default backward's key-tile kernel (backward_fused,
    // or backward_dkdv in the two-pass backward). `options`: the default's, as given;
    // `deterministic`: the default's AttentionBackward::deterministic() (part of the key).
    BackwardTuner(AttentionSpec spec, CompileOptions options, KernelConfig key_default, bool deterministic,
                  std::string arch);

    // The backward to run this call with: nullptr where the default (the caller) is the choice,
    // or when the first launch of the bucket is captured into a CUDA graph (timing cannot run
    // there; a later launch tunes). A tuning that fails warns once and keeps the default.
    std::shared_ptr<const AttentionBackward> for_call(const LaunchArgs& fwd, const GradArgs& grads, Stream stream);

private:
    std::shared_ptr<const AttentionBackward> tune(const LaunchArgs& fwd, const GradArgs& grads, Stream stream,
                                                  const std::string& bucket);
    // The backward of candidate i (0: the default), built on this thread's GPU.
    std::shared_ptr<const AttentionBackward> build(size_t i, bool compile_only) const;

    AttentionSpec spec_;
    CompileOptions options_;
    std::string arch_;
    std::string kind_;  // tuning_kind: the key-tile kernel's, with its determinism
    std::vector<KernelConfig> candidates_;  // backward_candidates: the default first
    TunedBuckets<AttentionBackward> buckets_;  // nullptr: the default
};

}  // namespace attnjit::api
