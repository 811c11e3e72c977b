// Reciprocal attention (RA, seed 000): inside a band around the diagonal each score also
// gets the transposed score, T_ij = s_ij + alpha_h s_ji for 0 <= i - j <= 64 (SEMANTICS.md
// section 4), with a learned weight alpha per head, trained: the backward gives dQ, dK, dV
// and d alpha (deterministic). The transposed scores are one more tensor-core product on
// the tiles that meet the band; no second N x N matrix (docs/reciprocal_band.md).
// With a GPU: checked against the fp64 backward reference and timed; without one:
// compiled for sm_90a (examples/training_util.h).
#include "examples/training_util.h"

int main() {
    using namespace attnjit;
    examples::Example ex;
    ex.title = "08_reciprocal_band: RA, s_ij + alpha_h s_ji inside a causal band of 64, forward + backward";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dim(128)
                  .reciprocal_band(64, "alpha")  // alpha [Hq], f32; causal (top-left)
                  .return_lse();
    ex.check = {2, 4, 2, 300, 300};  // self-attention: Nq == Nk
    ex.timed = {4, 16, 16, 4096, 4096};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        reference::HostTensor alpha(DType::f32, {d.q_heads});
        reference::fill_normal(alpha, seed, 0.5, 0.1);  // seed 000's alpha, 0.5, a little apart per head
        in.tensors.emplace("alpha", std::move(alpha));
    };
    return examples::run_training(ex, {{"alpha", true}});
}
