// bias_tile: which score_mod reads become the staged bias tile (codegen/bias_tile.h), and
// what the forward source and configuration make of it.
#include <gtest/gtest.h>

#include "codegen/bias_tile.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "common/forward_source.h"
#include "dsl/dsl.h"
#include "dsl/printer.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

std::string leading_text(const BiasTile& b) {
    std::string s;
    for (const auto& i : b.leading) s += (s.empty() ? "" : ", ") + to_string(i);
    return s;
}

TEST(BiasTile, FindsAPairBiasAndItsLeadingIndices) {
    Tensor bias("bias", DType::bf16, 4), pair("pair", DType::f16, 4), mask_bias("mask_bias", DType::bf16, 4);
    auto b = find_bias_tile(score() + bias(batch(), head(), q_idx(), kv_idx()));
    ASSERT_TRUE(b);
    EXPECT_EQ(b->tensor, "bias");
    EXPECT_EQ(b->dtype, DType::bf16);
    EXPECT_EQ(leading_text(*b), "b, h");
    // AlphaFold's MSA logits: the per-key mask bias is no tile; the pair bias is.
    b = find_bias_tile(score() + mask_bias(batch(), 0, 0, kv_idx()) + pair(0, head(), q_idx(), kv_idx()));
    ASSERT_TRUE(b);
    EXPECT_EQ(b->tensor, "pair");
    EXPECT_EQ(b->dtype, DType::f16);
    EXPECT_EQ(leading_text(*b), "0, h");
    Tensor plane("plane", DType::bf16, 2);
    b = find_bias_tile(score() * 0.5f + plane(q_idx(), kv_idx()));
    ASSERT_TRUE(b);
    EXPECT_TRUE(b->leading.empty());
}

TEST(BiasTile, RefusesReadsItCannotStage) {
    Tensor f32("bias", DType::f32, 4), bias("bias", DType::bf16, 4);
    EXPECT_FALSE(find_bias_tile(score() + f32(batch(), head(), q_idx(), kv_idx())));  // 4-byte elements
    EXPECT_FALSE(find_bias_tile(score() + bias(batch(), head(), kv_idx(), q_idx())));  // transposed
    EXPECT_FALSE(find_bias_tile(score() + bias(q_idx() % 2, head(), q_idx(), kv_idx())));  // leading reads q
    EXPECT_FALSE(find_bias_tile(score() + bias(batch(), head(), q_idx() + 1, kv_idx())));  // shifted
    // Two different (batch, head) planes of one tensor in one score_mod.
    EXPECT_FALSE(find_bias_tile(score() + bias(0, head(), q_idx(), kv_idx()) + bias(1, head(), q_idx(), kv_idx())));
    EXPECT_FALSE(find_bias_tile(Expr()));
}

TEST(BiasTile, TheSecondTensorWhenTheFirstCannotBeStaged) {
    Tensor a("a", DType::f32, 2), c("c", DType::bf16, 3);
    auto b = find_bias_tile(score() + a(q_idx(), kv_idx()) + c(head(), q_idx(), kv_idx()));
    ASSERT_TRUE(b);
    EXPECT_EQ(b->tensor, "c");
}

TEST(BiasTile, ForwardSourceReadsTheTileAndKeepsOtherReadsOfTheTensor) {
    Tensor bias("bias", DType::bf16, 4);
    AttentionSpec spec;
    spec.dtype(DType::bf16).head_dim(64).score_mod(score() + bias(batch(), head(), q_idx(), kv_idx()) +
                                                   bias(batch(), head(), kv_idx(), q_idx()) * 0.5f);
    const KernelSource k = testing::forward_source(spec, std::nullopt, "sm_90a");
    EXPECT_TRUE(k.config.bias_tile);
    EXPECT_EQ(k.smem_bytes, smem_bytes(k.config));
    KernelConfig without = k.config;
    without.bias_tile = false;
    // One 16-bit tile: a buffer in the sm80 loop, a stage beside each K/V stage in the sm90 one.
    const int buffers = k.config.mainloop == MainloopKind::sm90 ? k.config.tile.stages : 1;
    EXPECT_EQ(k.smem_bytes, smem_bytes(without) + 2 * buffers * k.config.tile.block_m * k.config.tile.block_n);
    EXPECT_NE(k.source.find("static constexpr bool kHasBiasTile = true;"), std::string::npos);
    EXPECT_NE(k.source.find("using BiasTileElement = attnjit::bf16_t;"), std::string::npos);
    EXPECT_NE(k.source.find("return {p.tensor_bias.ptr + (hd.b * p.tensor_bias.stride[0] + hd.h * "
                            "p.tensor_bias.stride[1]), p.tensor_bias.stride[2], p.tensor_bias.stride[3], p.tensor_bias.ptr};"),
              std::string::npos)
        << k.source;
    // The direct read is the argument; the transposed one stays a memory read.
    EXPECT_NE(k.source.find("return s + tile_bias + attnjit::to_float(p.tensor_bias.ptr[hd.b * p.tensor_bias.stride[0] "
                            "+ hd.h * p.tensor_bias.stride[1] + k * p.tensor_bias.stride[2] + q * "
                            "p.tensor_bias.stride[3]]) * 0.5f;"),
              std::string::npos)
        << k.source;
    EXPECT_NE(k.source.find(", 2, false, true>;"), std::string::npos);
    EXPECT_NE(k.name.find("_bias_"), std::string::npos) << k.name;
}

TEST(BiasTile, OnlyTheForwardStagesIt) {
    Tensor bias("bias", DType::bf16, 4);
    AttentionSpec spec;
    spec.dtype(DType::bf16).head_dim(64).score_mod(score() + bias(batch(), head(), q_idx(), kv_idx()));
    // Backward kernels stage no tile. backward_dkdv and backward_fused read the bias element
    // by element through the usual score_mod; backward_dq's plan knows the tile (its
    // batch-sum launch reads one that every batch row shares once), here one that varies
    // with b.
    for (KernelKind kind : {KernelKind::backward_dq, KernelKind::backward_dkdv, KernelKind::backward_fused}) {
        const KernelPlan plan = lower(spec, spec_inputs(spec), kind);
        EXPECT_EQ(plan.bias_tile.has_value(), kind == KernelKind::backward_dq) << kernel_kind_name(kind);
        if (plan.bias_tile) {
            EXPECT_FALSE(plan.bias_tile->batch_invariant);
        }
        EXPECT_FALSE(make_config(spec, kind, "sm_90a").bias_tile) << kernel_kind_name(kind);
    }
    AttentionSpec shared = spec;  // a pair bias every batch row reads: bias[0, h, i, j]
    shared.score_mod(score() + bias(Expr(0), head(), q_idx(), kv_idx()));
    const KernelPlan dq = lower(shared, spec_inputs(shared), KernelKind::backward_dq);
    ASSERT_TRUE(dq.bias_tile);
    EXPECT_TRUE(dq.bias_tile->batch_invariant);
    EXPECT_NE(generate(shared, make_config(shared, KernelKind::backward_dq, "sm_90a"), "sm_90a").source.find(
                  "static constexpr bool kBiasTileBatchInvariant = true;"),
              std::string::npos);
    // On sm_90a the forward runs the sm90 loop, which stages it by bulk copies.
    const KernelConfig hopper = make_config(spec, KernelKind::forward, "sm_90a");
    EXPECT_EQ(hopper.mainloop, MainloopKind::sm90);
    EXPECT_TRUE(hopper.bias_tile);
    EXPECT_TRUE(make_config(spec, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm80).bias_tile);
    // A block_n that is not whole chunk groups: gathered, still correct.
    EXPECT_FALSE(make_config(spec, KernelKind::forward, "sm_90a", TileConfig{64, 16, 4, 2}).bias_tile);
    EXPECT_TRUE(make_config(spec, KernelKind::forward, "sm_90a", TileConfig{64, 32, 4, 2}).bias_tile);
    // The sm90 loop stages it at 128 keys only (at 64 the staged reads were wrong on the H100);
    // its 64-key tile reads the bias element by element.
    EXPECT_TRUE(make_config(spec, KernelKind::forward, "sm_90a", TileConfig{128, 128, 12, 2}).bias_tile);
    const KernelConfig hopper64 = make_config(spec, KernelKind::forward, "sm_90a", TileConfig{128, 64, 12, 2});
    EXPECT_EQ(hopper64.mainloop, MainloopKind::sm90);
    EXPECT_FALSE(hopper64.bias_tile);
    // Over head dim 128 no staged tile fits the sm90 loop (128 keys need too many registers
    // there): it keeps the loop, on 80 keys, and reads the bias element by element.
    AttentionSpec wide = spec;
    wide.head_dims(256, 256);
    const KernelConfig hopper256 = make_config(wide, KernelKind::forward, "sm_90a");
    EXPECT_EQ(hopper256.mainloop, MainloopKind::sm90);
    EXPECT_EQ(hopper256.tile.block_n, 80);
    EXPECT_FALSE(hopper256.bias_tile);
    EXPECT_EQ(make_config(wide, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm90), hopper256);
    // f32 runs the simt loop, which gathers: the Variant still takes the bias as an argument.
    AttentionSpec f32 = spec;
    f32.dtype(DType::f32);
    const KernelSource k = testing::forward_source(f32, std::nullopt, "sm_90a");
    EXPECT_FALSE(k.config.bias_tile);
    EXPECT_NE(k.source.find("float tile_bias)"), std::string::npos);
    // A score convolution's loop does not stage it.
    Tensor theta("theta", DType::f32, 3);
    AttentionSpec conv = spec;
    conv.score_conv("theta", 3, 3);
    EXPECT_FALSE(bias_tile_of(conv));
}

TEST(BiasTile, SmallHeadDimsDefaultToTheTileThatKeepsMoreLoadsInFlight) {
    Tensor pair("pair", DType::bf16, 4);
    AttentionSpec spec;
    spec.dtype(DType::bf16).head_dim(32).score_mod(score() + pair(0, head(), q_idx(), kv_idx()));
    EXPECT_EQ(make_config(spec, KernelKind::forward, "sm_90a").tile, (TileConfig{64, 64, 4, 2}));
    AttentionSpec plain;
    plain.dtype(DType::bf16).head_dim(32);
    EXPECT_EQ(make_config(plain, KernelKind::forward, "sm_90a").tile, (TileConfig{128, 128, 4, 2}));
    spec.head_dim(128);  // the sm80 loop's tile (sm_90a's default is the sm90 loop's)
    EXPECT_EQ(make_config(spec, KernelKind::forward, "sm_90a", std::nullopt, MainloopKind::sm80).tile,
              (TileConfig{128, 64, 4, 2}));
}

TEST(BiasTile, ConfigRulesSayWhy) {
    KernelConfig c{KernelKind::backward_dq, MainloopKind::sm80, ElemKind::bf16, 64, 64, TileConfig{64, 64, 4, 2}};
    c.bias_tile = true;
    EXPECT_STREQ(why_config_invalid(c),
                 "the staged bias tile is a feature of the sm80 and sm90 forward without a score convolution");
    c = KernelConfig{KernelKind::forward, MainloopKind::sm80, ElemKind::bf16, 64, 64, TileConfig{64, 48, 4, 2}};
    c.bias_tile = true;
    EXPECT_STREQ(why_config_invalid(c), "the staged bias tile needs block_n a multiple of 32");
}

}  // namespace
}  // namespace attnjit::codegen
