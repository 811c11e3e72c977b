// candidate_configs: the configurations an autotuner may try, as make_config and
// why_config_invalid decide them (one source of truth for what fits).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "codegen/kernel_config.h"
#include "common/expect_error.h"
#include "dsl/dsl.h"
#include "dsl/example_specs.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

bool has_mainloop(const std::vector<KernelConfig>& cs, MainloopKind m) {
    return std::any_of(cs.begin(), cs.end(), [m](const KernelConfig& c) { return c.mainloop == m; });
}

// Every listed config is the default or one make_config makes again from its tile; each is
// valid on the arch and listed once.
void expect_consistent(const AttentionSpec& spec, KernelKind kind, const std::string& arch,
                       const std::vector<KernelConfig>& cs) {
    SCOPED_TRACE(kernel_kind_name(kind) + std::string(" on ") + arch);
    ASSERT_FALSE(cs.empty());
    EXPECT_EQ(cs.front(), make_config(spec, kind, arch));
    for (size_t i = 0; i < cs.size(); ++i) {
        EXPECT_NO_THROW(check_config(cs[i], arch)) << cs[i];
        EXPECT_EQ(std::count(cs.begin(), cs.end(), cs[i]), 1) << cs[i];
        if (i > 0) EXPECT_EQ(make_config(spec, kind, arch, cs[i].tile), cs[i]) << cs[i];
    }
}

TEST(CandidateConfigs, AreTheTilesMakeConfigAccepts) {
    for (const std::string name : {"causal", "softcap_sliding_window", "bias"})
        for (DType dt : {DType::bf16, DType::f32})
            for (int d : {64, 128, 256})
                for (const std::string arch : {"sm_80", "sm_90a"})
                    for (KernelKind kind : {KernelKind::forward, KernelKind::backward_fused, KernelKind::backward_dq}) {
                        const AttentionSpec spec = example_spec(name, dt, d);
                        if (kind == KernelKind::backward_fused && dt == DType::f32) {  // no such kernel
                            EXPECT_USER_ERROR(candidate_configs(spec, kind, arch),
                                              "the fast backward needs the sm80 main loop");
                            continue;
                        }
                        const std::vector<KernelConfig> cs = candidate_configs(spec, kind, arch);
                        expect_consistent(spec, kind, arch, cs);
                        if (dt == DType::f32) {
                            EXPECT_TRUE(std::all_of(cs.begin(), cs.end(), [](const KernelConfig& c) {
                                return c.mainloop == MainloopKind::simt;
                            }));
                        }
                    }
}

TEST(CandidateConfigs, ListBothForwardLoopsOnSm90a) {
    const AttentionSpec causal = example_spec("causal", DType::bf16, 128);
    const auto hopper = candidate_configs(causal, KernelKind::forward, "sm_90a");
    EXPECT_EQ(hopper.front().mainloop, MainloopKind::sm90);
    EXPECT_TRUE(has_mainloop(hopper, MainloopKind::sm80));
    // 128 x 128 in two and three stages (162 and 226 KiB); not four (290 KiB).
    const auto has = [&](TileConfig t) {
        return std::any_of(hopper.begin(), hopper.end(), [&](const KernelConfig& c) {
            return c.mainloop == MainloopKind::sm90 && c.tile == t;
        });
    };
    EXPECT_TRUE(has(TileConfig{128, 128, kSm90Warps, 2}));
    EXPECT_TRUE(has(TileConfig{128, 128, kSm90Warps, 3}));
    EXPECT_FALSE(has(TileConfig{128, 128, kSm90Warps, 4}));
    EXPECT_FALSE(has(TileConfig{192, 128, 16, 2}));  // three consumers: tile head dims of 64 only
    EXPECT_TRUE(has(TileConfig{128, 176, kSm90Warps, 2}));
    // 192 rows and 80 or 176 keys: sm90 tiles only (the sm80 loop's tests run neither).
    for (const KernelConfig& c : hopper)
        if (c.mainloop == MainloopKind::sm80) {
            EXPECT_NE(c.tile.block_m, 192) << c;
            EXPECT_TRUE(c.tile.block_n != 80 && c.tile.block_n != 176) << c;
        }
    const auto d64 = candidate_configs(example_spec("causal", DType::bf16, 64), KernelKind::forward, "sm_90a");
    EXPECT_EQ(d64.front().tile, (TileConfig{192, 128, 16, 2}));
    EXPECT_TRUE(std::any_of(d64.begin(), d64.end(), [](const KernelConfig& c) {
        return c.mainloop == MainloopKind::sm90 && c.tile == TileConfig{128, 128, kSm90Warps, 2};
    }));
    EXPECT_FALSE(has_mainloop(candidate_configs(causal, KernelKind::forward, "sm_80"), MainloopKind::sm90));
    EXPECT_FALSE(has_mainloop(candidate_configs(causal, KernelKind::forward, "sm_90"), MainloopKind::sm90));
    // Forced: only that loop.
    const auto forced = candidate_configs(causal, KernelKind::forward, "sm_90a", MainloopKind::sm80);
    EXPECT_FALSE(has_mainloop(forced, MainloopKind::sm90));
    const auto only90 = candidate_configs(causal, KernelKind::forward, "sm_90a", MainloopKind::sm90);
    EXPECT_FALSE(has_mainloop(only90, MainloopKind::sm80));
    // V at 256: the consumers' registers leave 80 keys a tile at most (the default) or 64.
    const auto d256 = candidate_configs(example_spec("causal", DType::bf16, 256), KernelKind::forward, "sm_90a",
                                        MainloopKind::sm90);
    EXPECT_EQ(d256.front().tile, (TileConfig{128, 80, kSm90Warps, 2}));
    for (const KernelConfig& c : d256) EXPECT_TRUE(c.tile.block_n == 64 || c.tile.block_n == 80) << c;
}

TEST(CandidateConfigs, KeepTheStructuralFeatures) {
    AttentionSpec band = example_spec("causal", DType::bf16, 128);
    band.reciprocal_band(8, "alpha");
    for (const KernelConfig& c : candidate_configs(band, KernelKind::forward, "sm_90a")) {
        EXPECT_TRUE(c.recip_band) << c;
        EXPECT_EQ(c.mainloop, MainloopKind::sm80) << c;
    }
    EXPECT_USER_ERROR(candidate_configs(band, KernelKind::forward, "sm_90a", MainloopKind::sm90),
                      "no score convolution, reciprocal band or latent projection");
}

// The launch-time schedule (CtaSchedule) has rules of its own in why_config_invalid: a known CTA
// order, chosen for the sm80 and sm90 forward; a grid, for the sm90 forward; nothing for the
// backward's kernels, the simt loop or latent_gemm. The printed form names a chosen schedule only.
TEST(CandidateConfigs, ScheduleRules) {
    const AttentionSpec causal = example_spec("causal", DType::bf16, 128);
    auto with = [](KernelConfig c, int order, Sm90Grid grid) {
        c.schedule = CtaSchedule{order, grid};
        return c;
    };
    const KernelConfig sm90 = make_config(causal, KernelKind::forward, "sm_90a");
    const KernelConfig sm80 = make_config(causal, KernelKind::forward, "sm_80");
    const KernelConfig simt = make_config(example_spec("causal", DType::f32, 64), KernelKind::forward, "sm_80");
    const KernelConfig fused = make_config(causal, KernelKind::backward_fused, "sm_80");
    for (int order = kOrderAuto; order <= kOrderLast; ++order) {
        EXPECT_TRUE(config_is_valid(with(sm90, order, Sm90Grid::persistent))) << order;
        EXPECT_TRUE(config_is_valid(with(sm80, order, Sm90Grid::by_size))) << order;
    }
    for (int order : {-1, kOrderLast + 1, int{kOrderBatchInner}})
        EXPECT_STREQ(why_config_invalid(with(sm80, order, Sm90Grid::by_size)), "unknown CTA order") << order;
    EXPECT_NE(why_config_invalid(with(sm80, kOrderAuto, Sm90Grid::per_item)), nullptr);
    EXPECT_NE(why_config_invalid(with(simt, kOrderPerHead, Sm90Grid::by_size)), nullptr);
    EXPECT_NE(why_config_invalid(with(fused, kOrderPerHead, Sm90Grid::by_size)), nullptr);
    EXPECT_NE(why_config_invalid(with(fused, kOrderAuto, Sm90Grid::persistent)), nullptr);
    std::ostringstream printed;
    printed << with(sm90, kOrderChunked1, Sm90Grid::per_item) << "|" << sm90;
    const std::string text = printed.str();
    EXPECT_NE(text.find("stages=2 cta_order=chunked1 grid=per_item|"), std::string::npos) << text;
    EXPECT_EQ(text.find("cta_order", text.find('|')), std::string::npos) << "the kernel's own schedule printed";
}

}  // namespace
}  // namespace attnjit::codegen
