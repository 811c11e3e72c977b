// An additive pair bias [1, H, N, N] (e.g. AlphaFold's pair representation projected per
// head) shared by every batch row: the batch stride is 0, so nothing is copied.
#include "examples/example_util.h"

int main() {
    using namespace attnjit;
    namespace mods = dsl::mods;

    dsl::Tensor bias("bias", DType::bf16, 4);  // read as bias[b, h, i, j]
    auto spec = dsl::AttentionSpec()
                    .dtype(DType::bf16)
                    .head_dim(64)
                    .score_mod(mods::bias(bias));  // score + bias[b, h, i, j]

    examples::Example ex;
    ex.title = "03_bias_broadcast: score + bias[b, h, i, j], one [1, H, N, N] bias for every b (stride 0)";
    ex.spec = spec;
    ex.check = {3, 4, 4, 257, 257};
    ex.timed = {8, 8, 8, 2048, 2048};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        // Shape [B, H, N, N], strides [0, N*N, N, 1]: storage for one batch row only.
        reference::HostTensor b(DType::bf16, {d.batch, d.q_heads, d.q_len, d.kv_len},
                                {0, d.q_len * d.kv_len, d.kv_len, 1});
        reference::fill_normal(b, seed);
        in.tensors.emplace("bias", std::move(b));
    };
    return examples::run(ex);
}
