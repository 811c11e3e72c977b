// Causal attention with ALiBi: score + slope[h] * (j - i), keys after the query masked.
#include <cmath>

#include "examples/example_util.h"

int main() {
    using namespace attnjit;
    namespace mods = dsl::mods;

    dsl::Tensor slopes("slopes", DType::f32, 1);  // [Hq], one slope per head
    auto spec = dsl::AttentionSpec()
                    .dtype(DType::bf16)
                    .head_dim(128)
                    .score_mod(mods::alibi(slopes))
                    .mask(mods::causal());  // top-left: j <= i

    examples::Example ex;
    ex.title = "01_causal_alibi: causal attention with ALiBi slopes 2^(-8 (h + 1) / H)";
    ex.spec = spec;
    ex.check = {2, 4, 2, 300, 300};
    ex.timed = {4, 16, 16, 4096, 4096};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t) {
        reference::HostTensor s(DType::f32, {d.q_heads});
        for (int64_t h = 0; h < d.q_heads; ++h) s.set({h}, std::exp2(-8.0 * (h + 1) / d.q_heads));
        in.tensors.emplace("slopes", std::move(s));
    };
    return examples::run(ex);
}
