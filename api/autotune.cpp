#include "api/autotune.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>

#include "codegen/kernel_config.h"
#include "runtime/kernel_bundle.h"
#include "support/env.h"
#include "support/error.h"
#include "support/sha256.h"

namespace attnjit::api {

namespace {

int64_t next_power_of_two(int64_t n) {
    int64_t p = 1;
    while (p < n) p *= 2;
    return p;
}

double median_of(std::vector<double> times) {
    if (times.empty()) return std::numeric_limits<double>::infinity();
    std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2), times.end());
    return times[times.size() / 2];
}

}  // namespace

std::string shape_bucket(int64_t nq, int64_t nk) {
    const int64_t q = nq <= 16 ? std::max<int64_t>(nq, 1) : next_power_of_two(nq);
    return "q" + std::to_string(q) + "_k" + std::to_string(next_power_of_two(std::max<int64_t>(nk, 1)));
}

bool autotune_asked(const CompileOptions& options) { return options.autotune.value_or(env::autotune()); }

size_t pick_fastest(size_t n, const std::function<double(size_t)>& run_once, const TimingPlan& plan,
                    std::vector<double>* medians) {
    constexpr double kNever = std::numeric_limits<double>::infinity();
    // One timed run; a candidate that throws or gives no finite time is never chosen.
    auto timed = [&](size_t i) {
        const double t = run_once(i);
        return std::isfinite(t) && t >= 0 ? t : kNever;
    };
    std::vector<double> median(n, kNever);
    for (size_t i = 0; i < n; ++i) {
        try {
            for (int w = 0; w < plan.warmup; ++w) run_once(i);
            std::vector<double> times;
            for (int r = 0; r < std::max(plan.reps, 1); ++r) times.push_back(timed(i));
            median[i] = median_of(std::move(times));
        } catch (const std::exception&) {
            median[i] = kNever;
        }
    }
    // The confirmation round: the default and the fastest others, in turn.
    std::vector<size_t> order;
    for (size_t i = 1; i < n; ++i)
        if (std::isfinite(median[i])) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return median[a] < median[b]; });
    order.resize(std::min(order.size(), static_cast<size_t>(std::max(plan.finalists, 0))));
    if (n > 0 && std::isfinite(median[0])) order.insert(order.begin(), 0);
    const bool confirmed = order.size() > 1 && plan.confirm_rounds > 0;
    if (confirmed) {
        std::vector<std::vector<double>> times(order.size());
        std::vector<char> failed(order.size(), 0);
        for (int r = 0; r < plan.confirm_rounds; ++r)
            for (size_t f = 0; f < order.size(); ++f) {
                if (failed[f]) continue;
                try {
                    times[f].push_back(timed(order[f]));
                } catch (const std::exception&) {
                    failed[f] = 1;
                }
            }
        for (size_t f = 0; f < order.size(); ++f) median[order[f]] = failed[f] ? kNever : median_of(times[f]);
    }
    // After a confirmation round only its candidates compete: the others' first medians come
    // from another spell of the GPU.
    size_t best = 0;
    if (confirmed) {
        best = order.front();  // the default where it ran: ties keep it
        for (size_t i : order)
            if (median[i] < median[best]) best = i;
    } else {
        best = static_cast<size_t>(std::min_element(median.begin(), median.end()) - median.begin());
    }
    user_check(n > 0 && std::isfinite(median[best]))
        << "autotuning found no configuration that runs (" << n << " candidates); run without autotuning to see "
           "the default configuration's error";
    if (best != 0 && std::isfinite(median[0]) && median[best] > (1.0 - plan.margin) * median[0]) best = 0;
    if (medians) *medians = std::move(median);
    return best;
}

namespace {

// The sm80 / simt tiles worth timing: 64 or 128 query rows over warps of 16 or 32 rows each,
// 64 or 128 keys, one or two stages (FlashAttention-2's family). The other tiles candidate_configs
// lists are valid but seldom fast, and a cold compile of each (27 s for a score convolution's on
// the H100 machine's cores) would take tuning far past its budget.
bool worth_timing_off_sm90(const TileConfig& t) {
    return (t.block_m == 64 || t.block_m == 128) && (t.block_m == 16 * t.warps || t.block_m == 32 * t.warps) &&
           (t.block_n == 64 || t.block_n == 128) && t.stages <= 2;
}

// The backward's key-tile kernels: 32 to 128 query rows a step over 64 or 128 keys, one or two
// stages, with the warps the kernel's rules allow (backward_fused has a fixed warp grid).
bool backward_tile_worth_timing(const TileConfig& t) {
    return (t.block_m == 32 || t.block_m == 64 || t.block_m == 128) && (t.block_n == 64 || t.block_n == 128) &&
           t.stages <= 2;
}

}  // namespace

std::vector<KernelConfig> forward_candidates(const AttentionSpec& spec, const std::string& arch) {
    const std::vector<KernelConfig> all = codegen::candidate_configs(spec, KernelKind::forward, arch);
    std::vector<KernelConfig> kept{all.front()};  // the default first
    const bool sm90_default = all.front().mainloop == MainloopKind::sm90;
    for (size_t i = 1; i < all.size(); ++i) {
        const KernelConfig& c = all[i];
        if (sm90_default ? c.mainloop == MainloopKind::sm90 : worth_timing_off_sm90(c.tile)) kept.push_back(c);
    }
    if (sm90_default)
        kept.push_back(codegen::make_config(spec, KernelKind::forward, arch, std::nullopt, MainloopKind::sm80));
    return kept;
}

std::vector<KernelConfig> backward_candidates(const AttentionSpec& spec, const KernelConfig& key_default,
                                              const std::string& arch) {
    std::vector<KernelConfig> kept{key_default};
    const KernelKind kind = key_default.kind;
    if (key_default.mainloop == MainloopKind::sm90) {
        kept.push_back(codegen::make_config(spec, kind, arch, std::nullopt, MainloopKind::sm80));
        return kept;
    }
    for (const KernelConfig& c : codegen::candidate_configs(spec, kind, arch, MainloopKind::sm80)) {
        if (!backward_tile_worth_timing(c.tile) || std::find(kept.begin(), kept.end(), c) != kept.end()) continue;
        if (kind == KernelKind::backward_dkdv) try {  // backward_dq runs the same tile
                (void)codegen::make_config(spec, KernelKind::backward_dq, arch, c.tile, MainloopKind::sm80);
            } catch (const UserError&) {
                continue;
            }
        kept.push_back(c);
    }
    return kept;
}

std::vector<KernelConfig> schedule_variants(const KernelConfig& config) {
    std::vector<KernelConfig> out{config};
    for (int order = kOrderAuto; order <= kOrderLast; ++order)
        for (Sm90Grid grid : kSm90Grids) {
            KernelConfig c = config;
            c.schedule = CtaSchedule{order, grid};
            if (c.schedule != config.schedule && config_is_valid(c)) out.push_back(c);
        }
    return out;
}

double scheduled_seconds(double tile_seconds, const std::vector<double>& schedule_medians, size_t best) {
    if (best == 0 || best >= schedule_medians.size() || !(schedule_medians[0] > 0) ||
        !std::isfinite(schedule_medians[0]))
        return tile_seconds;
    return tile_seconds * schedule_medians[best] / schedule_medians[0];
}

std::string tuning_kind(KernelKind kind, bool deterministic) {
    const std::string name = kernel_kind_name(kind);
    return kind == KernelKind::backward_fused && !deterministic ? name + " nondeterministic" : name;
}

runtime::TuningKey tuning_key(const AttentionSpec& spec, const std::string& kind, const std::string& device,
                              const std::string& arch, const std::string& toolchain,
                              const std::vector<KernelConfig>& candidates) {
    std::ostringstream spec_text, listed;
    spec_text << spec << "\n" << spec.hash();
    for (const KernelConfig& c : candidates)
        for (const KernelConfig& v : schedule_variants(c)) listed << v << "\n";
    runtime::TuningKey key;
    key.spec = sha256_hex(spec_text.str());  // the printed form, as the fast key: two specs never share it
    key.kind = kind;
    key.device = device;
    key.arch = arch;
    key.toolchain = toolchain + (env::lineinfo() ? " -lineinfo" : "");  // other kernels, other timings
    key.generator_version = codegen::kGeneratorVersion;
    key.candidates = sha256_hex(listed.str());
    return key;
}

namespace {
std::atomic<uint64_t> tuned_count{0}, database_hit_count{0}, bundle_hit_count{0};
}  // namespace

AutotuneCounts autotune_counts() {
    return AutotuneCounts{tuned_count.load(), database_hit_count.load(), bundle_hit_count.load()};
}
void count_autotune_tuning() { ++tuned_count; }
void count_autotune_database_hit() { ++database_hit_count; }
void count_autotune_bundle_hit() { ++bundle_hit_count; }

std::optional<KernelConfig> candidate_named(const std::vector<KernelConfig>& candidates,
                                            const runtime::TuningResult& stored) {
    for (const KernelConfig& c : candidates)
        if (c.tile == stored.tile && c.mainloop == stored.mainloop)
            for (const KernelConfig& v : schedule_variants(c))
                if (v.schedule == stored.schedule) return v;
    return std::nullopt;
}

std::optional<KernelConfig> bundled_choice(const AttentionSpec& spec, const std::string& kind,
                                           const std::string& device, const std::string& arch,
                                           const std::string& bucket, const std::vector<KernelConfig>& candidates) {
    if (runtime::BundleRegistry::global().size() == 0) return std::nullopt;
    const auto hit = runtime::BundleRegistry::global().find_tuning(
        tuning_key(spec, kind, device, arch, /*toolchain=*/"", candidates), bucket);
    return hit ? candidate_named(candidates, *hit) : std::nullopt;
}

runtime::TuningDb& tuning_db() {
    static runtime::TuningDb* db = new runtime::TuningDb(runtime::TuningDb::root_from_env());
    return *db;
}

}  // namespace attnjit::api
