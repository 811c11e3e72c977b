// Bad AttentionSpec fields and bad tiles: UserError naming the field and the value.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "codegen/generate.h"
#include "dsl/dsl.h"
#include "api/attention.h"
#include "api/attention_backward.h"
#include "tests/common/expect_error.h"
#include "tests/common/forward_source.h"

namespace attnjit {
namespace {

using dsl::AttentionSpec;

TEST(SpecErrors, UnsupportedHeadDim) {
    // The spec itself is fine; no kernel has head dim 84 (not a multiple of 8), which the
    // kernel's config says, naming what is supported.
    EXPECT_NO_THROW(AttentionSpec().head_dim(84).validate());
    EXPECT_USER_ERROR(testing::forward_source(AttentionSpec().head_dim(84)), "head dim 84 is not supported");
    EXPECT_USER_ERROR(testing::forward_source(AttentionSpec().head_dim(84)), "multiples of 8 from 8 to 256");
    EXPECT_USER_ERROR(AttentionSpec().head_dim(0).validate(), "head dim 0 is not positive");
}

TEST(SpecErrors, UnsupportedValueHeadDim) {
    EXPECT_USER_ERROR(testing::forward_source(AttentionSpec().head_dims(128, 512)), "head_dims(128, 512): head dim 512");
}

TEST(SpecErrors, ZeroHeadDim) { EXPECT_USER_ERROR(AttentionSpec().head_dim(0).validate(), "head dim 0"); }

TEST(SpecErrors, IntegerDtype) {
    EXPECT_USER_ERROR(AttentionSpec().dtype(DType::i32).validate(), "AttentionSpec.dtype is i32; Q, K, V must be f16");
}

TEST(SpecErrors, ByteDtype) { EXPECT_USER_ERROR(AttentionSpec().dtype(DType::u8).validate(), "dtype is u8"); }

TEST(SpecErrors, HeadsNotDivisible) {
    EXPECT_USER_ERROR(AttentionSpec().heads(6, 4).validate(),
                      "heads(6, 4): query heads must be a multiple of key/value heads");
}

TEST(SpecErrors, OnlyOneHeadCount) {
    EXPECT_USER_ERROR(AttentionSpec().heads(8, 0).validate(), "heads(8, 0): give both head counts");
}

TEST(SpecErrors, NegativeHeads) { EXPECT_USER_ERROR(AttentionSpec().heads(-2, -1).validate(), "heads(-2, -1)"); }

TEST(SpecErrors, NegativeScaleWithoutScoreMod) {
    EXPECT_USER_ERROR(AttentionSpec().scale(-0.5).validate(), "a negative scale needs a score_mod");
    EXPECT_NO_THROW(AttentionSpec().scale(-0.5).score_mod(dsl::score() * 2.0).validate());
}

TEST(SpecErrors, ScaleOutsideFp32) {
    EXPECT_USER_ERROR(AttentionSpec().scale(1e-46).validate(), "must be a normal fp32 number");
    EXPECT_USER_ERROR(AttentionSpec().scale(1e39).validate(), "must be a normal fp32 number");
}

TEST(SpecErrors, ZeroScale) {
    EXPECT_USER_ERROR(AttentionSpec().scale(0.0).validate(), "scale(0): the softmax scale must be finite and non-zero");
}

TEST(SpecErrors, InfiniteScale) {
    EXPECT_USER_ERROR(AttentionSpec().scale(std::numeric_limits<double>::infinity()).validate(), "scale(inf)");
}

TEST(SpecErrors, NanScale) { EXPECT_USER_ERROR(AttentionSpec().scale(std::nan("")).validate(), "scale(nan)"); }

// Tiles are refused by the same rules (templates/attnjit/common/kernel_config.h) in codegen and
// in the facade, before anything is compiled: no GPU or NVRTC is needed.
TEST(SpecErrors, GeneratorRejectsBadTile) {
    AttentionSpec s = AttentionSpec().dtype(DType::f16).head_dim(128);
    EXPECT_USER_ERROR(testing::forward_source(s, TileConfig{100, 64, 4, 2}), "block_m must be a multiple of 16");
}

TEST(SpecErrors, GeneratorRejectsTileTooLargeForSharedMemory) {
    AttentionSpec s = AttentionSpec().dtype(DType::bf16).head_dim(256);
    EXPECT_USER_ERROR(testing::forward_source(s, TileConfig{256, 256, 4, 3}), "227 KiB");
}

TEST(SpecErrors, FacadeRejectsBadTile) {
    CompileOptions o;
    o.arch = "sm_80";
    o.tile = TileConfig{64, 64, 4, 2};  // fp32 needs stages == 1
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::f32).head_dim(64), o),
                      "kernel forward simt f32 d64x64 block_m=64 block_n=64 warps=4 stages=2 is not valid on sm_80: "
                      "simt: stages must be 1");
}

TEST(SpecErrors, FacadeRejectsTooManyWarps) {
    CompileOptions o;
    o.arch = "sm_80";
    o.tile = TileConfig{128, 64, 32, 2};
    EXPECT_USER_ERROR(Attention(AttentionSpec().head_dim(64), o), "warps must be in [1, 16]");
}

// CompileOptions.mainloop = sm90 where the Hopper loop cannot run: another arch, a structural
// modifier, a head dim outside its tiles, f32. Each says what it needs and how to get a loop.
TEST(SpecErrors, FacadeRejectsTheSm90LoopWhereItCannotRun) {
    CompileOptions o;
    o.mainloop = MainloopKind::sm90;
    const char* needs = "the sm90 main loop runs the forward on sm_90a, for f16 / bf16";
    o.arch = "sm_80";
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dim(128), o), needs);
    o.arch = "sm_90a";
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dim(32), o), needs);
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::f32).head_dim(128), o), needs);
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dim(128).reciprocal_band(8, "alpha"), o),
                      "leave CompileOptions.mainloop unset");
    o.tile = TileConfig{128, 128, 12, 1};  // the consumers hold a stage while they wait for the next
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dim(128), o), "sm90: stages 2 to 4");
    o.tile = TileConfig{128, 128, 12, 2};  // 128 keys beside V at 256: too many registers
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dims(64, 256), o),
                      "sm90: block_n + the tile head dim of V at most 368");
    o.tile = TileConfig{192, 128, 16, 2};  // three consumers' 160 registers: tile head dims of 64 only
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dim(128), o),
                      "sm90: block_m 192 (three consumer warpgroups of 160 registers) at tile head dims of 64");
    o.tile = TileConfig{192, 128, 12, 2};
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::bf16).head_dim(64), o), "sm90: block_m 128 with 12 warps or 192 with 16");
    CompileOptions sm80;
    sm80.arch = "sm_90a";
    sm80.mainloop = MainloopKind::sm80;
    EXPECT_USER_ERROR(Attention(AttentionSpec().dtype(DType::f32).head_dim(64), sm80), "the sm80 loop takes f16 or bf16");
}

// AttentionBackward with mainloop = sm90 runs backward_dkdv on the sm90 loop, which carries no
// structural modifier or input gradient yet, and no head dim over 128.
TEST(SpecErrors, BackwardRejectsTheSm90LoopWhereItCannotRun) {
    CompileOptions o;
    o.mainloop = MainloopKind::sm90;
    o.arch = "sm_90a";
    const AttentionSpec base = AttentionSpec().dtype(DType::bf16).head_dim(128).return_lse();
    const char* modifiers = "the sm90 backward has no latent projection, score convolution, reciprocal band or gradients";
    EXPECT_USER_ERROR(AttentionBackward(AttentionSpec(base).reciprocal_band(8, "alpha"), o), modifiers);
    CompileOptions grads = o;
    grads.grads = {"cap"};
    EXPECT_USER_ERROR(AttentionBackward(AttentionSpec(base).score_mod(dsl::mods::softcap(dsl::scalar("cap"))), grads), modifiers);
    EXPECT_USER_ERROR(AttentionBackward(AttentionSpec().dtype(DType::bf16).head_dim(256).return_lse(), o),
                      "backward_dkdv / backward_fused at head dims up to 128");
    o.arch = "sm_80";
    EXPECT_USER_ERROR(AttentionBackward(base, o), "the sm90 main loop runs the forward on sm_90a");
    o.arch = "sm_90a";
    EXPECT_NO_THROW(AttentionBackward(base, o));  // compiles for sm_90a (no GPU needed)
}

TEST(SpecErrors, FacadeValidatesTheSpecFirst) {
    CompileOptions o;
    o.arch = "sm_80";
    EXPECT_USER_ERROR(Attention(AttentionSpec().head_dim(44), o), "head dim 44");
}

}  // namespace
}  // namespace attnjit
