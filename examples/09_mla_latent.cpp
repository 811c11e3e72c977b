// Multi-head latent attention (MLA, seed 000): K and V are one latent tensor each, [B, N, 512],
// shared by every head; each head projects its queries into the latent space and its output
// back, s_ij = <Q_h W_qlat[h], K_lat[j]> / sqrt(512), O_h = P V_lat W_vup[h] (SEMANTICS.md
// section 4). The kernel projects Q in its prologue and O in its epilogue: no [B, N, H, 512]
// tensor is written (docs/latent.md). Training: 11_mla_training.cpp.
// With a GPU: checked against the fp64 reference and timed; without one: compiled for sm_90a.
#include "dsl/mods.h"
#include "examples/example_util.h"

int main() {
    using namespace attnjit;
    constexpr int kLatent = 512, kHeadDim = 128;
    examples::Example ex;
    ex.title = "09_mla_latent: causal attention over a latent K/V of 512 shared by 16 heads, projections fused";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dims(kHeadDim, kHeadDim)
                  .latent(kLatent, "w_qlat", "w_vup")  // [Hq, 128, 512] and [Hq, 512, 128]
                  .mask(dsl::mods::causal());
    ex.check = {2, 4, 1, 300, 300};  // kv_heads 1: the latent K/V
    ex.timed = {2, 16, 1, 8192, 8192};
    ex.add_inputs = [spec = ex.spec](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        examples::add_latent_weights(spec, in, d, seed);
    };
    return examples::run(ex);
}
