// Packed sequences: several documents of different lengths share one row of the batch;
// a query attends causally, and only to keys of its own document.
#include <vector>

#include "examples/example_util.h"

int main() {
    using namespace attnjit;
    namespace mods = dsl::mods;

    dsl::Tensor doc("doc", DType::i32, 2);  // doc[b, position]: which document a token is in
    auto spec = dsl::AttentionSpec()
                    .dtype(DType::f16)
                    .head_dim(128)
                    .mask(mods::document_mask(doc) && mods::causal());

    examples::Example ex;
    ex.title = "04_document_mask: causal attention within packed documents";
    ex.spec = spec;
    ex.check = {2, 4, 4, 500, 500};
    ex.timed = {4, 16, 16, 8192, 8192};
    ex.add_inputs = [](reference::ForwardInputs& in, const examples::Dims& d, uint64_t seed) {
        // Documents of pseudo-random lengths between 1/16 and 1/4 of the row.
        reference::HostTensor ids(DType::i32, {d.batch, d.q_len});
        reference::HostTensor lengths(DType::i32, {64});
        reference::fill_uniform_int(lengths, seed, d.q_len / 16 + 1, d.q_len / 4 + 1);
        for (int64_t b = 0; b < d.batch; ++b) {
            int64_t doc_id = 0, left = lengths.get({(b * 7) % 64});
            for (int64_t i = 0; i < d.q_len; ++i) {
                if (left-- == 0) left = lengths.get({(b * 7 + ++doc_id) % 64}) - 1;
                ids.set({b, i}, static_cast<double>(doc_id));
            }
        }
        in.tensors.emplace("doc", std::move(ids));
    };
    return examples::run(ex);
}
