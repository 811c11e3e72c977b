// RA + MLA, seed 000's combination: GPT-2-sized heads (12 x 64) attending over a latent K/V of
// 64 shared by all heads (MLA), with the reciprocal band on top (RA): inside 0 <= i - j <= 64
// each score also gets alpha_h s_ji, where s_ji = <Q_lat[j], K_lat[i]> / sqrt(L) pairs the
// earlier query with the later key (SEMANTICS.md section 4). The band's transposed product
// runs in Q's space (K_lat W_qlat[h]^T at the query rows, computed once per CTA), so neither
// Q_lat of other rows nor a second N x N matrix is formed (docs/latent.md). Forward; its backward as in 11_mla_training.cpp.
// With a GPU: checked against the fp64 reference and timed; without one: compiled for sm_90a.
#include "examples/example_util.h"

int main() {
    using namespace attnjit;
    constexpr int kLatent = 64, kHeadDim = 64;
    examples::Example ex;
    ex.title = "10_ra_mla: reciprocal band 64 over a latent K/V of 64 shared by 12 heads (seed 000's RA + MLA)";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dims(kHeadDim, kHeadDim)
                  .latent(kLatent, "w_qlat", "w_vup")
                  .reciprocal_band(64, "alpha");  // causal: j > i masked
    ex.check = {2, 12, 1, 300, 300};  // self-attention, kv_heads 1
    ex.timed = {8, 12, 1, 4096, 4096};
    ex.add_inputs = [spec = ex.spec](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        examples::add_latent_weights(spec, in, d, seed);
        reference::HostTensor alpha(DType::f32, {d.q_heads});
        reference::fill_normal(alpha, seed + 2, 0.5, 0.1);  // seed 000's alpha 0.5, a little apart per head
        in.tensors.emplace("alpha", std::move(alpha));
    };
    return examples::run(ex);
}
