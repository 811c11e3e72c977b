// The steps of a tuning that the forward's tuner (api/attention.cpp) and the backward's
// (api/backward_tuning.cpp) share, in their order: a recorded choice, compiling the candidates,
// timing them with CUDA events as pick_fastest plans, keeping the result. api/autotune.h has
// the parts that need no GPU.
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

// The bucket's configuration as a linked or loaded kernel bundle recorded it (attnjit-aot
// --tuning; asked first, it needs no NVRTC) or else the tuning database: `take(config)` is called
// on it and the hit counted; a `take` that throws (the configuration does not load) passes on to
// the next, and false is returned when none was taken. `what` names the tuner in ATTNJIT_DEBUG
// lines. The database's key is tuning_key's for the `kind` kernel (tuning_kind) on GPU `device`
// of `arch`, with this process's NVRTC.
bool take_recorded_choice(const AttentionSpec& spec, const std::string& kind, const std::string& device,
                          const std::string& arch, const std::string& bucket,
                          const std::vector<KernelConfig>& candidates, const std::string& what,
                          const std::function<void(const KernelConfig&)>& take);

// `compile(i)` for every candidate (compile only: it needs no context), as many at once as there
// are cores: [i] is 1 where it returned, 0 where it threw (ATTNJIT_DEBUG says why), a candidate
// never to be chosen.
std::vector<char> compile_at_once(const std::vector<KernelConfig>& candidates,
                                  const std::function<void(size_t)>& compile);

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

// What a tuning found, kept: `chosen` (its median `seconds`) against the default's median
// `default_seconds` (infinite where it did not run), of `timed` candidates (schedules included),
// stored in the tuning database under `key` and `bucket`, counted (autotune_counts) and printed
// with ATTNJIT_DEBUG ("autotune: <what> <bucket>: ..."). `start`: when the tuning began (its time
// is recorded).
void record_tuning(const runtime::TuningKey& key, const std::string& bucket, const KernelConfig& chosen,
                   double seconds, double default_seconds, size_t timed, std::chrono::steady_clock::time_point start,
                   const std::string& what);

}  // namespace attnjit::api
