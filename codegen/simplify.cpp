#include "codegen/simplify.h"

#include <cmath>
#include <cstdint>
#include <optional>

#include "dsl/equality.h"
#include "dsl/visitor.h"
#include "support/int_arith.h"

namespace attnjit::codegen {
namespace {

using namespace dsl;

std::optional<long long> const_int(const Expr& e) {
    auto c = e.as<Const>();
    if (c && c->type == Type::Int) return c->i;
    return std::nullopt;
}
std::optional<double> const_float(const Expr& e) {
    auto c = e.as<Const>();
    if (c && c->type == Type::Float) return c->f;
    return std::nullopt;
}
std::optional<bool> const_bool(const Expr& e) {
    auto c = e.as<Const>();
    if (c && c->type == Type::Bool) return c->i != 0;
    return std::nullopt;
}

bool fits_int32(long long v) { return v >= INT32_MIN && v <= INT32_MAX; }

// An int result, or nothing when C int32 arithmetic would overflow (the operation stays
// in the code, with the meaning the GPU gives it).
std::optional<Expr> int_result(std::optional<long long> v) {
    if (!v || !fits_int32(*v)) return std::nullopt;
    return Const::make_int(*v);
}

bool is_commutative(BinaryOp op) {
    return op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Min || op == BinaryOp::Max ||
           op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::And || op == BinaryOp::Or;
}

// !(a op b) == a negated(op) b; exact for Eq/Ne on any type, for the orderings only
// on ints (a NaN operand makes both a < b and a >= b false).
std::optional<BinaryOp> negated(BinaryOp op, Type operand) {
    if (!is_comparison(op)) return std::nullopt;
    if (operand == Type::Float && op != BinaryOp::Eq && op != BinaryOp::Ne) return std::nullopt;
    return negated_comparison(op);
}

std::optional<Expr> fold_unary(UnaryOp op, const Expr& a) {
    if (auto b = const_bool(a)) {
        if (op == UnaryOp::Not) return Const::make_bool(!*b);
        return std::nullopt;
    }
    if (auto i = const_int(a)) {
        if (op == UnaryOp::Neg) return int_result(int_arith::checked_neg(*i));
        if (op == UnaryOp::Abs) return int_result(*i < 0 ? int_arith::checked_neg(*i) : *i);
        return std::nullopt;
    }
    auto f = const_float(a);
    if (!f) return std::nullopt;
    double x = *f, r;
    switch (op) {
    case UnaryOp::Neg: r = -x; break;
    case UnaryOp::Abs: r = std::fabs(x); break;
    case UnaryOp::Exp: r = std::exp(x); break;
    case UnaryOp::Exp2: r = std::exp2(x); break;
    case UnaryOp::Log: r = std::log(x); break;
    case UnaryOp::Log2: r = std::log2(x); break;
    case UnaryOp::Tanh: r = std::tanh(x); break;
    case UnaryOp::Sigmoid: r = 1.0 / (1.0 + std::exp(-x)); break;
    case UnaryOp::Sqrt: r = std::sqrt(x); break;
    case UnaryOp::Rsqrt: r = 1.0 / std::sqrt(x); break;
    case UnaryOp::Floor: r = std::floor(x); break;
    case UnaryOp::Ceil: r = std::ceil(x); break;
    case UnaryOp::Sin: r = std::sin(x); break;
    case UnaryOp::Cos: r = std::cos(x); break;
    default: return std::nullopt;
    }
    return Const::make_float(r);
}

template <class T>
std::optional<Expr> fold_compare(BinaryOp op, T a, T b) {
    switch (op) {
    case BinaryOp::Eq: return Const::make_bool(a == b);
    case BinaryOp::Ne: return Const::make_bool(a != b);
    case BinaryOp::Lt: return Const::make_bool(a < b);
    case BinaryOp::Le: return Const::make_bool(a <= b);
    case BinaryOp::Gt: return Const::make_bool(a > b);
    case BinaryOp::Ge: return Const::make_bool(a >= b);
    default: return std::nullopt;
    }
}

std::optional<Expr> fold_binary(BinaryOp op, const Expr& a, const Expr& b) {
    if (auto x = const_bool(a)) {
        auto y = const_bool(b);
        if (!y) return std::nullopt;
        if (op == BinaryOp::And) return Const::make_bool(*x && *y);
        if (op == BinaryOp::Or) return Const::make_bool(*x || *y);
        return fold_compare(op, *x, *y);
    }
    if (auto x = const_int(a)) {
        auto y = const_int(b);
        if (!y) return std::nullopt;
        long long p = *x, q = *y;
        switch (op) {
        case BinaryOp::Add: return int_result(int_arith::checked_add(p, q));
        case BinaryOp::Sub: return int_result(int_arith::checked_sub(p, q));
        case BinaryOp::Mul: return int_result(int_arith::checked_mul(p, q));
        case BinaryOp::Div: return int_result(int_arith::checked_div(p, q));  // truncates, as C
        case BinaryOp::Mod: return int_result(int_arith::checked_mod(p, q));  // sign of p, as C
        case BinaryOp::Min: return Const::make_int(p < q ? p : q);
        case BinaryOp::Max: return Const::make_int(p > q ? p : q);
        default: return fold_compare(op, p, q);
        }
    }
    auto x = const_float(a), y = const_float(b);
    if (!x || !y) return std::nullopt;
    double p = *x, q = *y;
    switch (op) {
    case BinaryOp::Add: return Const::make_float(p + q);
    case BinaryOp::Sub: return Const::make_float(p - q);
    case BinaryOp::Mul: return Const::make_float(p * q);
    case BinaryOp::Div: return Const::make_float(p / q);
    // min / max keep NaN (dsl/interpreter.h).
    case BinaryOp::Min: return Const::make_float(std::isnan(p) || std::isnan(q) ? p + q : std::fmin(p, q));
    case BinaryOp::Max: return Const::make_float(std::isnan(p) || std::isnan(q) ? p + q : std::fmax(p, q));
    case BinaryOp::Pow: return Const::make_float(std::pow(p, q));
    default: return fold_compare(op, p, q);
    }
}

// e == base + k for an int constant k (k = 0 when e has no constant term).
std::pair<Expr, long long> split_offset(const Expr& e) {
    if (auto bin = e.as<Binary>(); bin && bin->type == Type::Int) {
        if (auto k = const_int(bin->b)) {
            if (bin->op == BinaryOp::Add) return {bin->a, *k};
            if (bin->op == BinaryOp::Sub && *k != INT64_MIN) return {bin->a, -*k};
        }
    }
    return {e, 0};
}

// base + k, written as base - |k| when k is negative.
std::optional<Expr> with_offset(const Expr& base, std::optional<long long> offset) {
    if (!offset) return std::nullopt;
    const long long k = *offset;
    if (!fits_int32(k) || !fits_int32(-k)) return std::nullopt;
    if (k == 0) return base;
    if (k > 0) return Binary::make(BinaryOp::Add, base, Const::make_int(k));
    return Binary::make(BinaryOp::Sub, base, Const::make_int(-k));
}

Expr simplify_binary(BinaryOp op, Expr a, Expr b) {
    if (auto r = fold_binary(op, a, b)) return *r;
    // Constants to the right.
    if (a.as<Const>() && !b.as<Const>()) {
        if (is_commutative(op)) std::swap(a, b);
        else if (is_comparison(op)) {
            std::swap(a, b);
            op = flipped_comparison(op);
        }
    }
    const Type t = a.type();
    const bool is_int = t == Type::Int;
    const bool same = equal(a, b);
    auto ci = const_int(b);
    auto cf = const_float(b);
    auto cb = const_bool(b);
    switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
        if (is_int) {
            if (op == BinaryOp::Sub && same) return Const::make_int(0);
            if (ci) {
                auto [base, k] = split_offset(a);
                auto sum = op == BinaryOp::Add ? int_arith::checked_add(k, *ci) : int_arith::checked_sub(k, *ci);
                if (auto r = with_offset(base, sum)) return *r;
            }
        } else if (cf) {
            // x - 0.0 and x + -0.0 are exact; x + 0.0 is not (-0.0 + 0.0 == +0.0).
            bool neg_zero = *cf == 0.0 && std::signbit(*cf);
            if (op == BinaryOp::Sub && *cf == 0.0 && !neg_zero) return a;
            if (op == BinaryOp::Add && neg_zero) return a;
        }
        break;
    case BinaryOp::Mul:
        if (ci && *ci == 1) return a;
        if (ci && *ci == 0) return b;  // ints only: 0 * inf is NaN for floats
        if (cf && *cf == 1.0) return a;
        break;
    case BinaryOp::Div:
        if ((ci && *ci == 1) || (cf && *cf == 1.0)) return a;
        break;
    case BinaryOp::Mod:
        if (ci && (*ci == 1 || *ci == -1)) return Const::make_int(0);
        break;
    case BinaryOp::Min:
    case BinaryOp::Max:
        if (same) return a;
        break;
    case BinaryOp::Eq:
    case BinaryOp::Le:
    case BinaryOp::Ge:
        if (same && t != Type::Float) return Const::make_bool(true);
        break;
    case BinaryOp::Ne:
    case BinaryOp::Lt:
    case BinaryOp::Gt:
        if (same && t != Type::Float) return Const::make_bool(false);
        break;
    case BinaryOp::And:
        if (cb) return *cb ? a : b;
        if (same) return a;
        break;
    case BinaryOp::Or:
        if (cb) return *cb ? b : a;
        if (same) return a;
        break;
    default: break;
    }
    return Binary::make(op, a, b);
}

Expr simplify_unary(UnaryOp op, const Expr& a) {
    if (auto r = fold_unary(op, a)) return *r;
    if (auto u = a.as<Unary>(); u && u->op == op && (op == UnaryOp::Neg || op == UnaryOp::Not)) return u->a;
    if (op == UnaryOp::Not) {
        if (auto bin = a.as<Binary>(); bin && is_comparison(bin->op)) {
            if (auto n = negated(bin->op, bin->a.type())) return Binary::make(*n, bin->a, bin->b);
        }
    }
    return Unary::make(op, a);
}

Expr simplify_select(const Expr& c, const Expr& t, const Expr& f) {
    if (auto b = const_bool(c)) return *b ? t : f;
    if (equal(t, f)) return t;
    auto bt = const_bool(t), bf = const_bool(f);
    if (bt && bf && *bt != *bf) return *bt ? c : simplify_unary(UnaryOp::Not, c);
    if (auto u = c.as<Unary>(); u && u->op == UnaryOp::Not) return Select::make(u->a, f, t);
    return Select::make(c, t, f);
}

Expr simplify_cast(Type to, const Expr& a) {
    if (a.type() == to) return a;
    if (to == Type::Float) {
        if (auto i = const_int(a)) return Const::make_float(static_cast<double>(*i));
    } else if (to == Type::Int) {
        if (auto f = const_float(a); f && std::isfinite(*f) && std::trunc(*f) >= INT32_MIN &&
                                      std::trunc(*f) <= INT32_MAX)
            return Const::make_int(static_cast<long long>(std::trunc(*f)));
    }
    return Cast::make(to, a);
}

// Rebuilt nodes are returned only when a rule fired, so unchanged subtrees stay shared.
class Simplifier : public IRMutator {
protected:
    using IRMutator::visit;
    Expr visit(const Unary* n, const Expr& self) override {
        Expr e = IRMutator::visit(n, self);
        auto u = e.as<Unary>();
        Expr r = simplify_unary(u->op, u->a);
        auto ru = r.as<Unary>();
        return ru && ru->op == u->op && ru->a.same_as(u->a) ? e : r;
    }
    Expr visit(const Binary* n, const Expr& self) override {
        Expr e = IRMutator::visit(n, self);
        auto b = e.as<Binary>();
        Expr r = simplify_binary(b->op, b->a, b->b);
        auto rb = r.as<Binary>();
        return rb && rb->op == b->op && rb->a.same_as(b->a) && rb->b.same_as(b->b) ? e : r;
    }
    Expr visit(const Select* n, const Expr& self) override {
        Expr e = IRMutator::visit(n, self);
        auto s = e.as<Select>();
        Expr r = simplify_select(s->cond, s->t, s->f);
        auto rs = r.as<Select>();
        return rs && rs->cond.same_as(s->cond) && rs->t.same_as(s->t) && rs->f.same_as(s->f) ? e : r;
    }
    Expr visit(const Cast* n, const Expr& self) override {
        Expr e = IRMutator::visit(n, self);
        auto c = e.as<Cast>();
        Expr r = simplify_cast(c->type, c->a);
        auto rc = r.as<Cast>();
        return rc && rc->type == c->type && rc->a.same_as(c->a) ? e : r;
    }
};

}  // namespace

Expr simplify(const Expr& e) {
    if (!e.defined()) return e;
    // Each rewrite is applied bottom-up; a few rounds reach the fixed point of this
    // small rule set (a rule's result can enable a rule at its parent).
    Expr cur = e;
    for (int round = 0; round < 8; ++round) {
        Expr next = Simplifier().mutate(cur);
        if (next.same_as(cur)) return next;
        cur = next;
    }
    return cur;
}

}  // namespace attnjit::codegen
