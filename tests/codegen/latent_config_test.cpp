// The latent projection's kernel configuration (KernelConfig::latent, sm80/latent.cuh): the
// forward runs the sm80 loop at head dim L with the projections staged in the K/V region,
// shared memory counts all three uses of that region, L over 256 splits the columns across two
// warps a row group, and what it cannot run yet (Dv over 128 beside L over 256, f32, the
// backward, a reciprocal band beside it, a GPU too small) is a UserError that says so.
#include <gtest/gtest.h>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "common/expect_error.h"
#include "common/forward_source.h"

namespace attnjit::codegen {
namespace {

using dsl::AttentionSpec;

AttentionSpec latent_spec(int d, int dv, int l, DType dt = DType::bf16) {
    return AttentionSpec().dtype(dt).head_dims(d, dv).latent(l, "w_qlat", "w_vup");
}

TEST(LatentConfig, ForwardRunsTheSm80LoopAtTheLatentDim) {
    const KernelConfig c = make_config(latent_spec(128, 64, 256), KernelKind::forward, "sm_90a");
    EXPECT_EQ(c.mainloop, MainloopKind::sm80);
    EXPECT_EQ(c.latent, 256);
    EXPECT_EQ(c.head_dim_qk, 128);  // Q's and O's dims stay the spec's
    EXPECT_EQ(c.head_dim_v, 64);
    EXPECT_FALSE(c.bias_tile);
    EXPECT_NE(config_id(c).find("_lat256"), std::string::npos) << config_id(c);
}

TEST(LatentConfig, SharedMemoryHoldsTheLargestUseOfTheStagingRegion) {
    KernelConfig c = make_config(latent_spec(128, 128, 128), KernelKind::forward, "sm_90a");
    c.tile = TileConfig{64, 64, 4, 1};
    // Q_lat [64 x 128], then max(K + V = 64 x 256, Q + W_qlat = 64 x 128 + 128 x 128, W_vup = 128 x 128).
    EXPECT_EQ(smem_bytes(c), scratch_bytes(4) + 2 * (64 * 128 + 64 * 128 + 128 * 128));
    c.tile = TileConfig{64, 64, 4, 2};  // two stages: the pipeline is the largest
    EXPECT_EQ(smem_bytes(c), scratch_bytes(4) + 2 * (64 * 128 + 2 * 64 * 256));
}

TEST(LatentConfig, DefaultTilesFitEveryGpu) {
    for (const char* arch : {"sm_80", "sm_86", "sm_90a"})
        for (int l : {64, 128}) {
            const KernelConfig c = make_config(latent_spec(128, 128, l), KernelKind::forward, arch);
            EXPECT_LE(smem_bytes(c), max_dynamic_smem_bytes(sm_version(arch))) << arch << " L" << l;
        }
}

TEST(LatentConfig, WhatIsNotBuiltYetIsAUserError) {
    EXPECT_USER_ERROR(make_config(latent_spec(128, 256, 512), KernelKind::forward, "sm_90a"), "Dv <= 128");
    EXPECT_USER_ERROR(make_config(latent_spec(128, 128, 128, DType::f32), KernelKind::forward, "sm_90a"),
                      "f16 or bf16");
    // L 256 on the 99 KiB GPUs: its staging does not fit.
    EXPECT_USER_ERROR(make_config(latent_spec(128, 128, 256), KernelKind::forward, "sm_86"), "shared memory");
    const AttentionSpec spec = latent_spec(128, 128, 128);
    // The backward kernels run on the spec without latent() (api/latent_backward.h).
    EXPECT_USER_ERROR(generate(spec, make_config(spec, KernelKind::backward_fused, "sm_90a"), "sm_90a"),
                      "generate those for the spec's no_latent() copy");
    AttentionSpec band = latent_spec(128, 128, 512);
    band.reciprocal_band(64, "alpha");
    EXPECT_USER_ERROR(make_config(band, KernelKind::forward, "sm_90a"), "fused RA + MLA kernel runs up to L = 256");
}

// latent_gemm's tile: 128 x 128 C tiles, three stages of k (two on the 99 KiB GPUs); its
// checks refuse other grids, f32 and structural features.
TEST(LatentConfig, LatentGemmTile) {
    const AttentionSpec plain = AttentionSpec().dtype(DType::bf16).head_dims(128, 128);
    const KernelConfig c = make_config(plain, KernelKind::latent_gemm, "sm_90a");
    EXPECT_EQ(c.tile, (TileConfig{128, 128, 8, 3}));
    EXPECT_EQ(smem_bytes(c), 3 * 256 * kLatentGemmBlockK * 2);
    EXPECT_EQ(make_config(plain, KernelKind::latent_gemm, "sm_86").tile, (TileConfig{128, 128, 8, 2}));
    for (TileConfig t : {TileConfig{128, 64, 8, 3}, TileConfig{128, 128, 7, 3}, TileConfig{128, 128, 8, 1},
                         TileConfig{96, 128, 8, 3}})
        EXPECT_NE(why_config_invalid(KernelConfig{KernelKind::latent_gemm, MainloopKind::sm80, ElemKind::bf16, 128,
                                                  128, t}),
                  nullptr)
            << t;
    EXPECT_NE(why_config_invalid(KernelConfig{KernelKind::latent_gemm, MainloopKind::sm80, ElemKind::f32, 128, 128,
                                              TileConfig{128, 128, 8, 3}}),
              nullptr);
    EXPECT_EQ(why_config_invalid(KernelConfig{KernelKind::latent_gemm, MainloopKind::sm80, ElemKind::f16, 128, 128,
                                              TileConfig{64, 128, 4, 2}}),
              nullptr);
}

TEST(LatentConfig, OverTwoHundredFiftySixTwoWarpsShareARowGroup) {
    for (int l : {264, 512}) {
        const KernelConfig c = make_config(latent_spec(128, 128, l), KernelKind::forward, "sm_90a");
        EXPECT_EQ(latent_col_split(c.latent), 2);
        EXPECT_EQ(c.tile, (TileConfig{64, 32, 8, 2}));
        // Q_lat [64 x 512] | K, V [2 stages][32 x 512] each (the largest use, with W_vup [512 x 128]) |
        // partial scores [2 x 64 x 32] f32.
        EXPECT_EQ(smem_bytes(c), scratch_bytes(8) + 2 * (64 * 512 + 2 * 2 * 32 * 512) + 2 * 64 * 32 * 4);
    }
    KernelConfig c = make_config(latent_spec(128, 128, 512), KernelKind::forward, "sm_90a");
    c.tile = TileConfig{128, 64, 8, 1};  // 32 rows a warp pair: not the split's grid
    EXPECT_NE(why_config_invalid(c), nullptr);
    EXPECT_USER_ERROR(make_config(latent_spec(128, 128, 512), KernelKind::forward, "sm_80"), "shared memory");
}

// RA + MLA: the band's tiles are Q-wide (K_lat W_qlat[h]^T at the query rows, Q at the key
// rows), and the prologue also stages the latent K at the query rows.
TEST(LatentConfig, WithAReciprocalBandTheBandTilesAreQWide) {
    AttentionSpec spec = latent_spec(64, 64, 256);
    spec.reciprocal_band(64, "alpha");
    KernelConfig c = make_config(spec, KernelKind::forward, "sm_90a");
    EXPECT_TRUE(c.recip_band);
    c.tile = TileConfig{64, 64, 4, 2};
    // Q_lat [64 x 256] | max(K, V [2][64 x 256], Q + W_qlat + K_lat rows = 64 x 64 + 64 x 256 + 64 x 256,
    // W_vup [256 x 64]) | K at the query rows [64 x 64] | Q at the key rows [2][64 x 64].
    EXPECT_EQ(smem_bytes(c), scratch_bytes(4) + 2 * (64 * 256 + 2 * 2 * 64 * 256 + 64 * 64 + 2 * 64 * 64));
    const std::string src = testing::forward_source(spec, std::nullopt, "sm_90a").source;
    EXPECT_NE(src.find("recip_band_alpha"), std::string::npos);
    EXPECT_NE(src.find(", false, false, true, 256>;"), std::string::npos) << "the Traits carry the band and L";
}

TEST(LatentConfig, TheVariantGetsTheWeightsOfItsHead) {
    const std::string src = testing::forward_source(latent_spec(64, 64, 128), std::nullopt, "sm_90a").source;
    EXPECT_NE(src.find("static constexpr int kLatentDim = 128;"), std::string::npos);
    EXPECT_NE(src.find("latent_weights(const Params& p, int h)"), std::string::npos);
    EXPECT_NE(src.find(", false, false, false, 128>;"), std::string::npos) << "the Traits carry L";
}

}  // namespace
}  // namespace attnjit::codegen
