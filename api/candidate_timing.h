// The GPU half of autotuning (api/autotune.h has the rest): times an autotuner's candidates
// with CUDA events, as pick_fastest plans, for the forward (api/attention.cpp) and the
// backward (api/attention_backward.cpp) alike.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api/attention.h"
#include "runtime/tuning_db.h"

namespace attnjit::api {

// The process's timing lock: one bucket is timed at a time (another's kernels on the GPU would
// skew it). Take it before allocating the scratch buffers, so that buckets waiting for it hold
// no GPU memory.
std::unique_lock<std::mutex> lock_timing();

// The fastest of n candidates (pick_fastest with TimingPlan{}): one run of candidate i is
// `launch(i)` on `stream` between two CUDA events, after a buffer larger than any L2 is cleared
// (no run starts with a warm cache). `launch` returns false for a candidate that cannot run
// (infinitely slow) and may throw (likewise). `medians` gets each candidate's median. Then
// the context is synchronized: a candidate that faulted leaves it unusable, and that is an
// error here (a CudaError), not a result to store. Hold lock_timing().
size_t time_candidates(size_t n, const std::function<bool(size_t)>& launch, Stream stream,
                       std::vector<double>& medians);

// What a tuning found, kept: candidate `best` of `candidates` (the default first) with the
// medians time_candidates gave, stored in the tuning database under `key` and `bucket`, counted
// (autotune_counts) and printed with ATTNJIT_DEBUG ("autotune: <what> <bucket>: ..."). `start`:
// when the tuning began (its time is recorded).
void record_tuning(const runtime::TuningKey& key, const std::string& bucket, const std::vector<KernelConfig>& candidates,
                   size_t best, const std::vector<double>& medians, std::chrono::steady_clock::time_point start,
                   const std::string& what);

}  // namespace attnjit::api
