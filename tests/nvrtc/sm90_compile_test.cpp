// The sm90 forward loop compiles with NVRTC for sm_90a at every tile head dim it takes (64, 128,
// 256, padded ones, Dqk != Dv), in both 16-bit dtypes, on its default tiles and on every other
// tile its rules allow (block_n 64 / 128, stages 2-4) where they fit; and with the Variant
// features it carries: score_mod, masks with and without data-dependent classify, sinks, a
// gate, captured tensors read element by element. So does the sm90 backward_dkdv.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "dsl/dsl.h"
#include "dsl/example_specs.h"
#include "runtime/cuda_api.h"
#include "tests/nvrtc/compile_jobs.h"

namespace attnjit::codegen {
namespace {

void add(std::vector<CompileJob>& jobs, const dsl::AttentionSpec& spec, const std::string& what,
         const std::optional<TileConfig>& tile = std::nullopt, KernelKind kind = KernelKind::forward) {
    const KernelConfig c = make_config(spec, kind, "sm_90a", tile, MainloopKind::sm90);
    std::ostringstream name;
    name << what << " " << c;
    jobs.push_back({name.str(), generate(spec, c, "sm_90a"), "sm_90a"});
}

TEST(Sm90Compile, HeadDimsAndTiles) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<CompileJob> jobs;
    for (auto [dqk, dv] : {std::pair{64, 64}, std::pair{128, 128}, std::pair{256, 256}, std::pair{40, 40},
                           std::pair{120, 200}, std::pair{256, 128}, std::pair{64, 256}})
        add(jobs, dsl::example_spec("causal", DType::bf16, 64).head_dims(dqk, dv),
            "causal bf16 d" + std::to_string(dqk) + "x" + std::to_string(dv));
    int tiles = 0;
    for (int bn : {64, 128})
        for (int stages : {2, 3, 4}) {
            const dsl::AttentionSpec spec = dsl::example_spec("plain", DType::f16, 128);
            KernelConfig c = make_config(spec, KernelKind::forward, "sm_90a");
            c.tile = TileConfig{128, bn, kSm90Warps, stages};
            if (why_config_invalid_on(c, 90) != nullptr) continue;  // 128 keys in 4 stages: 290 KiB
            add(jobs, spec, "plain f16 d128", c.tile);
            ++tiles;
        }
    EXPECT_EQ(tiles, 5);  // 64 keys in 2, 3, 4 stages; 128 keys in 2 and 3 (226 KiB)
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(Sm90Compile, VariantFeatures) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<CompileJob> jobs;
    for (const char* name : {"alibi_causal", "softcap_sliding_window", "document", "prefix_lm", "relpos", "gqa",
                             "sinks_sliding_window", "causal_bottom_right"})
        add(jobs, dsl::example_spec(name, DType::bf16, 128), name);
    dsl::AttentionSpec gated = dsl::example_spec("causal", DType::f16, 64);
    add(jobs, gated.gate("gate"), "gated causal f16 d64");
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// backward_dkdv on the sm90 loop (sm90/backward_dkdv.cuh): both dtypes, tile head dims 64 and
// 128 (a padded one too), both stage counts, and the hooks it runs (score_mod with d_score,
// masks with and without data-dependent classify, GQA, captured tensors).
TEST(Sm90Compile, BackwardDkdv) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<CompileJob> jobs;
    for (DType dt : {DType::bf16, DType::f16})
        for (int d : {64, 128, 40})
            add(jobs, dsl::example_spec("causal", dt, d), "causal", std::nullopt, KernelKind::backward_dkdv);
    add(jobs, dsl::example_spec("plain", DType::bf16, 128), "plain", TileConfig{64, 128, kSm90Warps, 3},
        KernelKind::backward_dkdv);
    for (const char* name : {"alibi_causal", "softcap_sliding_window", "document", "relpos", "gqa"})
        add(jobs, dsl::example_spec(name, DType::bf16, 128), name, std::nullopt, KernelKind::backward_dkdv);
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The fused backward on the sm90 loop (dQ on wgmma, added by the bulk-reduction writer warp):
// both element types, the head dims whose dQ halves are a 64-column block (128), half of one
// (64) and padded (40, 112); variants with and without score_mod gradients (the split element pass).
TEST(Sm90Compile, BackwardFused) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<CompileJob> jobs;
    for (DType dt : {DType::bf16, DType::f16})
        for (int d : {64, 128})
            add(jobs, dsl::example_spec("causal", dt, d), "causal", std::nullopt, KernelKind::backward_fused);
    for (int d : {40, 112}) add(jobs, dsl::example_spec("plain", DType::bf16, d), "plain", std::nullopt, KernelKind::backward_fused);
    for (const char* name : {"alibi_causal", "softcap_sliding_window", "document", "gqa"})
        add(jobs, dsl::example_spec(name, DType::bf16, 128), name, std::nullopt, KernelKind::backward_fused);
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace attnjit::codegen
