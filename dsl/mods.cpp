#include "dsl/mods.h"

#include "dsl/operators.h"
#include "dsl/printer.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::dsl::mods {
namespace {

// The distance of key j behind query i along the chosen causal diagonal.
Expr causal_distance(CausalAlign align) {
    if (align == CausalAlign::TopLeft) return q_idx() - kv_idx();
    return q_idx() + (kv_len() - q_len()) - kv_idx();
}

void check_int(const Expr& e, const char* what) {
    user_check(e.defined() && e.type() == Type::Int)
        << what << " must be an int expression (a constant, int_scalar(...) or an int tensor element), got "
        << (e.defined() ? type_name(e.type()) : "an undefined Expr");
}

void check_float_tensor(const Tensor& t, int rank, const char* what) {
    user_check(dtype_is_float(t.dtype()))
        << what << ": tensor '" << t.name() << "' has dtype " << dtype_name(t.dtype())
        << "; it must be f16, bf16 or f32";
    user_check(t.rank() == rank) << what << ": tensor '" << t.name() << "' has rank " << t.rank()
                                 << "; it must have rank " << rank;
}

void check_int_tensor(const Tensor& t, int rank, const char* what) {
    user_check(t.dtype() == DType::i32 || t.dtype() == DType::i64)
        << what << ": tensor '" << t.name() << "' has dtype " << dtype_name(t.dtype())
        << "; it must be i32 or i64";
    user_check(t.rank() == rank) << what << ": tensor '" << t.name() << "' has rank " << t.rank()
                                 << "; it must have rank " << rank;
}

}  // namespace

Expr causal(CausalAlign align) { return causal_distance(align) >= 0; }

Expr sliding_window(const Expr& window, CausalAlign align) {
    check_int(window, "sliding_window(window)");
    Expr d = causal_distance(align);
    return d >= 0 && d < window;
}

Expr document_mask(const Tensor& doc_ids) { return document_mask(doc_ids, doc_ids); }

Expr document_mask(const Tensor& q_doc_ids, const Tensor& kv_doc_ids) {
    check_int_tensor(q_doc_ids, 2, "document_mask");
    check_int_tensor(kv_doc_ids, 2, "document_mask");
    return q_doc_ids(batch(), q_idx()) == kv_doc_ids(batch(), kv_idx());
}

Expr prefix_lm(const Expr& prefix_len) {
    check_int(prefix_len, "prefix_lm(prefix_len)");
    return kv_idx() < prefix_len || kv_idx() <= q_idx();
}

Expr softcap(const Expr& cap) {
    user_check(cap.defined() && cap.type() != Type::Bool)
        << "softcap(cap): cap must be a number (a constant or scalar(\"name\"))";
    return cap * tanh(score() / cap);
}

Expr alibi(const Tensor& slopes) {
    check_float_tensor(slopes, 1, "alibi");
    return score() + slopes(head()) * (kv_idx() - q_idx());
}

Expr bias(const Tensor& bias4d) {
    check_float_tensor(bias4d, 4, "bias");
    return score() + bias4d(batch(), head(), q_idx(), kv_idx());
}

Expr relative_position_bias(const Tensor& table, int max_distance) {
    check_float_tensor(table, 2, "relative_position_bias");
    user_check(max_distance >= 0) << "relative_position_bias: max_distance is " << max_distance
                                  << "; it must be >= 0";
    Expr rel = clamp(kv_idx() - q_idx(), -max_distance, max_distance) + max_distance;
    return score() + table(head(), rel);
}

Expr compose(const Expr& outer, const Expr& inner) {
    user_check(outer.defined() && inner.defined()) << "compose(outer, inner): both must be defined";
    user_check(inner.type() == Type::Float) << "compose(outer, inner): inner " << inner
                                            << " must be a float score expression";
    return substitute(outer, [&](const Expr& e) -> Expr {
        auto v = e.as<Var>();
        return v && v->var == VarKind::Score ? inner : Expr();
    });
}

}  // namespace attnjit::dsl::mods
