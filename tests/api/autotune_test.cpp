// Autotuning's parts that need no GPU (api/autotune.h): shape buckets, the choice of the
// fastest candidate (failures infinitely slow, ties to the default), the switch (option over
// environment), the tuning key, and that a compile-only Attention asked to tune builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "api/attnjit.h"
#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "dsl/example_specs.h"
#include "runtime/kernel_cache.h"

namespace attnjit::api {
namespace {

TEST(Autotune, ShapeBuckets) {
    EXPECT_EQ(shape_bucket(4096, 4096), "q4096_k4096");
    EXPECT_EQ(shape_bucket(4000, 4097), "q4096_k8192");
    EXPECT_EQ(shape_bucket(17, 100), "q32_k128");
    EXPECT_EQ(shape_bucket(1, 8191), "q1_k8192");   // decoding: Nq of 1 to 16 as it is
    EXPECT_EQ(shape_bucket(16, 1), "q16_k1");
    EXPECT_EQ(shape_bucket(0, 0), "q1_k1");
}

TEST(Autotune, PicksTheFastestMedianAndNeverAFailure) {
    // candidate 0: 3 ms; 1: throws; 2: 1 ms with one slow outlier; 3: NaN; 4: 2 ms
    std::vector<int> runs(5, 0);
    auto run_once = [&](size_t i) -> double {
        const int r = runs[i]++;
        switch (i) {
            case 0: return 3e-3;
            case 1: throw std::runtime_error("launch failed");
            case 2: return r == 3 ? 1.0 : 1e-3;
            case 3: return std::nan("");
            default: return 2e-3;
        }
    };
    std::vector<double> medians;
    EXPECT_EQ(pick_fastest(5, run_once, TimingPlan{2, 5, 3, 0, 0.02}, &medians), 2u);
    EXPECT_DOUBLE_EQ(medians[0], 3e-3);
    EXPECT_TRUE(std::isinf(medians[1]));
    EXPECT_DOUBLE_EQ(medians[2], 1e-3);
    EXPECT_TRUE(std::isinf(medians[3]));
    EXPECT_EQ(runs[0], 7);  // 2 warm-up runs, 5 timed
    EXPECT_EQ(runs[3], 7);  // a NaN is timed like any other run, and never chosen
    // Equal times: the lower index (the default is listed first).
    EXPECT_EQ(pick_fastest(3, [](size_t) { return 1e-3; }, TimingPlan{0, 3}), 0u);
    // Nothing runs: a UserError, not a pick.
    EXPECT_THROW(pick_fastest(2, [](size_t) -> double { throw std::runtime_error("no"); }, TimingPlan{0, 1}), UserError);
    EXPECT_THROW(pick_fastest(0, [](size_t) { return 1.0; }, TimingPlan{0, 1}), UserError);
}

TEST(Autotune, TheConfirmationRoundKeepsTheDefaultUnlessAnotherIsClearlyFaster) {
    // candidate 0 (the default) 1.00 ms; 1: 0.99 ms (within the margin); 2: 0.90 ms in its
    // first timing only (a lucky spell), 1.05 ms after; 3: 1.20 ms; 4: 0.95 ms throughout.
    std::vector<int> runs(5, 0);
    auto run_once = [&](size_t i) -> double {
        const int r = runs[i]++;
        switch (i) {
            case 0: return 1.00e-3;
            case 1: return 0.99e-3;
            case 2: return r < 7 ? 0.90e-3 : 1.05e-3;
            case 3: return 1.20e-3;
            default: return 0.95e-3;
        }
    };
    std::vector<double> medians;
    const TimingPlan plan{2, 5, 3, 10, 0.02};
    EXPECT_EQ(pick_fastest(5, run_once, plan, &medians), 4u);
    EXPECT_DOUBLE_EQ(medians[2], 1.05e-3) << "the finalists' medians are the confirmation's";
    EXPECT_DOUBLE_EQ(medians[3], 1.20e-3) << "not a finalist: its first median stays";
    EXPECT_EQ(runs[0], 2 + 5 + 10);
    EXPECT_EQ(runs[3], 2 + 5) << "only the default and the three fastest others are confirmed";
    // Without the 5%-faster candidate the best other is within 2% of the default: the default.
    auto near = [](size_t i) { return i == 0 ? 1.00e-3 : 0.99e-3; };
    EXPECT_EQ(pick_fastest(3, near, plan), 0u);
    EXPECT_EQ(pick_fastest(3, near, TimingPlan{2, 5, 3, 10, 0.0}), 1u) << "no margin: the fastest";
    // A default that does not run is no bar: the fastest of the others.
    auto no_default = [](size_t i) -> double {
        if (i == 0) throw std::runtime_error("no");
        return i == 1 ? 2e-3 : 1e-3;
    };
    EXPECT_EQ(pick_fastest(3, no_default, plan), 2u);
    // A finalist that fails in the confirmation round is not chosen.
    std::vector<int> calls(2, 0);
    auto fails_later = [&](size_t i) -> double {
        if (i == 1 && calls[1]++ >= 7) throw std::runtime_error("faulted");
        return i == 0 ? 1e-3 : 0.5e-3;
    };
    EXPECT_EQ(pick_fastest(2, fails_later, plan), 0u);
    // A slow spell during the confirmation round (every finalist at ~1 ms there) makes no winner
    // of a candidate that was not confirmed: its first median (0.93 ms) came from another spell.
    std::vector<int> seen(6, 0);
    auto slow_spell = [&](size_t i) -> double {
        const bool confirming = seen[i]++ >= 7;
        if (i == 0) return 1.00e-3;
        if (i == 5) return 0.93e-3;  // fifth fastest: not a finalist
        return confirming ? 1.00e-3 : (0.89 + 0.01 * static_cast<double>(i)) * 1e-3;
    };
    EXPECT_EQ(pick_fastest(6, slow_spell, plan), 0u);
    EXPECT_EQ(seen[5], 7) << "not confirmed";
}

TEST(Autotune, TheOptionOverridesTheEnvironment) {
    CompileOptions o;
    ::unsetenv("ATTNJIT_AUTOTUNE");
    EXPECT_FALSE(autotune_asked(o));
    ::setenv("ATTNJIT_AUTOTUNE", "1", 1);
    EXPECT_TRUE(autotune_asked(o));
    o.autotune = false;
    EXPECT_FALSE(autotune_asked(o));
    ::setenv("ATTNJIT_AUTOTUNE", "0", 1);
    o.autotune.reset();
    EXPECT_FALSE(autotune_asked(o));
    o.autotune = true;
    EXPECT_TRUE(autotune_asked(o));
    ::unsetenv("ATTNJIT_AUTOTUNE");
}

TEST(Autotune, TheKeyCoversSpecGpuAndCandidates) {
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128);
    const auto cs = codegen::candidate_configs(causal, KernelKind::forward, "sm_90a");
    const auto key = forward_tuning_key(causal, "NVIDIA H100", "sm_90a", "nvrtc 13", cs);
    EXPECT_EQ(key.id(), forward_tuning_key(dsl::example_spec("causal", DType::bf16, 128), "NVIDIA H100", "sm_90a",
                                           "nvrtc 13", cs)
                            .id());
    EXPECT_NE(key.id(), forward_tuning_key(dsl::example_spec("causal", DType::bf16, 64), "NVIDIA H100", "sm_90a",
                                           "nvrtc 13", cs)
                            .id());
    EXPECT_NE(key.id(), forward_tuning_key(causal, "NVIDIA H200", "sm_90a", "nvrtc 13", cs).id());
    const std::vector<KernelConfig> fewer(cs.begin(), cs.end() - 1);
    EXPECT_NE(key.id(), forward_tuning_key(causal, "NVIDIA H100", "sm_90a", "nvrtc 13", fewer).id());
    EXPECT_EQ(key.kind, "forward");
}

// Where the default is the sm90 loop, its configurations are timed with the sm80 loop's
// default only; elsewhere every candidate is.
TEST(Autotune, CandidatesOnHopperAreTheSm90LoopsAndTheSm80Default) {
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128);
    const auto all = codegen::candidate_configs(causal, KernelKind::forward, "sm_90a");
    const auto timed = forward_candidates(causal, "sm_90a");
    ASSERT_FALSE(timed.empty());
    EXPECT_EQ(timed.front(), all.front());  // the default first
    EXPECT_EQ(timed.front().mainloop, MainloopKind::sm90);
    int sm80 = 0;
    for (const KernelConfig& c : timed) {
        EXPECT_NE(std::find(all.begin(), all.end(), c), all.end()) << c;
        sm80 += c.mainloop == MainloopKind::sm80 ? 1 : 0;
    }
    EXPECT_EQ(sm80, 1);
    EXPECT_EQ(timed.back(), codegen::make_config(causal, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm80));
    EXPECT_LT(timed.size(), all.size() / 3);
}

// Where the default runs the sm80 loop (sm_80, or a score convolution on sm_90a), the default
// and FlashAttention-2's family of tiles: 64 or 128 rows over warps of 16 or 32 rows, 64 or 128
// keys, one or two stages; every one of them a configuration candidate_configs lists.
TEST(Autotune, CandidatesOnTheSm80LoopAreTheDefaultAndFlashAttention2Tiles) {
    AttentionSpec conv = dsl::example_spec("causal", DType::bf16, 128);
    conv.score_conv("theta", 6, 11, DType::f32);
    for (const auto& [spec, arch] : {std::pair{dsl::example_spec("causal", DType::bf16, 128), std::string("sm_80")},
                                     std::pair{conv, std::string("sm_90a")},
                                     std::pair{dsl::example_spec("causal", DType::bf16, 32), std::string("sm_90a")}}) {
        const auto all = codegen::candidate_configs(spec, KernelKind::forward, arch);
        const auto timed = forward_candidates(spec, arch);
        ASSERT_FALSE(timed.empty());
        EXPECT_EQ(timed.front(), all.front()) << arch << ": the default first";
        EXPECT_EQ(timed.front().mainloop, MainloopKind::sm80);
        EXPECT_GE(timed.size(), 8u) << arch;
        EXPECT_LE(timed.size(), 17u) << arch << ": a cold tuning compiles every one";
        for (size_t i = 1; i < timed.size(); ++i) {
            const TileConfig& t = timed[i].tile;
            EXPECT_NE(std::find(all.begin(), all.end(), timed[i]), all.end()) << timed[i];
            EXPECT_TRUE((t.block_m == 64 || t.block_m == 128) && (t.block_n == 64 || t.block_n == 128) &&
                        t.stages <= 2 && (t.block_m / t.warps == 16 || t.block_m / t.warps == 32))
                << timed[i];
            EXPECT_NE(timed[i], timed.front()) << "the default is listed once";
        }
    }
}

// The backward's candidates: the default's key-tile kernel first; where it runs the sm90 loop,
// the sm80 loop's default only; else the sm80 tiles of 32 to 128 query rows over 64 or 128 keys,
// one or two stages, of that kernel (backward_fused, or backward_dkdv) that candidate_configs
// lists, and in the two-pass backward only tiles backward_dq (which takes the same tile) accepts.
TEST(Autotune, BackwardCandidatesAreTheKeyKernelsDefaultAndItsSm80Tiles) {
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128).return_lse();
    const KernelConfig sm90 =
        codegen::make_config(causal, KernelKind::backward_fused, "sm_90a", std::nullopt, MainloopKind::sm90);
    const auto on_hopper = backward_candidates(causal, sm90, "sm_90a");
    ASSERT_EQ(on_hopper.size(), 2u);
    EXPECT_EQ(on_hopper[0], sm90);
    EXPECT_EQ(on_hopper[1],
              codegen::make_config(causal, KernelKind::backward_fused, "sm_90a", std::nullopt, MainloopKind::sm80));

    for (const auto& [spec, kind, arch] :
         {std::tuple{causal, KernelKind::backward_fused, std::string("sm_80")},
          std::tuple{dsl::example_spec("causal", DType::bf16, 32).return_lse(), KernelKind::backward_dkdv,
                     std::string("sm_90a")},
          std::tuple{dsl::example_spec("causal", DType::f16, 256).return_lse(), KernelKind::backward_fused,
                     std::string("sm_90a")}}) {
        SCOPED_TRACE(std::string(kernel_kind_name(kind)) + " on " + arch);
        const KernelConfig key = codegen::make_config(spec, kind, arch, std::nullopt, MainloopKind::sm80);
        const auto all = codegen::candidate_configs(spec, kind, arch, MainloopKind::sm80);
        const auto timed = backward_candidates(spec, key, arch);
        ASSERT_FALSE(timed.empty());
        EXPECT_EQ(timed.front(), key);
        EXPECT_GE(timed.size(), 3u);
        EXPECT_LE(timed.size(), 17u) << "a cold tuning compiles every one";
        for (size_t i = 1; i < timed.size(); ++i) {
            const TileConfig& t = timed[i].tile;
            EXPECT_EQ(timed[i].kind, kind);
            EXPECT_EQ(timed[i].mainloop, MainloopKind::sm80);
            EXPECT_NE(std::find(all.begin(), all.end(), timed[i]), all.end()) << timed[i];
            EXPECT_TRUE((t.block_m == 32 || t.block_m == 64 || t.block_m == 128) &&
                        (t.block_n == 64 || t.block_n == 128) && t.stages <= 2)
                << timed[i];
            EXPECT_NE(timed[i], timed.front()) << "the default is listed once";
            if (kind == KernelKind::backward_dkdv) {
                EXPECT_NO_THROW(codegen::make_config(spec, KernelKind::backward_dq, arch, t, MainloopKind::sm80)) << t;
            }
        }
    }
    // Their keys differ from the forward's of the same spec and GPU.
    const auto fwd = forward_tuning_key(causal, "GPU", "sm_90a", "nvrtc", forward_candidates(causal, "sm_90a"));
    const auto bwd = tuning_key(causal, KernelKind::backward_fused, "GPU", "sm_90a", "nvrtc", on_hopper);
    EXPECT_NE(fwd.id(), bwd.id());
    EXPECT_EQ(bwd.kind, "backward_fused");
    // The backward that adds dQ in any order is another kernel of the same tiles: another key.
    const auto fast = tuning_key(causal, tuning_kind(KernelKind::backward_fused, false), "GPU", "sm_90a", "nvrtc",
                                 on_hopper);
    EXPECT_EQ(fast.kind, "backward_fused nondeterministic");
    EXPECT_NE(fast.id(), bwd.id());
    EXPECT_EQ(tuning_kind(KernelKind::backward_dkdv, false), "backward_dkdv") << "the two-pass backward has one way";
}

// The schedules timed after the tiles (schedule_variants): the kernel's own first, then every CTA
// order and, on the sm90 loop, every grid, each a valid configuration of the same tile; none
// for kernels without a launch-time schedule (the backward's, the simt loop's).
TEST(Autotune, ScheduleVariantsAreEveryOrderAndOnHopperEveryGrid) {
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128);
    const KernelConfig sm90 = codegen::make_config(causal, KernelKind::forward, "sm_90a");
    const KernelConfig sm80 = codegen::make_config(causal, KernelKind::forward, "sm_80");
    ASSERT_EQ(sm90.mainloop, MainloopKind::sm90);
    for (const auto& [config, expected] : {std::pair{sm90, size_t{(kOrderLast + 1) * 3}}, std::pair{sm80, size_t{kOrderLast + 1}}}) {
        const auto variants = schedule_variants(config);
        ASSERT_EQ(variants.size(), expected) << config;
        EXPECT_EQ(variants.front(), config) << "the kernel's own schedule first";
        for (size_t i = 0; i < variants.size(); ++i) {
            KernelConfig same_tile = variants[i];
            same_tile.schedule = CtaSchedule{};
            EXPECT_EQ(same_tile, config) << variants[i] << ": only the schedule differs";
            EXPECT_TRUE(config_is_valid(variants[i])) << variants[i];
            EXPECT_EQ(codegen::config_id(variants[i]), codegen::config_id(config)) << "the same compiled kernel";
            for (size_t j = 0; j < i; ++j) EXPECT_NE(variants[i], variants[j]) << variants[i] << " twice";
        }
    }
    const AttentionSpec f32 = dsl::example_spec("causal", DType::f32, 64);
    EXPECT_EQ(schedule_variants(codegen::make_config(f32, KernelKind::forward, "sm_80")).size(), 1u) << "simt";
    EXPECT_EQ(schedule_variants(codegen::make_config(causal, KernelKind::backward_fused, "sm_80")).size(), 1u);
}

// The recorded time of a schedule: the tile's own time where the kernel's own schedule stayed,
// else scaled by the schedule's gain within its round (a round on a hotter GPU shifts both alike).
TEST(Autotune, AScheduleGainScalesTheTilesTime) {
    EXPECT_DOUBLE_EQ(scheduled_seconds(2.0, {5.0, 4.0, 6.0}, 0), 2.0);
    EXPECT_DOUBLE_EQ(scheduled_seconds(2.0, {5.0, 4.0, 6.0}, 1), 1.6);
    EXPECT_DOUBLE_EQ(scheduled_seconds(2.0, {5.0}, 0), 2.0);
    const double never = std::numeric_limits<double>::infinity();
    EXPECT_DOUBLE_EQ(scheduled_seconds(2.0, {never, 4.0}, 1), 2.0) << "no finite round to scale by";
}

// A stored result names a schedule too: candidate_named gives that schedule of the named tile, and
// nothing where the tile cannot take it (a grid named for an sm80 tile) or no candidate has the tile.
TEST(Autotune, AStoredScheduleIsTakenOnlyWhereItsTileTakesIt) {
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128);
    const auto candidates = forward_candidates(causal, "sm_90a");
    const KernelConfig sm80 = candidates.back();
    ASSERT_EQ(sm80.mainloop, MainloopKind::sm80);
    runtime::TuningResult stored;
    stored.tile = sm80.tile;
    stored.mainloop = sm80.mainloop;
    stored.schedule = CtaSchedule{kOrderChunked1, Sm90Grid::by_size};
    const auto named = candidate_named(candidates, stored);
    ASSERT_TRUE(named);
    EXPECT_EQ(named->schedule, stored.schedule);
    EXPECT_EQ(named->tile, sm80.tile);
    stored.schedule.grid = Sm90Grid::persistent;
    EXPECT_FALSE(candidate_named(candidates, stored)) << "an sm80 tile has no grid to choose";
    stored.tile.block_m = 48;
    stored.schedule = CtaSchedule{};
    EXPECT_FALSE(candidate_named(candidates, stored));
}

// CompileOptions.schedule pins the forward's schedule (no tuning then); where the kernel has no
// such choice it is the user's mistake, told before anything compiles, and AttentionBackward
// refuses it.
TEST(Autotune, APinnedScheduleIsCheckedAndKept) {
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128);
    CompileOptions o;
    o.arch = "sm_90a";
    o.schedule = CtaSchedule{kOrderChunked4, Sm90Grid::per_item};
    const Attention pinned(causal, o);
    EXPECT_EQ(pinned.config().schedule, *o.schedule);
    CompileOptions own = o;
    own.schedule.reset();
    EXPECT_EQ(pinned.source().source, Attention(causal, own).source().source) << "the schedule reached the source";
    o.arch = "sm_80";
    auto kernels_asked = [] {
        const runtime::CacheStats s = runtime::KernelCache::global().stats();
        return s.memory_hits + s.bundle_hits + s.disk_hits + s.misses;
    };
    const uint64_t before = kernels_asked();
    try {
        Attention a(causal, o);
        ADD_FAILURE() << "a grid for the sm80 loop was accepted";
    } catch (const UserError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("CompileOptions.schedule (cta_order=chunked4 grid=per_item)"), std::string::npos) << what;
        EXPECT_EQ(what.find("grid=per_item", what.find(')')), std::string::npos) << "the schedule told twice: " << what;
        EXPECT_NE(what.find("sm90 forward only"), std::string::npos) << what;
    }
    EXPECT_EQ(kernels_asked(), before) << "a kernel was prepared before the schedule's check";
    o.schedule = CtaSchedule{kOrderPerHead, Sm90Grid::by_size};
    EXPECT_EQ(Attention(causal, o).config().schedule.order, kOrderPerHead);
    o.schedule = CtaSchedule{kOrderLast + 1, Sm90Grid::by_size};
    EXPECT_THROW(Attention(causal, o), UserError);
    o.schedule = CtaSchedule{kOrderPerHead, Sm90Grid::by_size};
    try {
        AttentionBackward b(AttentionSpec(causal).return_lse(), o);
        ADD_FAILURE() << "AttentionBackward took a schedule";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("leave it unset"), std::string::npos) << e.what();
    }
}

// Without a GPU there is nothing to time: asked to tune, a compile-only Attention is the default one.
TEST(Autotune, ACompileOnlyAttentionBuildsWithTheDefault) {
    CompileOptions o;
    o.arch = "sm_90a";
    o.autotune = true;
    const AttentionSpec causal = dsl::example_spec("causal", DType::bf16, 128);
    const Attention a(causal, o);
    o.autotune.reset();
    EXPECT_EQ(a.config(), Attention(causal, o).config());
}

}  // namespace
}  // namespace attnjit::api
