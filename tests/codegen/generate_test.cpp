// generate: KernelSource fields, tile and spec errors, the Params layout, the
// emitter's fp32 text and the DSL comments above each statement.
#include <gtest/gtest.h>

#include <limits>

#include "attnjit/forward/args.h"
#include "codegen/cuda_emitter.h"
#include "dsl/example_specs.h"
#include "codegen/generate.h"
#include "codegen/lower.h"
#include "codegen/template_library.h"
#include "common/expect_error.h"
#include "common/forward_source.h"
#include "dsl/dsl.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

TEST(Generate, FillsTheKernelSource) {
    auto spec = example_spec("alibi_causal", DType::bf16, 128);
    const TileConfig tile{128, 64, 4, 2};
    KernelSource k = testing::forward_source(spec, tile, "sm_90a");
    EXPECT_EQ(k.entry, "attnjit_forward");
    EXPECT_EQ(k.threads, 128);
    const KernelConfig want{KernelKind::forward, MainloopKind::sm80, ElemKind::bf16, 128, 128, tile};
    EXPECT_EQ(k.config, want);
    EXPECT_EQ(k.smem_bytes, smem_bytes(want));
    EXPECT_EQ(k.arch, "sm_90a");
    EXPECT_EQ(k.layout.fields.at(0).c_type, "attnjit::ForwardArgs");
    EXPECT_EQ(k.name.rfind("fwd_sm80_bf16_d128x128_m128n64w4s2_", 0), 0u) << k.name;
    EXPECT_NE(k.source.find("attnjit::ForwardTraits<attnjit::MainloopKind::sm80, attnjit::bf16_t, 128, 128, 128, 64, 4, 2>"),
              std::string::npos);
    EXPECT_NE(k.source.find("// kernel:    forward sm80 bf16 d128x128 block_m=128 block_n=64 warps=4 stages=2"),
              std::string::npos);
    EXPECT_NE(k.source.find("// target:    sm_90a"), std::string::npos);
    EXPECT_NE(k.source.find("// spec:      AttentionSpec(dtype=bf16"), std::string::npos);
    EXPECT_NE(k.source.find("// templates: sha256 " + templates_hash()), std::string::npos);
}

// backward_dkdv has an sm90 kernel, taken only when asked for (it has not run on a GPU yet):
// 128 keys, 64 queries a step, 12 warps, the descriptors as a second parameter; head dims up
// to 128, no structural modifier.
TEST(Generate, Sm90BackwardOnlyWhenAsked) {
    const auto causal = example_spec("causal", DType::bf16, 128);
    for (KernelKind kind : {KernelKind::backward_dkdv, KernelKind::backward_fused}) {
        SCOPED_TRACE(kernel_kind_name(kind));
        EXPECT_EQ(make_config(causal, kind, "sm_90a").mainloop, MainloopKind::sm80);
        const KernelConfig c = make_config(causal, kind, "sm_90a", std::nullopt, MainloopKind::sm90);
        EXPECT_EQ(c.mainloop, MainloopKind::sm90);
        EXPECT_EQ(c.tile, (TileConfig{64, 128, kSm90Warps, 2}));
        const KernelSource k = generate(causal, c, "sm_90a");
        EXPECT_EQ(k.threads, 384);
        EXPECT_NE(k.source.find("const __grid_constant__ attnjit::BackwardTmaMaps maps"), std::string::npos);
        EXPECT_USER_ERROR(make_config(example_spec("causal", DType::bf16, 256), kind, "sm_90a", std::nullopt,
                                      MainloopKind::sm90),
                          "backward_dkdv / backward_fused at head dims up to 128");
        EXPECT_USER_ERROR(make_config(causal, kind, "sm_80", std::nullopt, MainloopKind::sm90),
                          "the sm90 main loop runs the forward on sm_90a");
        KernelConfig wrong = c;
        wrong.tile.block_n = 64;
        EXPECT_USER_ERROR(check_config(wrong, "sm_90a"), "sm90 backward: block_m 64, block_n 128, 12 warps");
    }
    EXPECT_USER_ERROR(make_config(causal, KernelKind::backward_dq, "sm_90a", std::nullopt, MainloopKind::sm90),
                      "the sm90 main loop runs the forward on sm_90a");
    // Three stages fit beside dK / dV's tiles alone; the fused kernel's dS^T and dQ tiles leave two.
    const auto listed = candidate_configs(causal, KernelKind::backward_dkdv, "sm_90a", MainloopKind::sm90);
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[1].tile, (TileConfig{64, 128, kSm90Warps, 3}));
    EXPECT_EQ(candidate_configs(causal, KernelKind::backward_fused, "sm_90a", MainloopKind::sm90).size(), 1u);
    EXPECT_EQ(candidate_configs(example_spec("causal", DType::bf16, 64), KernelKind::backward_fused, "sm_90a",
                                MainloopKind::sm90)
                  .size(),
              2u);
}

// On sm_90a the forward takes the Hopper loop where it carries the spec, and keeps the sm80 loop
// for a structural modifier, a head dim outside its tiles, sm_90 without the "a", or when asked.
TEST(Generate, Sm90LoopIsTheDefaultOnSm90a) {
    const auto causal = example_spec("causal", DType::bf16, 128);
    const KernelConfig c = make_config(causal, KernelKind::forward, "sm_90a");
    EXPECT_EQ(c.mainloop, MainloopKind::sm90);
    EXPECT_EQ(c.tile, (TileConfig{128, 128, kSm90Warps, 2}));
    const KernelSource k = testing::forward_source(causal, std::nullopt, "sm_90a");
    EXPECT_EQ(k.threads, 384);
    // At tile head dims of 64 a third consumer warpgroup: 192 query rows, 16 warps.
    const auto d64 = example_spec("causal", DType::bf16, 64);
    EXPECT_EQ(make_config(d64, KernelKind::forward, "sm_90a").tile, (TileConfig{192, 128, 16, 2}));
    EXPECT_EQ(testing::forward_source(d64, std::nullopt, "sm_90a").threads, 512);
    EXPECT_EQ(make_config(example_spec("causal", DType::bf16, 104), KernelKind::forward, "sm_90a").tile,
              (TileConfig{128, 128, kSm90Warps, 2}));
    // Unforced, only the sm90 shapes (128 rows with 12 warps, 192 with 16) select it: 16 warps on
    // 256 rows are an sm80 tile.
    EXPECT_EQ(make_config(d64, KernelKind::forward, "sm_90a", TileConfig{256, 64, 16, 2}).mainloop, MainloopKind::sm80);
    EXPECT_EQ(make_config(d64, KernelKind::forward, "sm_90a", TileConfig{128, 128, 12, 3}).mainloop, MainloopKind::sm90);
    EXPECT_NE(k.source.find("__launch_bounds__(Traits::kThreads, 1)"), std::string::npos);
    EXPECT_NE(k.source.find("const __grid_constant__ attnjit::ForwardTmaMaps maps"), std::string::npos);
    EXPECT_EQ(make_config(causal, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm80).mainloop,
              MainloopKind::sm80);
    EXPECT_EQ(make_config(causal, KernelKind::forward, "sm_90a", TileConfig{128, 64, 4, 2}).mainloop, MainloopKind::sm80);
    EXPECT_EQ(make_config(causal, KernelKind::forward, "sm_100").mainloop, MainloopKind::sm80);
    EXPECT_EQ(make_config(causal, KernelKind::backward_fused, "sm_90a").mainloop, MainloopKind::sm80);
    EXPECT_EQ(make_config(example_spec("causal", DType::bf16, 32), KernelKind::forward, "sm_90a").mainloop,
              MainloopKind::sm80);
    EXPECT_EQ(make_config(example_spec("causal", DType::f32, 128), KernelKind::forward, "sm_90a").mainloop,
              MainloopKind::simt);
    AttentionSpec band = causal;
    band.reciprocal_band(8, "alpha");
    EXPECT_EQ(make_config(band, KernelKind::forward, "sm_90a").mainloop, MainloopKind::sm80);
    EXPECT_USER_ERROR(make_config(band, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm90),
                      "no score convolution, reciprocal band or latent projection");
    EXPECT_USER_ERROR(make_config(causal, KernelKind::forward, "sm_90", std::nullopt, MainloopKind::sm90),
                      "the sm90 main loop runs the forward on sm_90a");
    KernelConfig wrong = c;
    wrong.tile.block_n = 96;
    EXPECT_USER_ERROR(check_config(wrong, "sm_90a"), "sm90: block_n 64, 80, 128 or 176");
    EXPECT_USER_ERROR(check_config(c, "sm_100"), "needs the sm_90a target");
}

// Every head-dim pair and 16-bit dtype gets a valid forward on sm_90a: the sm90 loop wherever its
// head dims allow (its default tile fits them all), else the sm80 loop.
TEST(Generate, EveryHeadDimPairHasAForwardOnSm90a) {
    for (DType dt : {DType::f16, DType::bf16})
        for (int dqk = kMinHeadDim; dqk <= kMaxHeadDim; dqk += kHeadDimStep)
            for (int dv = kMinHeadDim; dv <= kMaxHeadDim; dv += kHeadDimStep) {
                SCOPED_TRACE(std::to_string(dqk) + "x" + std::to_string(dv));
                const AttentionSpec spec = AttentionSpec().dtype(dt).head_dims(dqk, dv);
                KernelConfig c{};
                ASSERT_NO_THROW(c = make_config(spec, KernelKind::forward, "sm_90a"));
                EXPECT_EQ(c.mainloop, sm90_head_dims(dqk, dv) ? MainloopKind::sm90 : MainloopKind::sm80);
                EXPECT_EQ(why_config_invalid_on(c, 90), nullptr);
            }
    const KernelConfig wide = make_config(AttentionSpec().dtype(DType::bf16).head_dims(256, 128), KernelKind::forward,
                                          "sm_90a");
    EXPECT_EQ(wide.tile, (TileConfig{128, 80, kSm90Warps, 2}));  // 128-key stages would need 258 KiB
}

TEST(Generate, DefaultConfigComesFromKernelConfig) {
    auto spec = example_spec("causal", DType::f32, 64);
    KernelSource k = testing::forward_source(spec);
    const KernelConfig d = default_config(KernelKind::forward, ElemKind::f32, 64, 64, 80);
    EXPECT_EQ(k.config, d);
    EXPECT_EQ(k.config.mainloop, MainloopKind::simt);
    EXPECT_EQ(k.threads, d.tile.warps * 32);
}

// The default tile fits each arch's shared memory: d256 takes a smaller tile on sm_86.
TEST(Generate, DefaultTileFitsTheArch) {
    auto spec = example_spec("causal", DType::bf16, 256);
    const KernelConfig big = make_config(spec, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm80);
    const KernelConfig small = make_config(spec, KernelKind::forward, "sm_86");
    EXPECT_GT(smem_bytes(big), max_dynamic_smem_bytes(86));
    EXPECT_LE(smem_bytes(small), max_dynamic_smem_bytes(86));
    EXPECT_USER_ERROR(check_config(big, "sm_86"), "it needs 131200 bytes of shared memory; sm_86 allows 101376");
}

// Every kind's default configuration, for every dtype and head-dim pair (every multiple of 8
// from 8 to 256), runs on every arch kernel_config.h knows (the shared-memory limit
// included); the fused backward's kinds where it exists (its main loop is sm80;
// backward_fused at tile head dims 64 and 128 everywhere, 256 where shared memory has room:
// not on the 99 KiB GPUs, where fused_backward_runs says no).
TEST(Generate, EveryDefaultConfigRunsOnEveryKnownArch) {
    for (int sm : {80, 86, 87, 89, 90, 100, 103, 120})
        for (KernelKind kind : {KernelKind::forward, KernelKind::backward_dkdv, KernelKind::backward_dq,
                                KernelKind::backward_stats, KernelKind::backward_fused, KernelKind::backward_dq_convert,
                                KernelKind::backward_sink_grad})
            for (ElemKind e : {ElemKind::f16, ElemKind::bf16, ElemKind::f32})
                for (int dqk = 8; dqk <= 256; dqk += 8)
                    for (int dv = 8; dv <= 256; dv += 8) {
                        const KernelConfig c = default_config(kind, e, dqk, dv, sm);
                        const bool fast_kind = kind == KernelKind::backward_fused || is_backward_rows(kind);
                        if (fast_kind && c.mainloop != MainloopKind::sm80) continue;  // no fused backward there
                        if (kind == KernelKind::backward_fused && !fused_backward_head_dims(dqk, dv)) continue;
                        if (kind == KernelKind::backward_fused && fused_column_split(dqk, dv) > 1 &&
                            !fused_backward_runs(e, dqk, dv, sm)) {  // only for want of shared memory
                            EXPECT_LT(max_dynamic_smem_bytes(sm), 128 * 1024) << c << " on sm_" << sm;
                            continue;
                        }
                        const char* why = why_config_invalid_on(c, sm);
                        EXPECT_EQ(why, nullptr) << c << " on sm_" << sm << ": " << why;
                    }
}

// Attention sinks: the Variant gets kHasSink, SinkElement and sink(p, h) reading the
// sinks tensor at its stride; backward_sink_grad has its own argument block and grid-free
// traits; a spec without sinks mentions none of it.
TEST(Generate, SinksVariantAndTheSinkGradientKind) {
    AttentionSpec spec = example_spec("sinks_sliding_window", DType::bf16, 64);
    spec.sinks("sinks", DType::f16).return_lse();
    const KernelSource fwd = testing::forward_source(spec);
    for (const char* needle : {"static constexpr bool kHasSink = true;", "using SinkElement = attnjit::half_t;",
                               "__device__ static float sink(const Params& p, int h)",
                               "return attnjit::to_float(p.tensor_sinks.ptr[h * p.tensor_sinks.stride[0]]);",
                               "attnjit::TensorArg<attnjit::half_t, 1> tensor_sinks;"})
        EXPECT_NE(fwd.source.find(needle), std::string::npos) << needle << "\n" << fwd.source;
    const KernelSource grad = generate(spec, make_config(spec, KernelKind::backward_sink_grad, "sm_90a"), "sm_90a");
    EXPECT_EQ(grad.entry, "attnjit_backward_sink_grad");
    EXPECT_EQ(grad.layout.fields.at(0).c_type, "attnjit::SinkGradArgs");
    EXPECT_EQ(grad.config.mainloop, MainloopKind::simt);
    EXPECT_EQ(grad.smem_bytes, 0);
    EXPECT_NE(grad.source.find("attnjit::BackwardSinkGradTraits<attnjit::MainloopKind::simt, attnjit::bf16_t, 64, 64,"),
              std::string::npos)
        << grad.source;
    const KernelSource plain = testing::forward_source(example_spec("causal", DType::bf16, 64));
    EXPECT_EQ(plain.source.find("Sink"), std::string::npos);
    EXPECT_EQ(plain.source.find("sink"), std::string::npos);
    const KernelConfig sm80_sink{KernelKind::backward_sink_grad, MainloopKind::sm80, ElemKind::bf16, 64, 64,
                                 TileConfig{64, 64, 8, 1}};
    EXPECT_STREQ(why_config_invalid(sm80_sink), "backward_sink_grad runs as simt code");
    const AttentionSpec no_sinks = example_spec("causal", DType::bf16, 64);
    EXPECT_USER_ERROR(generate(no_sinks, make_config(no_sinks, KernelKind::backward_sink_grad, "sm_80"), "sm_80"),
                      "backward_sink_grad computes the gradient of attention sinks");
}

// A score convolution under a mask: mask() is the causal part and the spec's mask, and
// score_conv_mask (which gates the taps) is the spec's mask alone, in both directions.
TEST(Generate, ScoreConvUnderAMaskGetsBothMaskHooks) {
    AttentionSpec spec = example_spec("document", DType::bf16, 64);
    spec.score_conv("theta", 6, 11);
    const KernelSource fwd = testing::forward_source(spec);
    for (const char* needle :
         {"static constexpr bool kScoreConvMask = true;",
          "__device__ static bool score_conv_mask(const Params& p, const Head& hd, const Row& r, int q, int k)",
          "// doc_ids[b, q_idx] == doc_ids[b, kv_idx]", "// q_idx - kv_idx >= 0 && doc_ids[b, q_idx] == doc_ids[b, kv_idx]"})
        EXPECT_NE(fwd.source.find(needle), std::string::npos) << needle << "\n" << fwd.source;
    EXPECT_EQ(fwd.config.score_conv, true);
    EXPECT_EQ(fwd.smem_bytes, smem_bytes(fwd.config));
    const AttentionSpec unmasked = AttentionSpec(spec).mask(Expr());
    EXPECT_EQ(testing::forward_source(unmasked).source.find("score_conv_mask"), std::string::npos);
    const KernelSource bwd = generate(spec, make_config(spec, KernelKind::backward_fused, "sm_90a"), "sm_90a");
    EXPECT_NE(bwd.source.find("static constexpr bool kScoreConvMask = true;"), std::string::npos) << bwd.source;
    EXPECT_NE(bwd.source.find("score_conv_mask_classify"), std::string::npos);
    EXPECT_EQ(bwd.smem_bytes, smem_bytes(bwd.config));
}

TEST(Generate, ArchIsCheckedAndParsed) {
    EXPECT_EQ(sm_version("sm_90a"), 90);
    EXPECT_EQ(sm_version("sm_100f"), 100);
    EXPECT_USER_ERROR(sm_version("compute_90"), "virtual compute_XX targets give no cubin");
    EXPECT_USER_ERROR(testing::forward_source(example_spec("causal"), std::nullopt, "sm_70"),
                      "attnjit supports sm_80 (Ampere) and newer GPUs");
}

// An arch older than sm_80 is the caller's choice, not a bug: a UserError naming the
// supported archs, for every dtype (the f32 simt main loop included) and kernel kind.
TEST(Generate, ArchOlderThanSm80IsAUserErrorNamingTheSupportedArchs) {
    const std::string supported =
        "attnjit supports sm_80 (Ampere) and newer GPUs (sm_80, sm_86, sm_87, sm_89, sm_90 (sm_90a), sm_100, "
        "sm_103 and sm_120); compile for one of them";
    for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
        auto spec = example_spec("causal", dtype, 64);
        EXPECT_USER_ERROR(testing::forward_source(spec, std::nullopt, "sm_75"), "cannot build kernels for sm_75");
        EXPECT_USER_ERROR(testing::forward_source(spec, std::nullopt, "sm_75"), supported);
        for (KernelKind kind : {KernelKind::forward, KernelKind::backward_dq, KernelKind::backward_dkdv})
            EXPECT_USER_ERROR(make_config(spec, kind, "sm_75"), supported);
        EXPECT_USER_ERROR(check_config(default_config(KernelKind::forward, elem_kind(dtype), 64, 64, 80), "sm_75"),
                          supported);
    }
    EXPECT_EQ(supported_sm_version("sm_80"), 80);
    EXPECT_EQ(supported_sm_version("sm_121"), 121);  // newer than kernel_config.h knows: NVRTC judges it
    EXPECT_USER_ERROR(supported_sm_version("sm_86x"), "is not a GPU architecture attnjit can compile for");
}

TEST(Generate, InvalidTileIsAUserErrorNamingTheTileAndWhy) {
    auto spec = example_spec("causal");
    EXPECT_USER_ERROR(testing::forward_source(spec, TileConfig{100, 64, 4, 2}),
                      "kernel forward sm80 f16 d128x128 block_m=100 block_n=64 warps=4 stages=2 is not valid on sm_80");
    EXPECT_USER_ERROR(testing::forward_source(spec, TileConfig{128, 64, 4, 7}), "stages must be 1, 2 or 3");
    EXPECT_USER_ERROR(testing::forward_source(spec, TileConfig{128, 64, 4, 7}),
                      "leave it unset to get the default, block_m=128 block_n=64 warps=4 stages=2");
}

TEST(Generate, InvalidSpecIsAUserError) {
    AttentionSpec bad = AttentionSpec().head_dim(84);
    EXPECT_USER_ERROR(testing::forward_source(bad), "head dim 84 is not supported");
    EXPECT_USER_ERROR(lower(AttentionSpec().mask(score() > 0.0)), "reads the score");
}

TEST(ParamsLayoutTest, ArgsFirstThenScalarsThenTensorsSortedByName) {
    Tensor zeta("zeta", DType::f16, 4), alpha("alpha", DType::i64, 2);
    auto spec = AttentionSpec()
                    .score_mod(score() * scalar("s2") + to_float(alpha(batch(), kv_idx())) + zeta(batch(), head(), q_idx(), kv_idx()))
                    .mask(kv_idx() < int_scalar("n1"));
    ParamsLayout l = params_layout(spec, KernelKind::forward);
    ASSERT_EQ(l.fields.size(), 5u);
    const int args = static_cast<int>(sizeof(ForwardArgs));
    EXPECT_EQ(l.fields[0].c_name, "args");
    EXPECT_EQ(l.fields[0].offset, 0);
    EXPECT_EQ(l.fields[0].size, args);
    EXPECT_EQ(l.fields[1].c_name, "scalar_n1");
    EXPECT_EQ(l.fields[1].kind, ParamsField::Kind::IntScalar);
    EXPECT_EQ(l.fields[1].offset, args);
    EXPECT_EQ(l.fields[2].c_name, "scalar_s2");
    EXPECT_EQ(l.fields[2].kind, ParamsField::Kind::FloatScalar);
    EXPECT_EQ(l.fields[2].offset, args + 4);
    EXPECT_EQ(l.fields[3].c_name, "tensor_alpha");
    EXPECT_EQ(l.fields[3].c_type, "attnjit::TensorArg<long long, 2>");
    EXPECT_EQ(l.fields[3].offset, args + 8);  // 8-aligned after two 4-byte scalars
    EXPECT_EQ(l.fields[3].size, 8 + 2 * 8);
    EXPECT_EQ(l.fields[4].c_name, "tensor_zeta");
    EXPECT_EQ(l.fields[4].c_type, "attnjit::TensorArg<attnjit::half_t, 4>");
    EXPECT_EQ(l.fields[4].offset, args + 8 + 24);
    EXPECT_EQ(l.size, args + 8 + 24 + 40);
    EXPECT_EQ(l.align, 8);
    ASSERT_NE(l.find("zeta"), nullptr);
    EXPECT_EQ(l.find("zeta")->rank, 4);
    EXPECT_EQ(l.find("nope"), nullptr);
}

TEST(ParamsLayoutTest, OddScalarCountIsPaddedBeforeTensors) {
    auto spec = AttentionSpec().score_mod(score() * scalar("a") + Tensor("t", DType::f32, 1)(head()));
    ParamsLayout l = params_layout(spec, KernelKind::forward);
    const int args = static_cast<int>(sizeof(ForwardArgs));
    EXPECT_EQ(l.find("a")->offset, args);
    EXPECT_EQ(l.find("t")->offset, args + 8);
    EXPECT_EQ(l.size, args + 8 + 16);
}

TEST(ParamsLayoutTest, GeneratedStructAssertsEveryFieldAndTheSize) {
    auto spec = example_spec("softcap_sliding_window");
    std::string src = testing::forward_source(spec).source;
    for (const auto& f : params_layout(spec, KernelKind::forward).fields)
        EXPECT_NE(src.find("static_assert(sizeof(" + f.c_type + ") == " + std::to_string(f.size) + " && alignof(" +
                           f.c_type + ") == " + std::to_string(f.align) + ", \"Params::" + f.c_name + " (offset " +
                           std::to_string(f.offset) + ")"),
                  std::string::npos)
            << f.c_name << "\n" << src;
    EXPECT_NE(src.find("static_assert(sizeof(Params) == " + std::to_string(params_layout(spec, KernelKind::forward).size) +
                       " && alignof(Params) == 8"),
              std::string::npos);
}

TEST(CudaEmitter, Fp32Text) {
    Tensor t("bias", DType::bf16, 2);
    EXPECT_EQ(emit_expr(score() * 0.125), "s * 0.125f");
    EXPECT_EQ(emit_expr(score() / 3.0), "s / 3.0f");
    EXPECT_EQ(emit_expr(select(kv_idx() <= q_idx(), score(), -infinity())),
              "k <= q ? s : attnjit::bits_to_float(0xff800000u)");
    EXPECT_EQ(emit_expr(Expr(-std::numeric_limits<double>::infinity())), "attnjit::bits_to_float(0xff800000u)");
    EXPECT_EQ(emit_expr(exp(score())), "expf(s)");
    EXPECT_EQ(emit_expr(sigmoid(score())), "1.0f / (1.0f + expf(-s))");
    EXPECT_EQ(emit_expr(tanh(score() / scalar("cap"))), "tanh_(s / p.scalar_cap)");
    EXPECT_EQ(emit_expr((q_idx() - kv_idx()) / 2 % 3), "(q - k) / 2 % 3");
    EXPECT_EQ(emit_expr(q_idx() - (kv_idx() - 1)), "q - (k - 1)");
    EXPECT_EQ(emit_expr(-(-score())), "-(-s)");
    EXPECT_EQ(emit_expr(to_float(q_idx() + 1) * score()), "(float)(q + 1) * s");
    EXPECT_EQ(emit_expr(to_int(score())), "(int)s");
    EXPECT_EQ(emit_expr(min(q_idx(), kv_idx())), "min(q, k)");
    EXPECT_EQ(emit_expr(max(score(), 0.0)), "fmax_nan(s, 0.0f)");
    EXPECT_EQ(emit_expr(t(batch(), 0)), "attnjit::to_float(p.tensor_bias.ptr[hd.b * p.tensor_bias.stride[0]])");
    EXPECT_EQ(emit_expr(t(q_idx() + 1, kv_idx())),
              "attnjit::to_float(p.tensor_bias.ptr[(q + 1) * p.tensor_bias.stride[0] + k * p.tensor_bias.stride[1]])");
    EXPECT_EQ(emit_expr((q_idx() < 3 && kv_idx() < 4) || q_len() == kv_len()),
              "(q < 3 && k < 4) || p.args.q_len == p.args.kv_len");
    EXPECT_EQ(emit_expr(Tensor("m", DType::u8, 1)(kv_idx())), "attnjit::to_bool(p.tensor_m.ptr[k * p.tensor_m.stride[0]])");
}

TEST(CudaEmitter, FloatLiteralsRoundTripInFp32) {
    EXPECT_EQ(float_literal_cuda(0.1), "0.1f");
    EXPECT_EQ(float_literal_cuda(30.0), "30.0f");
    EXPECT_EQ(float_literal_cuda(-2.5), "-2.5f");
    EXPECT_EQ(float_literal_cuda(1e-30), "1e-30f");
    EXPECT_EQ(float_literal_cuda(1e300), "attnjit::bits_to_float(0x7f800000u)");  // overflows fp32
}

TEST(Generate, EveryStatementCarriesItsDslText) {
    auto spec = AttentionSpec().score_mod(mods::softcap(scalar("cap")));
    std::string src = testing::forward_source(spec).source;
    EXPECT_NE(src.find("        // cap * tanh(score * (1.0 / cap))\n        return p.scalar_cap * tanh_(s * hd.h0);"),
              std::string::npos)
        << src;
}

// tanh is the Variant's tanh_: the hardware approximation for f16 / bf16 specs, tanhf for f32.
TEST(Generate, TanhIsApproximateBelowF32) {
    for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
        const std::string src =
            testing::forward_source(AttentionSpec().dtype(dt).score_mod(mods::softcap(scalar("cap")))).source;
        const bool approx = src.find("asm(\"tanh.approx.f32 %0, %1;\"") != std::string::npos;
        EXPECT_EQ(approx, dt != DType::f32) << src;
        EXPECT_NE(src.find("__device__ static float tanh_(float x)"), std::string::npos) << src;
    }
    EXPECT_EQ(testing::forward_source(AttentionSpec()).source.find("tanh_"), std::string::npos);
}

TEST(Generate, NanMinMaxHelpersOnlyWhenUsed) {
    EXPECT_EQ(testing::forward_source(example_spec("causal")).source.find("fmax_nan"), std::string::npos);
    auto spec = AttentionSpec().score_mod(max(score(), -5.0));
    std::string src = testing::forward_source(spec).source;
    EXPECT_NE(src.find("__device__ static float fmax_nan(float a, float b)"), std::string::npos);
}

// The text of the emitted function that starts with `signature`, up to its closing brace.
std::string function_body(const std::string& src, const std::string& signature) {
    size_t start = src.find(signature);
    if (start == std::string::npos) return "<no " + signature + ">";
    size_t end = src.find("\n    }\n", start);
    return src.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

TEST(Generate, GuardedLoadsAndDivisionsStayUnderTheirShortCircuit) {
    Tensor dq("dq", DType::i32, 2);
    Tensor valid("valid", DType::u8, 1);
    Expr row = dq(batch(), q_idx());
    Expr d = int_scalar("d");
    auto spec = AttentionSpec().mask(row >= kv_idx() && valid(row)).score_mod(
        select(d != 0 && kv_idx() < q_idx() / d, score(), score() * 0.5));
    std::string src = testing::forward_source(spec).source;
    const std::string make_row = function_body(src, "static Row make_row(");
    const std::string mask = function_body(src, "static bool mask(");
    const std::string score_mod = function_body(src, "static float score_mod(");
    // The row's dq is loaded once per row; valid[...] only where r0 >= k holds.
    EXPECT_NE(make_row.find("r.r0 = attnjit::to_int(p.tensor_dq.ptr["), std::string::npos) << make_row;
    EXPECT_EQ(make_row.find("tensor_valid"), std::string::npos) << make_row;
    EXPECT_NE(mask.find("return r.r0 >= k && attnjit::to_bool(p.tensor_valid.ptr[r.r0 * p.tensor_valid.stride[0]]);"),
              std::string::npos)
        << mask;
    // q / d only behind d != 0, never in make_row or a temporary computed up front.
    EXPECT_EQ(make_row.find("/ p.scalar_d"), std::string::npos) << make_row;
    EXPECT_NE(score_mod.find("return hd.h0 && k < q / p.scalar_d ? s : s * 0.5f;"), std::string::npos) << score_mod;
    EXPECT_EQ(score_mod.find("const int"), std::string::npos) << score_mod;
}

}  // namespace
}  // namespace attnjit::codegen
