// A Multi-Token Attention layer (Golovneva et al. 2025): a learned 6 x 11 convolution over
// each head's causally masked scores before softmax (SEMANTICS.md section 3), trained: the
// backward gives dQ, dK, dV and the kernel's gradient d theta (deterministic). One fused
// kernel a direction, no N x N tensor. For packed sequences add
// `.mask(dsl::mods::document_mask(doc_ids))`: each document then convolves alone
// (docs/score_convolution.md; its cost: bench/results/2026-11-26-h100-eeffed2-conv-mask.md).
// With a GPU: checked against the fp64 backward reference and timed; without one:
// compiled for sm_90a (examples/training_util.h).
#include "examples/training_util.h"

int main() {
    using namespace attnjit;
    constexpr int kCq = 6, kCk = 11;  // the paper's kernel: 6 query rows, 11 keys
    examples::Example ex;
    ex.title = "06_mta_layer: Multi-Token Attention, a learned 6 x 11 convolution over the scores, forward + backward";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dim(128)
                  .score_conv("theta", kCq, kCk)  // theta [Hq, 6, 11], f32; causal by definition
                  .return_lse();
    ex.check = {2, 4, 2, 300, 300};
    ex.timed = {4, 16, 16, 4096, 4096};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        // theta near the identity (the paper's initialisation), not equal to it.
        reference::HostTensor theta(DType::f32, {d.q_heads, kCq, kCk});
        reference::fill_normal(theta, seed, 0.0, 0.3);
        for (int64_t h = 0; h < d.q_heads; ++h)
            theta.set({h, kCq - 1, (kCk - 1) / 2}, theta.get({h, kCq - 1, (kCk - 1) / 2}) + 1.0);
        in.tensors.emplace("theta", std::move(theta));
    };
    return examples::run_training(ex, {{"theta", true}});
}
