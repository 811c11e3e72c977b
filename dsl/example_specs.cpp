#include "dsl/example_specs.h"

#include "dsl/mods.h"
#include "dsl/operators.h"
#include "dsl/vars.h"
#include "support/error.h"

namespace attnjit::dsl {

using mods::CausalAlign;

namespace {

AttentionSpec base(DType dtype, int head_dim) { return AttentionSpec().dtype(dtype).head_dim(head_dim); }

}  // namespace

std::vector<std::pair<std::string, AttentionSpec>> example_specs(DType dtype, int head_dim) {
    const Tensor slopes("slopes", DType::f32, 1);
    const Tensor bias("bias", dtype, 4);
    const Tensor doc_ids("doc_ids", DType::i32, 2);
    const Tensor rel_table("rel_table", DType::f32, 2);
    return {
        {"plain", base(dtype, head_dim)},
        {"causal", base(dtype, head_dim).mask(mods::causal())},
        {"causal_bottom_right", base(dtype, head_dim).mask(mods::causal(CausalAlign::BottomRight))},
        {"alibi_causal", base(dtype, head_dim).score_mod(mods::alibi(slopes)).mask(mods::causal())},
        {"softcap_sliding_window",
         base(dtype, head_dim).score_mod(mods::softcap(scalar("cap"))).mask(mods::sliding_window(int_scalar("window")))},
        {"bias", base(dtype, head_dim).score_mod(mods::bias(bias))},
        {"document", base(dtype, head_dim).mask(mods::document_mask(doc_ids))},
        {"prefix_lm", base(dtype, head_dim).mask(mods::prefix_lm(int_scalar("prefix_len")))},
        {"relpos", base(dtype, head_dim).score_mod(mods::relative_position_bias(rel_table, 128))},
        {"gqa", base(dtype, head_dim).heads(32, 8).mask(mods::causal())},
        {"sinks_sliding_window",
         base(dtype, head_dim).mask(mods::sliding_window(int_scalar("window"))).sinks("sinks", DType::f32)},
        // AlphaFold's gated attention with a bias (out = sigmoid(gate) * O).
        {"gated_bias", base(dtype, head_dim).score_mod(mods::bias(bias)).gate("gate")},
    };
}

std::vector<std::string> example_names() {
    std::vector<std::string> names;
    for (const auto& [n, s] : example_specs()) names.push_back(n);
    return names;
}

AttentionSpec example_spec(const std::string& name, DType dtype, int head_dim) {
    std::string known;
    for (const auto& [n, s] : example_specs(dtype, head_dim)) {
        if (n == name) return s;
        known += (known.empty() ? "" : ", ") + n;
    }
    user_error << "no example spec named '" << name << "'; the examples are: " << known;
    return {};
}

std::vector<std::pair<std::string, AttentionSpec>> modifier_specs(DType dtype, int head_dim) {
    const Tensor slopes("slopes", DType::f32, 1);
    const Tensor bias("bias", dtype, 4);
    const Tensor doc_ids("doc_ids", DType::i64, 2);
    const Tensor q_doc("q_doc", DType::i32, 2);
    const Tensor kv_doc("kv_doc", DType::i32, 2);
    const Tensor rel_table("rel_table", DType::bf16, 2);
    return {
        {"causal_top_left", base(dtype, head_dim).mask(mods::causal(CausalAlign::TopLeft))},
        {"causal_bottom_right", base(dtype, head_dim).mask(mods::causal(CausalAlign::BottomRight))},
        {"sliding_window_top_left", base(dtype, head_dim).mask(mods::sliding_window(256, CausalAlign::TopLeft))},
        {"sliding_window_bottom_right",
         base(dtype, head_dim).mask(mods::sliding_window(int_scalar("window"), CausalAlign::BottomRight))},
        {"document_mask", base(dtype, head_dim).mask(mods::document_mask(doc_ids))},
        {"document_mask_q_kv", base(dtype, head_dim).mask(mods::document_mask(q_doc, kv_doc))},
        {"prefix_lm", base(dtype, head_dim).mask(mods::prefix_lm(int_scalar("prefix_len")))},
        {"softcap", base(dtype, head_dim).score_mod(mods::softcap(30.0))},
        {"alibi", base(dtype, head_dim).score_mod(mods::alibi(slopes))},
        {"bias", base(dtype, head_dim).score_mod(mods::bias(bias))},
        {"relative_position_bias", base(dtype, head_dim).score_mod(mods::relative_position_bias(rel_table, 64))},
        {"compose_softcap_alibi",
         base(dtype, head_dim).score_mod(mods::compose(mods::softcap(scalar("cap")), mods::alibi(slopes)))},
    };
}

}  // namespace attnjit::dsl
