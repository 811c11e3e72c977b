#include "codegen/grad_reduction.h"

#include <optional>

#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

bool is_var(const Expr& e, VarKind v) {
    const auto* x = e.as<Var>();
    return x && x->var == v;
}

// What an index expression reads besides launch constants.
struct Uses {
    bool batch = false, head = false, kv_head = false, q = false, k = false, other = false;
    bool coordinates() const { return batch || head || kv_head || q || k; }
};

Uses uses_of(const Expr& e) {
    Uses u;
    for_each_node(e, [&](const Expr& n) {
        if (const auto* v = n.as<Var>()) {
            switch (v->var) {
            case VarKind::Batch: u.batch = true; break;
            case VarKind::Head: u.head = true; break;
            case VarKind::KvHead: u.kv_head = true; break;
            case VarKind::QIdx: u.q = true; break;
            case VarKind::KvIdx: u.k = true; break;
            case VarKind::Score: u.other = true; break;
            case VarKind::QLen:
            case VarKind::KvLen: break;  // launch constants
            }
        } else if (n.as<TensorLoad>() || n.as<Temp>()) {
            u.other = true;  // a gathered index, or codegen's temporaries (not expected here)
        }
    });
    return u;
}

bool is_constant(const Expr& e) {
    const Uses u = uses_of(e);
    return !u.coordinates() && !u.other;
}

// The coordinate e is, up to a launch constant added or subtracted: `v`, `v + c`, `c + v`,
// `v - c` (nested). None for anything else.
std::optional<VarKind> alone(const Expr& e) {
    if (const auto* v = e.as<Var>()) return v->var;
    const auto* b = e.as<Binary>();
    if (!b) return std::nullopt;
    if (b->op == BinaryOp::Add) {
        if (is_constant(b->b)) return alone(b->a);
        if (is_constant(b->a)) return alone(b->b);
    }
    if (b->op == BinaryOp::Sub && is_constant(b->b)) return alone(b->a);
    return std::nullopt;
}

// True when every q_idx and kv_idx of e stands in a difference kv_idx - q_idx or
// q_idx - kv_idx.
bool only_differences(const Expr& e) {
    if (const auto* b = e.as<Binary>(); b && b->op == BinaryOp::Sub &&
                                        ((is_var(b->a, VarKind::KvIdx) && is_var(b->b, VarKind::QIdx)) ||
                                         (is_var(b->a, VarKind::QIdx) && is_var(b->b, VarKind::KvIdx))))
        return true;
    if (is_var(e, VarKind::QIdx) || is_var(e, VarKind::KvIdx)) return false;
    if (const auto* u = e.as<Unary>()) return only_differences(u->a);
    if (const auto* b = e.as<Binary>()) return only_differences(b->a) && only_differences(b->b);
    if (const auto* s = e.as<Select>()) return only_differences(s->cond) && only_differences(s->t) && only_differences(s->f);
    if (const auto* c = e.as<Cast>()) return only_differences(c->a);
    return true;  // leaves: constants, scalars, other coordinates
}

}  // namespace

GradReductionPlan plan_grad_reduction(const Expr& read) {
    const auto* load = read.as<TensorLoad>();
    internal_check(load != nullptr) << "plan_grad_reduction takes a tensor read, got " << static_cast<int>(read.kind());
    bool batch = false, head = false, kv_head = false, gather = false, diagonal = false;
    int q_dims = 0, k_dims = 0;
    for (const Expr& index : load->indices) {
        const Uses u = uses_of(index);
        if (u.other) {
            gather = true;
            continue;
        }
        if (!u.coordinates()) continue;  // a launch constant
        if (const auto v = alone(index)) {
            switch (*v) {
            case VarKind::Batch: batch = true; break;
            case VarKind::Head: head = true; break;
            case VarKind::KvHead: kv_head = true; break;
            case VarKind::QIdx: ++q_dims; break;
            case VarKind::KvIdx: ++k_dims; break;
            default: gather = true; break;
            }
            continue;
        }
        if (!u.batch && !u.head && !u.kv_head && only_differences(index)) {
            diagonal = true;
            continue;
        }
        gather = true;  // arithmetic over coordinates that is neither alone nor a difference
    }

    GradReductionPlan p;
    p.sums_batch = !batch;
    p.sums_heads = head ? HeadSum::None : kv_head ? HeadSum::Group : HeadSum::All;
    if (gather || q_dims > 1 || k_dims > 1 || (diagonal && (q_dims || k_dims)))
        p.kind = GradReduction::Gather;
    else if (diagonal)
        p.kind = GradReduction::Diagonal;
    else if (q_dims && k_dims)
        p.kind = GradReduction::Elementwise;
    else if (k_dims)
        p.kind = GradReduction::PerKey;
    else if (q_dims)
        p.kind = GradReduction::PerQuery;
    else
        p.kind = GradReduction::Uniform;
    return p;
}

const char* grad_reduction_name(GradReduction kind) {
    switch (kind) {
    case GradReduction::Elementwise: return "elementwise";
    case GradReduction::PerKey: return "per_key";
    case GradReduction::PerQuery: return "per_query";
    case GradReduction::Diagonal: return "diagonal";
    case GradReduction::Uniform: return "uniform";
    case GradReduction::Gather: return "gather";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& os, const GradReductionPlan& p) {
    os << grad_reduction_name(p.kind);
    if (p.sums_batch) os << ", summed over the batch";
    if (p.sums_heads == HeadSum::Group) os << ", summed over the query heads of a group";
    if (p.sums_heads == HeadSum::All) os << ", summed over the heads";
    return os;
}

}  // namespace attnjit::codegen
