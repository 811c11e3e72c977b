// Training step through a softcapped causal attention: the forward saves LSE, the backward
// gives dQ, dK, dV with d softcap / d s derived from the DSL (codegen/autodiff.h). With a
// GPU: checks the gradients against the fp64 backward reference and times forward +
// backward; without one: compiles the kernels for sm_90a (examples/training_util.h).
#include "examples/training_util.h"

int main() {
    using namespace attnjit;
    namespace mods = dsl::mods;
    examples::Example ex;
    ex.title = "05_training_softcap: forward + backward of softcap(30) causal attention, gradients from the DSL";
    ex.spec = dsl::AttentionSpec()
                  .dtype(DType::bf16)
                  .head_dim(64)
                  .score_mod(mods::softcap(dsl::scalar("cap")))
                  .mask(mods::causal())
                  .return_lse();  // the backward reads the forward's LSE
    ex.check = {2, 4, 2, 200, 200};
    ex.timed = {4, 16, 16, 2048, 2048};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims&, uint64_t) { in.scalars["cap"] = 30.0; };
    return examples::run_training(ex);
}
