// Head dims between the tile sizes (padded inside the kernels: kernel_config.h) compile with
// NVRTC: the forward and every backward kind that exists at d 8, 16, 40, 72, 200 for bf16
// (sm80 loops; d200 the simt backward) and f32 (simt), Dqk != Dv, on sm_80 and on the
// 99 KiB sm_86; with sinks, a gate, a document mask, the score convolution (its backward at
// head dims over 128 too) and the reciprocal band (its forward and backward_fused).
#include <gtest/gtest.h>

#include "api/attention_backward.h"
#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "dsl/dsl.h"
#include "dsl/example_specs.h"
#include "dsl/mods.h"
#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "tests/nvrtc/compile_jobs.h"

namespace attnjit::codegen {
namespace {

using Job = CompileJob;

// The kinds a spec's backward runs on arch (the fused three where backward_fused exists and
// its tile fits), plus the forward.
std::vector<KernelKind> kinds_for(const dsl::AttentionSpec& spec, const char* arch) {
    std::vector<KernelKind> kinds = {KernelKind::forward, KernelKind::backward_dq, KernelKind::backward_dkdv,
                                     KernelKind::backward_stats};
    if (fused_backward_runs(elem_kind(spec.dtype()), spec.head_dim_qk(), spec.head_dim_v(), sm_version(arch))) {
        kinds.push_back(KernelKind::backward_fused);
        kinds.push_back(KernelKind::backward_dq_convert);
    }
    if (spec.has_sinks()) kinds.push_back(KernelKind::backward_sink_grad);
    return kinds;
}

void add(std::vector<Job>& jobs, const dsl::AttentionSpec& spec, const std::string& what, const char* arch,
         const std::vector<KernelKind>& kinds) {
    for (KernelKind kind : kinds)
        jobs.push_back({what + " " + kernel_kind_name(kind) + " " + arch,
                        generate(spec, make_config(spec, kind, arch), arch), arch});
}


std::string dims_name(int dqk, int dv) { return "d" + std::to_string(dqk) + "x" + std::to_string(dv); }

TEST(PaddedHeadDimsCompile, ForwardAndBackwardBf16AndF32) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (DType dt : {DType::bf16, DType::f32})
        for (int d : {8, 16, 40, 72, 200}) {
            const dsl::AttentionSpec spec = dsl::example_spec("causal", dt, d);
            add(jobs, spec, std::string("causal ") + dtype_name(dt) + " " + dims_name(d, d), "sm_80", kinds_for(spec, "sm_80"));
        }
    ASSERT_EQ(jobs.size(), 2u * 5u * 4u + 4u);  // the fused pair at d40 and d200 (bf16) only
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(PaddedHeadDimsCompile, UnevenDimsAndSmallSharedMemory) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (auto [dqk, dv] : {std::pair{40, 72}, std::pair{200, 16}, std::pair{24, 112}}) {
        dsl::AttentionSpec spec = dsl::example_spec("causal", DType::f16, 64);
        spec.head_dims(dqk, dv);
        add(jobs, spec, "causal f16 " + dims_name(dqk, dv), "sm_80", kinds_for(spec, "sm_80"));
    }
    dsl::AttentionSpec f32 = dsl::example_spec("plain", DType::f32, 64);
    add(jobs, f32.head_dims(8, 72), "plain f32 d8x72", "sm_80", kinds_for(f32, "sm_80"));
    for (int d : {72, 200}) {  // the 99 KiB tiles
        const dsl::AttentionSpec spec = dsl::example_spec("causal", DType::bf16, d);
        add(jobs, spec, "causal bf16 " + dims_name(d, d), "sm_86", kinds_for(spec, "sm_86"));
    }
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

TEST(PaddedHeadDimsCompile, StructuralFeatures) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    const dsl::AttentionSpec sinks = dsl::example_spec("sinks_sliding_window", DType::bf16, 24);
    add(jobs, sinks, "sinks bf16 d24", "sm_90a", kinds_for(sinks, "sm_90a"));
    const dsl::AttentionSpec gated = dsl::example_spec("gated_bias", DType::bf16, 80);
    add(jobs, gated, "gated_bias bf16 d80", "sm_90a", {KernelKind::forward, KernelKind::backward_stats});
    const dsl::AttentionSpec doc = dsl::example_spec("document", DType::f16, 16);
    add(jobs, doc, "document f16 d16", "sm_90a", {KernelKind::forward});
    dsl::AttentionSpec conv = dsl::AttentionSpec().dtype(DType::bf16).head_dim(40).return_lse();
    add(jobs, conv.score_conv("theta", 6, 11), "score_conv bf16 d40", "sm_90a", {KernelKind::forward});
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The reciprocal band's forward (its K and Q operand tiles beside the pipeline) at every tile
// head dim, padded ones, Dqk != Dv, both forms, with a staged bias tile, on the default tile of
// sm_90a, sm_80 and the 99 KiB sm_86.
TEST(PaddedHeadDimsCompile, ReciprocalBandForward) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (const char* arch : {"sm_90a", "sm_80", "sm_86"})
        for (auto [dqk, dv] : {std::pair{32, 32}, std::pair{40, 40}, std::pair{64, 64}, std::pair{128, 128},
                               std::pair{256, 256}, std::pair{64, 128}}) {
            dsl::AttentionSpec band = dsl::AttentionSpec().dtype(DType::bf16).head_dims(dqk, dv).return_lse();
            band.reciprocal_band(64, "alpha", dqk != 40);
            if (dqk == 64 && dv == 64)  // a pair bias read at [0][h][q_idx][kv_idx]: the staged bias tile
                band.score_mod(dsl::score() +
                               dsl::Tensor("bias", DType::bf16, 4)(dsl::Expr(0), dsl::head(), dsl::q_idx(), dsl::kv_idx()));
            add(jobs, band, "reciprocal_band bf16 " + dims_name(dqk, dv), arch, {KernelKind::forward});
        }
    ASSERT_EQ(jobs.size(), 18u);
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The latent projection's forward (Q_lat in the prologue, O W_vup in the epilogue, both staged
// in the K/V region) at L 64, 128, 200 (padded), 256 and 512 (two warps a row group; sm_90a
// only: 163 KiB do not hold it), Dqk != Dv and padded dims, with a gate, on the default tile of
// sm_90a and sm_80, and L 64 and 128 on the 99 KiB sm_86.
TEST(PaddedHeadDimsCompile, LatentForward) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (const char* arch : {"sm_90a", "sm_80", "sm_86"})
        for (int l : {64, 128, 200, 256, 512})
            for (auto [dqk, dv] : {std::pair{128, 128}, std::pair{64, 96}}) {
                if ((std::string(arch) == "sm_86" && l > 128) || (std::string(arch) == "sm_80" && l > 256)) continue;
                dsl::AttentionSpec lat = dsl::AttentionSpec().dtype(DType::bf16).head_dims(dqk, dv).return_lse();
                lat.latent(l, "w_qlat", "w_vup");
                if (dqk == 64) lat.gate("gate");
                add(jobs, lat, "latent bf16 L" + std::to_string(l) + " " + dims_name(dqk, dv), arch,
                    {KernelKind::forward});
            }
    ASSERT_EQ(jobs.size(), 22u);
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

// The latent projection's backward: latent_gemm (its products) for both 16-bit types on the
// three shared-memory sizes, and AttentionBackward of a latent spec compiling the per-head
// kernels between two latent_gemm launches (with a reciprocal band too).
TEST(PaddedHeadDimsCompile, LatentBackward) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (const char* arch : {"sm_90a", "sm_80", "sm_86"})
        for (DType dt : {DType::f16, DType::bf16})
            add(jobs, dsl::AttentionSpec().dtype(dt).head_dims(128, 128),
                std::string("latent_gemm ") + dtype_name(dt), arch, {KernelKind::latent_gemm});
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;

    CompileOptions o;
    o.arch = "sm_90a";
    o.grads = {"w_qlat", "w_vup"};
    dsl::AttentionSpec lat = dsl::AttentionSpec().dtype(DType::bf16).head_dims(128, 128).return_lse();
    lat.latent(512, "w_qlat", "w_vup").mask(dsl::mods::causal());
    const AttentionBackward bwd(lat, o);
    EXPECT_EQ(bwd.kernel_kinds(), (std::vector<KernelKind>{KernelKind::latent_gemm, KernelKind::backward_stats,
                                                           KernelKind::backward_fused, KernelKind::backward_dq_convert,
                                                           KernelKind::latent_gemm}));
    EXPECT_EQ(bwd.config(KernelKind::latent_gemm).tile, (TileConfig{128, 128, 8, 3}));
    EXPECT_NE(bwd.source(KernelKind::latent_gemm).source.find("LatentGemmTraits"), std::string::npos);
    EXPECT_FALSE(bwd.can_launch());
    lat.latent(64, "w_qlat", "w_vup").reciprocal_band(64, "alpha");
    o.grads.insert("alpha");
    EXPECT_EQ(AttentionBackward(lat, o).kernel_kinds(),
              (std::vector<KernelKind>{KernelKind::latent_gemm, KernelKind::backward_stats, KernelKind::backward_fused,
                                       KernelKind::backward_dq_convert, KernelKind::latent_gemm}));
}

// The reciprocal band's backward: backward_fused with the band's terms and the
// backward_dq_convert that finishes them, where the fused tile fits (sm_90a and sm_80 at d64
// and d128, the 99 KiB sm_86 at d64; both forms, f16 and bf16), and the kernels
// AttentionBackward chooses: the fused ones there, the two-pass ones when asked for (d256 has no
// band backward: a UserError).
TEST(PaddedHeadDimsCompile, ReciprocalBandBackward) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    auto band_spec = [](DType dt, int d, bool causal) {
        dsl::AttentionSpec band = dsl::AttentionSpec().dtype(dt).head_dim(d).return_lse();
        band.reciprocal_band(64, "alpha", causal);
        return band;
    };
    std::vector<Job> jobs;
    for (const char* arch : {"sm_90a", "sm_80", "sm_86"})
        for (int d : {64, 128}) {
            if (std::string(arch) == "sm_86" && d == 128) continue;
            const DType dt = d == 64 ? DType::f16 : DType::bf16;
            add(jobs, band_spec(dt, d, d == 128), std::string("reciprocal_band ") + dtype_name(dt) + " d" + std::to_string(d),
                arch, {KernelKind::backward_fused, KernelKind::backward_dq_convert});
        }
    ASSERT_EQ(jobs.size(), 10u);
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;

    CompileOptions o;
    o.arch = "sm_90a";
    o.grads = {"alpha"};
    const std::vector<KernelKind> fused = {KernelKind::backward_stats, KernelKind::backward_fused,
                                           KernelKind::backward_dq_convert},
                                  two_pass = {KernelKind::backward_dq, KernelKind::backward_dkdv};
    const AttentionBackward h100(band_spec(DType::bf16, 128, true), o);
    EXPECT_EQ(h100.kernel_kinds(), fused);
    EXPECT_EQ(h100.config(KernelKind::backward_fused).tile, (TileConfig{64, 128, 8, 2}));
    EXPECT_TRUE(h100.config(KernelKind::backward_fused).recip_band);
    EXPECT_THROW(AttentionBackward(band_spec(DType::bf16, 256, true), o), UserError);  // head dims up to 128
    o.arch = "sm_80";
    EXPECT_EQ(AttentionBackward(band_spec(DType::bf16, 128, false), o).config(KernelKind::backward_fused).tile,
              (TileConfig{64, 64, 8, 2}));
    o.fused_backward = false;
    EXPECT_EQ(AttentionBackward(band_spec(DType::bf16, 128, true), o).kernel_kinds(), two_pass);
}

// The score convolution's backward over 128 columns: backward_fused split in column halves
// (fused_column_split), Q/K's tile at least 128 when only V is wide.
TEST(PaddedHeadDimsCompile, ScoreConvBackwardSplitInColumnHalves) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    std::vector<Job> jobs;
    for (auto [dqk, dv] : {std::pair{256, 256}, std::pair{136, 136}, std::pair{256, 64}, std::pair{40, 200}}) {
        dsl::AttentionSpec conv = dsl::AttentionSpec().dtype(DType::f16).head_dims(dqk, dv).return_lse();
        conv.score_conv("theta", 3, 5);
        EXPECT_EQ(fused_column_split(dqk, dv), 2);
        add(jobs, conv, "score_conv f16 " + dims_name(dqk, dv), "sm_90a",
            {KernelKind::backward_fused, KernelKind::backward_dq_convert});
    }
    for (const auto& f : compile_all(jobs)) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace attnjit::codegen
