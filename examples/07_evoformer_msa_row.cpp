// AlphaFold's gated MSA row attention with pair bias (SEMANTICS.md section 5), trained:
//   out[s, i, h] = sigmoid(g[s, i, h]) * softmax_j(q . k / sqrt(c) + pair[h, i, j]
//                                                   + mask_bias[s, j]) v
// Q, K, V, g and the output stay in AlphaFold's [S, N, H, c] layout (viewed as [S, H, N, c]
// through strides: no copy); the pair bias is read once for every MSA row s and its
// gradient summed over them (deterministic). With a GPU: checked against the fp64
// backward reference and timed at the benchmark's msa_row shape; without one: compiled
// for sm_90a (examples/training_util.h).
#include "examples/training_util.h"

int main() {
    using namespace attnjit;
    using dsl::batch;
    using dsl::head;
    using dsl::kv_idx;
    using dsl::q_idx;
    const dsl::Tensor pair("pair", DType::bf16, 4);            // [1, H, N, N]: every MSA row reads row 0
    const dsl::Tensor mask_bias("mask_bias", DType::bf16, 4);  // [S, 1, 1, N]: 0 or -1e9 per key
    examples::Example ex;
    ex.title = "07_evoformer_msa_row: gated MSA row attention with pair bias, [S, N, H, c] layout, forward + backward";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dim(32)
                  .score_mod(dsl::score() + pair(dsl::Expr(0), head(), q_idx(), kv_idx()) +
                             mask_bias(batch(), dsl::Expr(0), dsl::Expr(0), kv_idx()))
                  .gate("g")
                  .return_lse();
    ex.tokens_major = true;
    ex.check = {6, 8, 8, 100, 100};     // S 6 MSA rows, H 8, N 100 residues
    ex.timed = {128, 8, 8, 768, 768};   // the benchmark's msa_row S 128, N 768
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        reference::HostTensor p(DType::bf16, {1, d.q_heads, d.q_len, d.kv_len});
        reference::fill_normal(p, seed);
        in.tensors.emplace("pair", std::move(p));
        reference::HostTensor m(DType::bf16, {d.batch, 1, 1, d.kv_len});
        for (int64_t s = 0; s < d.batch; ++s)
            for (int64_t j = 0; j < d.kv_len; ++j)  // about 10% of the keys masked, never all
                m.set({s, 0, 0, j}, (j * 7 + s * 13 + static_cast<int64_t>(seed)) % 10 == 3 ? -1e9 : 0.0);
        in.tensors.emplace("mask_bias", std::move(m));
        reference::HostTensor g = examples::detail::bhnd_tensor(DType::bf16, d.batch, d.q_heads, d.q_len, 32, true);
        reference::fill_normal(g, seed + 1);
        in.tensors.emplace("g", std::move(g));
    };
    return examples::run_training(ex, {{"pair", true}, {"g", false}});
}
