#include "codegen/autodiff.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

#include "codegen/simplify.h"
#include "dsl/equality.h"
#include "dsl/limits.h"
#include "dsl/printer.h"
#include "dsl/visitor.h"
#include "support/dtype.h"
#include "support/error.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

// Float node builders. A derivative can outgrow the user's expression (each tanh reads its
// primal again), so the internal limits of dsl/limits.h are checked here, where crossing
// them is the user's expression being too large, not a pass's bug.
void check_size(const std::vector<const Expr*>& operands) {
    int depth = 1;
    uint64_t size = 1;
    for (const Expr* e : operands) {
        depth = std::max(depth, (*e)->depth + 1);
        size += (*e)->size;
    }
    user_check(depth <= kMaxExprDepthInternal && size <= static_cast<uint64_t>(kMaxExprNodesInternal))
        << "score_mod is too large to differentiate: its derivative reaches depth " << depth << " and " << size
        << " nodes, past the internal limits (" << kMaxExprDepthInternal << ", " << kMaxExprNodesInternal
        << "); write score_mod with fewer nested operations";
}

Expr num(double v) { return Const::make_float(v); }
Expr un(UnaryOp op, const Expr& a) {
    check_size({&a});
    return Unary::make(op, a);
}
Expr bin(BinaryOp op, const Expr& a, const Expr& b) {
    check_size({&a, &b});
    return Binary::make(op, a, b);
}
Expr sel(const Expr& c, const Expr& t, const Expr& f) {
    check_size({&c, &t, &f});
    return Select::make(c, t, f);
}
Expr add(const Expr& a, const Expr& b) { return bin(BinaryOp::Add, a, b); }
Expr sub(const Expr& a, const Expr& b) { return bin(BinaryOp::Sub, a, b); }
Expr mul(const Expr& a, const Expr& b) { return bin(BinaryOp::Mul, a, b); }
Expr div(const Expr& a, const Expr& b) { return bin(BinaryOp::Div, a, b); }
Expr cmp(BinaryOp op, const Expr& a, const Expr& b) { return bin(op, a, b); }

// Tangents: an undefined Expr is a structural zero (the node does not read the leaf).
Expr t_neg(const Expr& a) { return a.defined() ? un(UnaryOp::Neg, a) : Expr(); }
Expr t_add(const Expr& a, const Expr& b) { return !a.defined() ? b : !b.defined() ? a : add(a, b); }
Expr t_sub(const Expr& a, const Expr& b) { return !b.defined() ? a : !a.defined() ? t_neg(b) : sub(a, b); }
Expr t_scale(const Expr& factor, const Expr& t) { return t.defined() ? mul(factor, t) : Expr(); }
Expr t_or_zero(const Expr& t) { return t.defined() ? t : num(0.0); }
Expr t_select(const Expr& c, const Expr& x, const Expr& y) {
    if (!x.defined() && !y.defined()) return Expr();
    return sel(c, t_or_zero(x), t_or_zero(y));
}

class Differentiator {
public:
    explicit Differentiator(Expr leaf) : leaf_(std::move(leaf)) {}

    Expr tangent(const Expr& e) {
        if (e.type() != Type::Float) return Expr();
        auto it = memo_.find(e.get());
        if (it != memo_.end()) return it->second;
        Expr t = compute(e);
        memo_.emplace(e.get(), t);
        return t;
    }

private:
    Expr leaf_;
    std::unordered_map<const ExprNode*, Expr> memo_;  // the expression is a DAG

    bool is_leaf(const Expr& e) const { return e.kind() == leaf_.kind() && equal(e, leaf_); }

    Expr compute(const Expr& e) {
        switch (e.kind()) {
        case NodeKind::Const: return Expr();
        case NodeKind::Var:
        case NodeKind::ScalarParam:
        case NodeKind::TensorLoad: return is_leaf(e) ? num(1.0) : Expr();
        case NodeKind::Unary: return unary(e, *e.as<Unary>());
        case NodeKind::Binary: return binary(e, *e.as<Binary>());
        case NodeKind::Select: {
            const auto& s = *e.as<Select>();
            return t_select(s.cond, tangent(s.t), tangent(s.f));
        }
        case NodeKind::Cast: return tangent(e.as<Cast>()->a);  // Float from Float; from Int or Bool: none
        case NodeKind::Temp: break;
        }
        internal_error << "autodiff: " << e << " is not a user expression (differentiate before cse and hoist)";
        return Expr();
    }

    Expr unary(const Expr& e, const Unary& u) {
        const Expr& a = u.a;
        const Expr da = tangent(a);
        if (!da.defined()) return Expr();
        switch (u.op) {
        case UnaryOp::Neg: return t_neg(da);
        case UnaryOp::Exp: return t_scale(e, da);
        case UnaryOp::Exp2: return t_scale(mul(e, num(kLn2)), da);
        case UnaryOp::Log: return div(da, a);
        case UnaryOp::Log2: return div(da, mul(a, num(kLn2)));
        case UnaryOp::Tanh: return t_scale(sub(num(1.0), mul(e, e)), da);
        case UnaryOp::Sigmoid: return t_scale(mul(e, sub(num(1.0), e)), da);
        case UnaryOp::Abs: return t_scale(sign(a), da);
        case UnaryOp::Sqrt: return div(da, mul(num(2.0), e));
        case UnaryOp::Rsqrt: return t_scale(div(mul(num(-0.5), e), a), da);
        case UnaryOp::Sin: return t_scale(un(UnaryOp::Cos, a), da);
        case UnaryOp::Cos: return t_neg(t_scale(un(UnaryOp::Sin, a), da));
        case UnaryOp::Floor:
        case UnaryOp::Ceil:
        case UnaryOp::Not: return Expr();
        }
        internal_error << "autodiff: no rule for " << unary_name(u.op);
        return Expr();
    }

    Expr binary(const Expr& e, const Binary& b) {
        if (is_comparison(b.op) || is_logical(b.op)) return Expr();
        const Expr& x = b.a;
        const Expr& y = b.b;
        const Expr dx = tangent(x), dy = tangent(y);
        if (!dx.defined() && !dy.defined()) return Expr();
        switch (b.op) {
        case BinaryOp::Add: return t_add(dx, dy);
        case BinaryOp::Sub: return t_sub(dx, dy);
        case BinaryOp::Mul: return t_add(t_scale(y, dx), t_scale(x, dy));
        case BinaryOp::Div:  // (dx - (x / y) dy) / y
            return div(t_sub(dx, t_scale(e, dy)), y);
        case BinaryOp::Mod: {  // fmod(x, y) = x - trunc(x / y) * y
            const Expr q = div(x, y);
            const Expr trunc = sel(cmp(BinaryOp::Lt, q, num(0.0)), un(UnaryOp::Ceil, q), un(UnaryOp::Floor, q));
            return t_sub(dx, t_scale(trunc, dy));
        }
        case BinaryOp::Min:
        case BinaryOp::Max: {  // the chosen operand's tangent; half each on a tie
            const BinaryOp x_wins = b.op == BinaryOp::Min ? BinaryOp::Lt : BinaryOp::Gt;
            const BinaryOp y_wins = b.op == BinaryOp::Min ? BinaryOp::Gt : BinaryOp::Lt;
            const Expr tie = mul(num(0.5), t_or_zero(t_add(dx, dy)));
            return sel(cmp(x_wins, x, y), t_or_zero(dx), sel(cmp(y_wins, x, y), t_or_zero(dy), tie));
        }
        case BinaryOp::Pow: {
            // d/dx: y x^(y-1), 0 where y == 0; d/dy: x^y log x, 0 where x == 0 and y >= 0.
            Expr out;
            if (dx.defined()) {
                const Expr dpow = mul(y, bin(BinaryOp::Pow, x, sub(y, num(1.0))));
                out = t_scale(sel(cmp(BinaryOp::Eq, y, num(0.0)), num(0.0), dpow), dx);
            }
            if (dy.defined()) {
                const Expr at_zero = bin(BinaryOp::And, cmp(BinaryOp::Eq, x, num(0.0)), cmp(BinaryOp::Ge, y, num(0.0)));
                const Expr dexp = sel(at_zero, num(0.0), mul(e, un(UnaryOp::Log, x)));
                out = t_add(out, t_scale(dexp, dy));
            }
            return out;
        }
        default: break;
        }
        internal_error << "autodiff: no rule for " << binary_name(b.op);
        return Expr();
    }

    static Expr sign(const Expr& a) {
        return sel(cmp(BinaryOp::Gt, a, num(0.0)), num(1.0), sel(cmp(BinaryOp::Lt, a, num(0.0)), num(-1.0), num(0.0)));
    }

    static constexpr double kLn2 = 0.693147180559945309417232121458176568;
};

// The distinct (structurally) reads of `tensor` in e, in order of first appearance.
std::vector<Expr> reads_of(const Expr& e, const std::string& tensor) {
    std::vector<Expr> reads;
    for_each_node(e, [&](const Expr& n) {
        const auto* t = n.as<TensorLoad>();
        if (!t || t->name != tensor) return;
        for (const Expr& r : reads)
            if (equal(r, n)) return;
        reads.push_back(n);
    });
    return reads;
}

std::string declared_names(const AttentionSpec& spec) {
    std::ostringstream s;
    const char* sep = "";
    for (const auto& [name, info] : spec.tensors()) {
        s << sep << "tensor '" << name << "'";
        sep = ", ";
    }
    for (const auto& [name, type] : spec.scalars()) {
        s << sep << "scalar '" << name << "'";
        sep = ", ";
    }
    return *sep ? s.str() : "none";
}

}  // namespace

Expr derivative(const Expr& e, const Expr& leaf) {
    internal_check(leaf.defined() && (leaf.kind() == NodeKind::Var || leaf.kind() == NodeKind::ScalarParam ||
                                      leaf.kind() == NodeKind::TensorLoad))
        << "autodiff: a leaf is score(), a scalar or a tensor read";
    Expr t = Differentiator(leaf).tangent(e);
    return t.defined() ? t : num(0.0);
}

ScoreModGradients score_mod_gradients(const AttentionSpec& spec, const std::set<std::string>& wanted) {
    const auto tensors = spec.tensors();
    const auto scalars = spec.scalars();
    for (const auto& name : wanted) {
        auto t = tensors.find(name);
        auto s = scalars.find(name);
        user_check(t != tensors.end() || s != scalars.end())
            << "a gradient was asked for '" << name << "', which the spec does not read; it reads "
            << declared_names(spec);
        if (t != tensors.end())
            user_check(dtype_is_float(t->second.dtype))
                << "a gradient was asked for tensor '" << name << "', which holds " << dtype_name(t->second.dtype)
                << ": only float tensors (f16, bf16, f32) have gradients; drop it from the tensors that need one";
        else
            user_check(s->second == Type::Float)
                << "a gradient was asked for scalar '" << name
                << "', an int scalar: only float scalars have gradients; drop it from the inputs that need one";
    }

    ScoreModGradients g;
    const Expr& mod = spec.score_mod();
    if (!mod.defined()) {
        g.d_score = num(1.0);
        return g;
    }
    g.d_score = simplify(derivative(mod, Var::make(VarKind::Score)));
    for (const auto& name : wanted) {
        if (tensors.count(name)) {
            for (const Expr& read : reads_of(mod, name))
                g.tensors.push_back(
                    TensorReadGradient{name, read, simplify(derivative(mod, read)), plan_grad_reduction(read)});
        } else {
            g.scalars.push_back(ScalarGradient{name, simplify(derivative(mod, ScalarParam::make(name, Type::Float)))});
        }
    }
    return g;
}

}  // namespace attnjit::codegen
