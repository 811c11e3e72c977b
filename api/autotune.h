// Runtime autotuning of tile configurations (issue 12; docs/autotune.md): the forward's here and
// in api/attention.cpp, the backward's in api/backward_tuning.h. Opt-in:
// CompileOptions.autotune, or ATTNJIT_AUTOTUNE=1. On the first launch for a shape bucket,
// Attention compiles every candidate configuration (codegen::candidate_configs) at once, times
// each on scratch outputs (never the caller's), keeps the fastest, and stores it in the tuning
// database (runtime/tuning_db.h), from which later processes take it without timing again.
// This file holds the parts that do not need a GPU; api/candidate_timing.h the timing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/attention.h"
#include "runtime/tuning_db.h"

namespace attnjit::api {

// The shape buckets a tuning result holds for: Nq of 1 to 16 as they are (decoding steps),
// larger Nq and every Nk rounded up to a power of two. Named "q<Nq>_k<Nk>": q4096_k4096,
// q1_k8192.
std::string shape_bucket(int64_t nq, int64_t nk);

// Whether `options` ask for autotuning: CompileOptions.autotune when set, else ATTNJIT_AUTOTUNE.
bool autotune_asked(const CompileOptions& options);

// How pick_fastest times: `warmup` untimed runs and the median of `reps` timed ones of each
// candidate; then the default (index 0) and the `finalists` fastest others again, one run of
// each in turn for `confirm_rounds` rounds (so a slow spell of the GPU hits them all alike),
// and a candidate replaces the default only when its median there is at least `margin` below
// the default's: a tuned kernel is never slower than the default by more than the noise.
struct TimingPlan {
    int warmup = 2;
    int reps = 5;
    int finalists = 3;
    int confirm_rounds = 10;
    double margin = 0.02;
};

// The fastest of n candidates by `run_once(i)` (seconds of one run of candidate i), as `plan`
// says. A candidate whose run throws or gives no finite time is infinitely slow. Ties go to the
// lower index (the default is first). After a confirmation round only its candidates can win.
// `medians`, when given, gets each candidate's median (the confirmation round's for the
// finalists). Throws UserError when none ran.
size_t pick_fastest(size_t n, const std::function<double(size_t)>& run_once, const TimingPlan& plan,
                    std::vector<double>* medians = nullptr);

// The candidates timed for a forward of `spec` on `arch`: codegen::candidate_configs (the
// default first), and where the default runs the sm90 loop, its sm90 configurations and the
// sm80 loop's default only (on the H100 / H200 the sm80 loop ran 1.2-1.7x slower than the
// sm90 loop: timing its ~140 tiles would cost most of a cold tuning for nothing).
std::vector<KernelConfig> forward_candidates(const AttentionSpec& spec, const std::string& arch);

// The candidates timed for a backward of `spec` on `arch`, as configurations of the kernel that
// owns the key tiles (`key_default`: the default backward's backward_fused, or backward_dkdv in
// the two-pass backward), the default first. Then the sm80 tiles of 32, 64 or 128 query rows a
// step over 64 or 128 keys, one or two stages, that make_config accepts for that kernel (its
// rules fix the warps: backward_fused has one warp grid) and, in the two-pass backward, for
// backward_dq, which takes the same tile; where the default runs the sm90 loop, instead the
// sm80 loop's default only (the sm90 backward's tile is fixed).
std::vector<KernelConfig> backward_candidates(const AttentionSpec& spec, const KernelConfig& key_default,
                                              const std::string& arch);

// The launch-time schedules of `config` (kernel_config.h's CtaSchedule: every CTA order and, on
// the sm90 loop, every grid that why_config_invalid accepts), `config` first: the same compiled
// kernel launched otherwise. A tuner times them with the fastest tile, none compiled again. Just
// `config` for a kernel with no schedule to choose (the backward's, the simt loop's).
std::vector<KernelConfig> schedule_variants(const KernelConfig& config);

// The time to record for the schedule `best` of a tile that took `tile_seconds` among the tiles,
// from `schedule_medians` (the tile's schedules timed after, the kernel's own first): the
// schedules ran later, on a GPU that may be hotter, so their gain over the kernel's own schedule
// in the same round scales the tile's time. The record's default / tuned then compares times
// taken alike.
double scheduled_seconds(double tile_seconds, const std::vector<double>& schedule_medians, size_t best);

// The name a tuning key gives the tuned kernel: its kind, and for a backward_fused that adds dQ
// in any order (CompileOptions.deterministic = false) "backward_fused nondeterministic": another
// kernel of the same tiles, timed apart.
std::string tuning_kind(KernelKind kind, bool deterministic = true);

// The tuning database's key of a `kind` kernel (tuning_kind: the forward, or a backward's
// key-tile kernel): the spec, the GPU, the toolchain and generator, and the candidate
// configurations with their schedule_variants (their printed forms, hashed).
runtime::TuningKey tuning_key(const AttentionSpec& spec, const std::string& kind, const std::string& device,
                              const std::string& arch, const std::string& toolchain,
                              const std::vector<KernelConfig>& candidates);
inline runtime::TuningKey tuning_key(const AttentionSpec& spec, KernelKind kind, const std::string& device,
                                     const std::string& arch, const std::string& toolchain,
                                     const std::vector<KernelConfig>& candidates) {
    return tuning_key(spec, tuning_kind(kind), device, arch, toolchain, candidates);
}
inline runtime::TuningKey forward_tuning_key(const AttentionSpec& spec, const std::string& device,
                                             const std::string& arch, const std::string& toolchain,
                                             const std::vector<KernelConfig>& candidates) {
    return tuning_key(spec, KernelKind::forward, device, arch, toolchain, candidates);
}

// The configuration among `candidates` and their schedule_variants that a stored result names
// (its tile, main loop and schedule); nullopt when none does: a choice made over another list is
// not taken.
std::optional<KernelConfig> candidate_named(const std::vector<KernelConfig>& candidates,
                                            const runtime::TuningResult& stored);

// The configuration a loaded or linked kernel bundle recorded (attnjit-aot --tuning) for the
// `kind` kernel of `spec` (the forward, or a backward's key-tile kernel) in `bucket` on GPU
// `device` of `arch`, among `candidates` (forward_candidates, backward_candidates); nullopt when
// no bundle has one. Needs no NVRTC (the toolchain is not matched: runtime::BundleTuning).
std::optional<KernelConfig> bundled_choice(const AttentionSpec& spec, const std::string& kind,
                                           const std::string& device, const std::string& arch,
                                           const std::string& bucket, const std::vector<KernelConfig>& candidates);
inline std::optional<KernelConfig> bundled_choice(const AttentionSpec& spec, KernelKind kind, const std::string& device,
                                                  const std::string& arch, const std::string& bucket,
                                                  const std::vector<KernelConfig>& candidates) {
    return bundled_choice(spec, tuning_kind(kind), device, arch, bucket, candidates);
}

// The process's tuning database (TuningDb::root_from_env()).
runtime::TuningDb& tuning_db();

// How many buckets this process tuned (timed), and how many it took from the database or from
// a kernel bundle's recorded choices.
struct AutotuneCounts {
    uint64_t tuned = 0;
    uint64_t database_hits = 0;
    uint64_t bundle_hits = 0;
};
AutotuneCounts autotune_counts();
void count_autotune_tuning();
void count_autotune_database_hit();
void count_autotune_bundle_hit();

}  // namespace attnjit::api
