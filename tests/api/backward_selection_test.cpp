// Which main loop AttentionBackward's kernels take (compiled for an arch, no GPU needed): on
// sm_90a the kernel that owns the keys runs on the sm90 loop where it carries the spec, unless
// CompileOptions asks for sm80 or gives a tile; everything else stays on sm80 / simt.
#include <gtest/gtest.h>

#include "api/attnjit.h"

namespace attnjit {
namespace {

CompileOptions for_arch(const char* arch) {
    CompileOptions o;
    o.arch = arch;
    return o;
}

MainloopKind loop_of(const AttentionBackward& b, KernelKind kind) { return b.config(kind).mainloop; }

const AttentionSpec kCausal = AttentionSpec().dtype(DType::bf16).head_dim(128).return_lse().mask(dsl::mods::causal());

TEST(BackwardSelection, Sm90aRunsTheFusedKernelOnTheSm90Loop) {
    const AttentionBackward b(kCausal, for_arch("sm_90a"));
    EXPECT_EQ(loop_of(b, KernelKind::backward_fused), MainloopKind::sm90);
    EXPECT_EQ(b.config(KernelKind::backward_fused).tile, (TileConfig{64, 128, kSm90Warps, 2}));
    EXPECT_NE(loop_of(b, KernelKind::backward_stats), MainloopKind::sm90);
    EXPECT_NE(loop_of(b, KernelKind::backward_dq_convert), MainloopKind::sm90);
    CompileOptions two_pass = for_arch("sm_90a");
    two_pass.fused_backward = false;
    const AttentionBackward t(kCausal, two_pass);
    EXPECT_EQ(loop_of(t, KernelKind::backward_dkdv), MainloopKind::sm90);
    EXPECT_EQ(loop_of(t, KernelKind::backward_dq), MainloopKind::sm80);
}

TEST(BackwardSelection, Sm80WhereTheSm90LoopDoesNotCarryIt) {
    EXPECT_EQ(loop_of(AttentionBackward(kCausal, for_arch("sm_80")), KernelKind::backward_fused), MainloopKind::sm80);
    EXPECT_EQ(loop_of(AttentionBackward(kCausal, for_arch("sm_90")), KernelKind::backward_fused), MainloopKind::sm80);
    CompileOptions sm80 = for_arch("sm_90a");
    sm80.mainloop = MainloopKind::sm80;
    EXPECT_EQ(loop_of(AttentionBackward(kCausal, sm80), KernelKind::backward_fused), MainloopKind::sm80);
    CompileOptions tiled = for_arch("sm_90a");
    tiled.tile = TileConfig{64, 64, 8, 2};
    EXPECT_EQ(loop_of(AttentionBackward(kCausal, tiled), KernelKind::backward_fused), MainloopKind::sm80);
    const AttentionSpec d256 = AttentionSpec().dtype(DType::bf16).head_dim(256).return_lse();
    EXPECT_EQ(loop_of(AttentionBackward(d256, for_arch("sm_90a")), KernelKind::backward_fused), MainloopKind::sm80);
    const AttentionSpec band = AttentionSpec().dtype(DType::bf16).head_dim(128).return_lse().reciprocal_band(8, "alpha");
    EXPECT_EQ(loop_of(AttentionBackward(band, for_arch("sm_90a")), KernelKind::backward_fused), MainloopKind::sm80);
    CompileOptions grads = for_arch("sm_90a");
    grads.grads = {"cap"};
    const AttentionSpec softcap = AttentionSpec(kCausal).score_mod(dsl::mods::softcap(dsl::scalar("cap")));
    EXPECT_EQ(loop_of(AttentionBackward(softcap, grads), KernelKind::backward_dkdv), MainloopKind::sm80);
    EXPECT_EQ(loop_of(AttentionBackward(softcap, for_arch("sm_90a")), KernelKind::backward_fused), MainloopKind::sm90);
}

// A mask whose classification reads a tensor (a document mask): the deterministic backward
// takes the two-pass kernels on both loops. The fused one would find each step's predecessor
// in the dQ turns by reading key ranges of the tensor: on the sm90 loop's producer warp that
// ran at 74 TFLOP/s fwd+bwd against 209 for the two-pass one (document mask, N 16384, H200).
TEST(BackwardSelection, DocumentMaskTakesTheTwoPassBackward) {
    const AttentionSpec doc = AttentionSpec(kCausal).mask(dsl::mods::document_mask(dsl::Tensor("doc", DType::i32, 2)));
    const std::vector<KernelKind> two_pass = {KernelKind::backward_dq, KernelKind::backward_dkdv};
    const AttentionBackward hopper(doc, for_arch("sm_90a"));
    EXPECT_EQ(hopper.kernel_kinds(), two_pass);
    EXPECT_EQ(loop_of(hopper, KernelKind::backward_dkdv), MainloopKind::sm90);
    EXPECT_EQ(AttentionBackward(doc, for_arch("sm_80")).kernel_kinds(), two_pass);
    CompileOptions fast = for_arch("sm_90a");
    fast.deterministic = false;  // dQ added in any order: no predecessor to find
    EXPECT_EQ(AttentionBackward(doc, fast).kernel_kinds(),
              (std::vector<KernelKind>{KernelKind::backward_stats, KernelKind::backward_fused,
                                       KernelKind::backward_dq_convert}));
}

// The kernels compile at once (api::prepare_kernels) and stay in launch order; the time is the
// constructor's wall time, 0 for a second backward of the same spec (every kernel in memory).
TEST(BackwardCompile, KernelsCompiledAtOnceKeepTheirOrder) {
    const AttentionSpec spec = AttentionSpec(kCausal).scale(0.0625);  // a spec no other test compiles
    const AttentionBackward first(spec, for_arch("sm_90a"));
    EXPECT_EQ(first.kernel_kinds(), (std::vector<KernelKind>{KernelKind::backward_stats, KernelKind::backward_fused,
                                                              KernelKind::backward_dq_convert}));
    EXPECT_GT(first.compile_seconds(), 0.0);
    const AttentionBackward second(spec, for_arch("sm_90a"));
    EXPECT_EQ(second.compile_seconds(), 0.0);
    for (KernelKind kind : first.kernel_kinds()) EXPECT_EQ(second.config(kind), first.config(kind));
}

}  // namespace
}  // namespace attnjit
