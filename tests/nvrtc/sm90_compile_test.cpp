// The sm90 forward loop compiles with NVRTC for sm_90a at every tile head dim it takes (64, 128,
// 256, padded ones, Dqk != Dv), in both 16-bit dtypes, on its default tiles and on every other
// tile its rules allow (block_n 64 / 128, stages 2-4) where they fit; and with the Variant
// features it carries: score_mod, masks with and without data-dependent classify, sinks, a
// gate, captured tensors read element by element. So do the sm90 backward kernels; and ptxas
// keeps their wgmma products asynchronous.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "dsl/dsl.h"
#include "dsl/example_specs.h"
#include "runtime/compiler.h"
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
    for (int bn : {64, 128, 176})
        for (int stages : {2, 3, 4}) {
            const dsl::AttentionSpec spec = dsl::example_spec("plain", DType::f16, 128);
            KernelConfig c = make_config(spec, KernelKind::forward, "sm_90a");
            c.tile = TileConfig{128, bn, kSm90Warps, stages};
            if (why_config_invalid_on(c, 90) != nullptr) continue;  // 128 keys in 4 stages: 290 KiB
            add(jobs, spec, "plain f16 d128", c.tile);
            ++tiles;
        }
    // 64 keys in 2, 3, 4 stages; 128 keys in 2 and 3 (226 KiB); 176 keys in 2 (210 KiB)
    EXPECT_EQ(tiles, 6);
    // Three consumer warpgroups on 192 query rows at d64, in every stage count.
    for (int stages : {2, 3, 4})
        add(jobs, dsl::example_spec("plain", DType::bf16, 64), "plain bf16 d64", TileConfig{192, 128, 16, stages});
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

// ptxas keeps wgmma asynchronous only where no instruction touches a running product's
// registers; otherwise it waits for the product itself and says so in NVRTC's log (C7517
// "warpgroup.wait is injected", C7510 "wgmma.mma_async instructions are serialized"). The sm90
// kernels' logs must have neither: wgmma (HGMMA in the SASS) runs as written. (No SASS
// disassembler ships with the toolkit this builds with; this is the check NVRTC allows.)
bool log_says_wgmma_was_serialised(const std::string& log) {
    return log.find("C7517") != std::string::npos || log.find("C7510") != std::string::npos ||
           log.find("serialized") != std::string::npos;
}

TEST(Sm90Compile, PtxasKeepsTheWgmmaPipelines) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<std::pair<std::string, KernelSource>> jobs;
    auto add_one = [&](const char* name, int d, KernelKind kind) {
        const auto spec = dsl::example_spec(name, DType::bf16, d);
        const KernelConfig c = make_config(spec, kind, "sm_90a", std::nullopt, MainloopKind::sm90);
        std::ostringstream what;
        what << name << " " << c;
        jobs.emplace_back(what.str(), generate(spec, c, "sm_90a"));
    };
    for (int d : {64, 128, 256}) add_one("causal", d, KernelKind::forward);
    for (int d : {64, 128}) {
        add_one("causal", d, KernelKind::backward_fused);
        add_one("causal", d, KernelKind::backward_dkdv);
    }
    add_one("softcap_sliding_window", 128, KernelKind::backward_fused);  // the one-pass element pass
    for (int d : {64, 128}) add_one("bias", d, KernelKind::forward);     // the bias tile's stages
    {  // the 176-key tile at d128 (not a default)
        const auto spec = dsl::example_spec("causal", DType::bf16, 128);
        jobs.emplace_back("causal 128 x 176", generate(spec, make_config(spec, KernelKind::forward, "sm_90a",
                                                                         TileConfig{128, 176, kSm90Warps, 2},
                                                                         MainloopKind::sm90),
                                                       "sm_90a"));
    }
    for (const auto& [what, source] : jobs) {
        const runtime::CompiledKernel k = runtime::compile_kernel(source, "sm_90a");
        EXPECT_FALSE(log_says_wgmma_was_serialised(k.log)) << what << ": " << k.log;
    }
}

// The check above can fail: a kernel that reads an accumulator before waiting for its product.
TEST(Sm90Compile, PtxasReportsAWgmmaPipelineItHadToBreak) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    KernelSource bad;
    bad.name = "wgmma_read_before_wait";
    bad.entry = "wgmma_read_before_wait";
    bad.arch = "sm_90a";
    bad.threads = 128;
    bad.source = R"(extern "C" __global__ void __launch_bounds__(128)
wgmma_read_before_wait(float* out, unsigned long long a, unsigned long long b) {
    float d[16];
    for (int i = 0; i < 16; ++i) d[i] = 0.f;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
                 "%10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(a), "l"(b), "r"(1));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    out[threadIdx.x] = d[0];  // before the wait
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    for (int i = 0; i < 16; ++i) out[threadIdx.x + 128 * i] += d[i];
}
)";
    const runtime::CompiledKernel k = runtime::compile_kernel(bad, "sm_90a");
    EXPECT_TRUE(log_says_wgmma_was_serialised(k.log)) << k.log;
}

}  // namespace
}  // namespace attnjit::codegen
