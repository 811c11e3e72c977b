// Gemma-2 style local attention: logits soft-capped, each query sees the last `window`
// keys up to itself. The cap and the window are runtime values: changing them never
// recompiles.
#include "examples/example_util.h"

int main() {
    using namespace attnjit;
    namespace mods = dsl::mods;

    auto spec = dsl::AttentionSpec()
                    .dtype(DType::bf16)
                    .head_dim(128)
                    .heads(16, 8)  // GQA: two query heads per key/value head
                    .score_mod(mods::softcap(dsl::scalar("cap")))              // cap * tanh(s / cap)
                    .mask(mods::sliding_window(dsl::int_scalar("window")));  // 0 <= i - j < window

    examples::Example ex;
    ex.title = "02_softcap_sliding_window: softcap 50, sliding window of 1024 keys, GQA 16/8";
    ex.spec = spec;
    ex.check = {2, 16, 8, 700, 700};
    ex.timed = {4, 16, 8, 8192, 8192};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t) {
        in.scalars["cap"] = 50.0;
        in.scalars["window"] = d.q_len > 1000 ? 1024 : 200;  // small check: a window that bites
    };
    return examples::run(ex);
}
