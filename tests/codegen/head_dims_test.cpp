// Head dims between the tile sizes (kernel_config.h): every multiple of 8 from 8 to 256 maps
// to the smallest tile head dim at or above it; the config keeps the real dims (its id, its
// printing, the generated Traits) while shared memory is the padded tile's; anything else is
// a UserError that says what is supported.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "common/expect_error.h"
#include "common/forward_source.h"
#include "dsl/example_specs.h"

namespace attnjit::codegen {
namespace {

using dsl::AttentionSpec;

constexpr int kTileDims[] = {32, 64, 96, 128, 256};

TEST(HeadDims, EveryMultipleOf8MapsToTheSmallestTileAtOrAboveIt) {
    for (int d = 8; d <= 256; d += 8) {
        ASSERT_TRUE(head_dim_supported(d)) << d;
        int want = 0;
        for (int t : kTileDims)
            if (want == 0 && t >= d) want = t;
        EXPECT_EQ(tile_head_dim(d), want) << d;
    }
    EXPECT_EQ(tile_head_dim(8), 32);
    EXPECT_EQ(tile_head_dim(40), 64);
    EXPECT_EQ(tile_head_dim(72), 96);
    EXPECT_EQ(tile_head_dim(136), 256);
    for (int t : kTileDims) EXPECT_EQ(tile_head_dim(t), t);
}

TEST(HeadDims, OthersAreNotSupported) {
    for (int d : {-8, 0, 4, 12, 36, 100, 255, 257, 264, 512}) EXPECT_FALSE(head_dim_supported(d)) << d;
}

TEST(HeadDims, UnsupportedHeadDimIsAUserErrorSayingWhatIsSupported) {
    for (int d : {4, 12, 264}) {
        const AttentionSpec spec = AttentionSpec().dtype(DType::bf16).head_dim(d);
        EXPECT_USER_ERROR(make_config(spec, KernelKind::forward, "sm_90a"),
                          "head dim " + std::to_string(d) + " is not supported; supported head dims are the multiples "
                                                            "of 8 from 8 to 256");
        EXPECT_USER_ERROR(make_config(spec, KernelKind::backward_dq, "sm_90a"), "multiples of 8 from 8 to 256");
    }
    EXPECT_USER_ERROR(make_config(AttentionSpec().head_dims(40, 12), KernelKind::forward, "sm_80"),
                      "head_dims(40, 12): head dim 12 is not supported");
    EXPECT_USER_ERROR(make_config(AttentionSpec().head_dim(0), KernelKind::forward, "sm_80"), "head dim 0");
    EXPECT_USER_ERROR(AttentionSpec().head_dim(0).validate(), "head dim 0 is not positive");
}

// The config holds the real dims; its shared memory and validity are those of the tile dims.
TEST(HeadDims, ConfigKeepsTheRealDimsAndSizesTheTilesPadded) {
    for (ElemKind e : {ElemKind::bf16, ElemKind::f32})
        for (KernelKind kind : {KernelKind::forward, KernelKind::backward_dq, KernelKind::backward_dkdv})
            for (int d = 8; d <= 256; d += 8) {
                const KernelConfig real = default_config(kind, e, d, d, 90);
                KernelConfig tile = real;
                tile.head_dim_qk = tile.head_dim_v = tile_head_dim(d);
                EXPECT_EQ(real.head_dim_qk, d);
                EXPECT_EQ(why_config_invalid(real) == nullptr, why_config_invalid(tile) == nullptr) << real;
                if (head_dims_padded(real)) {
                    EXPECT_NE(real, tile);
                    EXPECT_EQ(smem_bytes(real), smem_bytes(tile)) << real;
                } else if (is_backward(kind) && real.mainloop == MainloopKind::simt) {
                    // The simt backward works element by element at the real dims.
                    EXPECT_EQ(smem_bytes(real) <= smem_bytes(tile), true) << real;
                    EXPECT_EQ(smem_bytes(real) == smem_bytes(tile), d == tile_head_dim(d)) << real;
                } else {
                    EXPECT_EQ(d, tile_head_dim(d)) << real;
                }
            }
}

TEST(HeadDims, ConfigIdAndPrintingNameTheRealDims) {
    const KernelConfig c = make_config(AttentionSpec().dtype(DType::bf16).head_dims(40, 72), KernelKind::forward,
                                       "sm_90a");
    EXPECT_EQ(c.head_dim_qk, 40);
    EXPECT_EQ(c.head_dim_v, 72);
    EXPECT_EQ(config_id(c).rfind("fwd_sm80_bf16_d40x72_", 0), 0u) << config_id(c);
    std::ostringstream s;
    s << c;
    EXPECT_NE(s.str().find("forward sm80 bf16 d40x72 (tiles d64x96) block_m="), std::string::npos) << s.str();
    // Distinct real dims sharing a tile are distinct kernels.
    const KernelConfig other = make_config(AttentionSpec().dtype(DType::bf16).head_dims(48, 72), KernelKind::forward,
                                           "sm_90a");
    EXPECT_NE(config_id(c), config_id(other));
    // At a tile head dim nothing is added.
    std::ostringstream t;
    t << make_config(AttentionSpec().dtype(DType::bf16).head_dim(64), KernelKind::forward, "sm_90a");
    EXPECT_EQ(t.str().find("tiles"), std::string::npos) << t.str();
}

TEST(HeadDims, GeneratedTraitsCarryTheRealDims) {
    const AttentionSpec spec = dsl::example_spec("causal", DType::bf16, 40);
    for (const char* arch : {"sm_80", "sm_90a"}) {  // the sm80 loop, then the sm90 one
        const KernelSource k = testing::forward_source(spec, std::nullopt, arch);
        const std::string loop = std::string(arch) == "sm_80" ? "sm80" : "sm90";
        EXPECT_NE(k.source.find("attnjit::ForwardTraits<attnjit::MainloopKind::" + loop + ", attnjit::bf16_t, 40, 40,"),
                  std::string::npos)
            << k.source;
        EXPECT_EQ(k.smem_bytes, smem_bytes(make_config(dsl::example_spec("causal", DType::bf16, 64),
                                                       KernelKind::forward, arch)));
    }
}

// The fused backward takes the real dims whose tiles are 64 or 128; the sm80 backward up to
// 128; above that the simt loop, as at 256.
TEST(HeadDims, BackwardPathsFollowTheTileDims) {
    for (int d = 8; d <= 256; d += 8) {
        const int t = tile_head_dim(d);
        EXPECT_EQ(fused_backward_head_dims(d, d), t == 64 || t == 128 || t == 256) << d;
        EXPECT_EQ(fused_backward_runs(ElemKind::bf16, d, d, 90), t == 64 || t == 128 || t == 256) << d;
        EXPECT_EQ(fused_backward_runs(ElemKind::bf16, d, d, 86), t == 64 || t == 128) << d;  // 99 KiB
        EXPECT_FALSE(fused_backward_runs(ElemKind::f32, d, d, 90)) << d;
        EXPECT_EQ(default_mainloop(KernelKind::backward_dq, ElemKind::bf16, d, d, 90),
                  t <= 128 ? MainloopKind::sm80 : MainloopKind::simt)
            << d;
    }
    EXPECT_FALSE(fused_backward_head_dims(40, 72));
    EXPECT_TRUE(fused_backward_head_dims(40, 112));
    EXPECT_TRUE(fused_backward_head_dims(256, 40));   // V's tile 64 beside Q/K's 256 (column halves)
    EXPECT_FALSE(fused_backward_head_dims(40, 256));  // Q/K's 64 would pad to 128 under the split
}

}  // namespace
}  // namespace attnjit::codegen
