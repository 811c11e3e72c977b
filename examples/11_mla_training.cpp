// Training step through multi-head latent attention (MLA, seed 000): the latent K/V [B, N, 512]
// shared by 16 heads, the per-head projections W_qlat [16, 128, 512] and W_vup [16, 512, 128]
// trained too. The forward projects Q and O inside the kernel (docs/latent.md); the backward
// works per head in Q's space and gives dq, dk_lat, dv_lat, dW_qlat and dW_vup,
// deterministically (api/latent_backward.h). With a GPU: every gradient checked against the
// fp64 backward reference and the step timed; without one: the kernels compiled for sm_90a.
#include "dsl/mods.h"
#include "examples/training_util.h"

int main() {
    using namespace attnjit;
    constexpr int kLatent = 512, kHeadDim = 128;
    examples::Example ex;
    ex.title = "11_mla_training: forward + backward of causal MLA (L 512, 16 heads), projections trained";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dims(kHeadDim, kHeadDim)
                  .latent(kLatent, "w_qlat", "w_vup")
                  .mask(dsl::mods::causal())
                  .return_lse();  // the backward reads the forward's LSE
    ex.check = {2, 4, 1, 200, 200};  // kv_heads 1: the latent K/V
    ex.timed = {2, 16, 1, 4096, 4096};
    ex.add_inputs = [spec = ex.spec](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        examples::add_latent_weights(spec, in, d, seed);
    };
    // Each weight's gradient sums over the batch and the keys.
    return examples::run_training(ex, {{"w_qlat", true}, {"w_vup", true}});
}
