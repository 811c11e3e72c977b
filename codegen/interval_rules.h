// The interval rules of mask analysis, written once over a "scalar domain" D so the same
// rules both emit the device code of Variant::classify (mask_analysis.cpp: D's values
// are C expressions) and run on the host (classify_box.cpp: D's values are numbers).
// Internal to codegen; include only from those two files.
//
// The int-interval arithmetic itself is interval_core.h's, shared with the bounds
// evaluator; this file decides which rule applies to which node.
//
// Over the box q in [q0, q1], k in [k0, k1] every Int subexpression gets an interval
// [lo, hi] (64-bit, and products are capped to int32, so the bounds never overflow) and every Bool a pair
// (may_true, may_false). Leaves: constants, scalars and head-level values are points;
// q_idx and kv_idx are the box sides; a tensor load whose indices are head level is a
// point; one whose indices are head level except one that is exactly q_idx or kv_idx is
// the range of that slice (D::load_*_range, the block-collective ctx.int_range /
// ctx.float_range on the device); any other load is unknown. Interval arithmetic is
// exact for affine forms in which each variable appears once (causal, sliding window,
// prefix-LM's pieces) and conservative otherwise. Int arithmetic is assumed not to
// overflow int32 (undefined, as in C). Float comparisons never prove "always true"
// unless a NaN could not make them false (only != can), so only kSkip is derived from
// them. Every domain call that emits is its own statement (never a nested argument:
// C++ leaves argument evaluation order unspecified, and the emitted text must not depend
// on the host compiler). Temporaries: head-level ones are points when D reads them from the Head struct
// (D::kHeadTempsArePoints); all others are analysed through their binding, once.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/binding.h"
#include "codegen/hoist.h"
#include "codegen/interval_core.h"
#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::codegen::detail {

template <class D>
class IntervalRules {
public:
    using V = typename D::V;  // 64-bit int value
    using F = typename D::F;  // float value
    using P = typename D::P;  // bool value

    using IntIv = interval::Interval<V>;
    struct FloatIv {
        bool known;
        F lo, hi;
    };
    struct Tri {
        P may_true, may_false;
    };

    IntervalRules(D& d, const Bindings& bindings) : d_(d), bindings_(bindings) {}

    Tri boolean(const dsl::Expr& e) {
        using namespace dsl;
        if (auto c = e.as<Const>()) return {d_.bool_const(c->i != 0), d_.bool_const(c->i == 0)};
        if (auto t = e.as<Temp>()) {
            if (auto b = head_temp(*t)) {
                P v = d_.temp_bool(b->name);
                return {v, d_.not_(v)};
            }
            auto it = bool_memo_.find(t->name);
            if (it != bool_memo_.end()) return it->second;
            Tri r = boolean(binding(*t).value);
            bool_memo_.emplace(t->name, r);
            return r;
        }
        if (auto l = e.as<TensorLoad>()) {
            d_.note(e);
            auto r = load_int(*l);
            if (!r) return unknown_bool();
            // u8 elements: true when non-zero.
            P some_nonzero = d_.lt(d_.int_const(0), r->hi);
            P some_zero = d_.eq(r->lo, d_.int_const(0));
            return {some_nonzero, some_zero};
        }
        if (auto u = e.as<Unary>()) {
            internal_check(u->op == UnaryOp::Not) << "mask analysis: unexpected bool unary";
            Tri a = boolean(u->a);
            return {a.may_false, a.may_true};
        }
        if (auto s = e.as<Select>()) {
            Tri c = boolean(s->cond), t = boolean(s->t), f = boolean(s->f);
            d_.note(e);
            P tt = d_.and_(c.may_true, t.may_true);
            P ft = d_.and_(c.may_false, f.may_true);
            P may_true = d_.or_(tt, ft);
            P tf = d_.and_(c.may_true, t.may_false);
            P ff = d_.and_(c.may_false, f.may_false);
            return {may_true, d_.or_(tf, ff)};
        }
        auto b = e.as<Binary>();
        internal_check(b) << "mask analysis: unexpected bool expression " << e;
        if (b->op == BinaryOp::And || b->op == BinaryOp::Or) {
            Tri x = boolean(b->a), y = boolean(b->b);
            d_.note(e);
            if (b->op == BinaryOp::And) return {d_.and_(x.may_true, y.may_true), d_.or_(x.may_false, y.may_false)};
            return {d_.or_(x.may_true, y.may_true), d_.and_(x.may_false, y.may_false)};
        }
        const Type operand = b->a.type();
        if (operand == Type::Bool) {
            Tri x = boolean(b->a), y = boolean(b->b);
            d_.note(e);
            P both_true = d_.and_(x.may_true, y.may_true);
            P both_false = d_.and_(x.may_false, y.may_false);
            P same = d_.or_(both_true, both_false);
            P true_false = d_.and_(x.may_true, y.may_false);
            P false_true = d_.and_(x.may_false, y.may_true);
            P diff = d_.or_(true_false, false_true);
            return b->op == BinaryOp::Eq ? Tri{same, diff} : Tri{diff, same};
        }
        if (operand == Type::Int) {
            IntIv x = integer(b->a), y = integer(b->b);
            d_.note(e);
            return compare(b->op, x, y);
        }
        FloatIv x = real(b->a), y = real(b->b);
        if (!x.known || !y.known) return unknown_bool();
        d_.note(e);
        return compare_float(b->op, x, y);
    }

    IntIv integer(const dsl::Expr& e) {
        using namespace dsl;
        if (auto c = e.as<Const>()) return point(d_.int_const(c->i));
        if (auto v = e.as<Var>()) {
            if (v->var == VarKind::QIdx) return {d_.q0(), d_.q1()};
            if (v->var == VarKind::KvIdx) return {d_.k0(), d_.k1()};
            return point(d_.var(v->var));
        }
        if (auto s = e.as<ScalarParam>()) return point(d_.int_scalar(s->name));
        if (auto t = e.as<Temp>()) {
            if (auto b = head_temp(*t)) return point(d_.temp_int(b->name));
            auto it = int_memo_.find(t->name);
            if (it != int_memo_.end()) return it->second;
            IntIv r = integer(binding(*t).value);
            int_memo_.emplace(t->name, r);
            return r;
        }
        if (auto l = e.as<TensorLoad>()) {
            d_.note(e);
            auto r = load_int(*l);
            return r ? *r : unknown_int();
        }
        if (auto u = e.as<Unary>()) {
            IntIv a = integer(u->a);
            d_.note(e);
            if (u->op == UnaryOp::Neg) return interval::neg(d_, a);
            internal_check(u->op == UnaryOp::Abs) << "mask analysis: unexpected int unary";
            return interval::abs(d_, a);
        }
        if (auto s = e.as<Select>()) {
            Tri c = boolean(s->cond);
            IntIv t = integer(s->t), f = integer(s->f);
            d_.note(e);
            // Only the true side: t; only the false side: f; either: the union.
            P only_true = d_.not_(c.may_false);
            P only_false = d_.not_(c.may_true);
            IntIv either = interval::hull(d_, t, f);
            V lo_unless_true = d_.select(only_false, f.lo, either.lo);
            V hi_unless_true = d_.select(only_false, f.hi, either.hi);
            V lo = d_.select(only_true, t.lo, lo_unless_true);
            V hi = d_.select(only_true, t.hi, hi_unless_true);
            return {lo, hi};
        }
        if (e.as<Cast>()) return unknown_int();  // float -> int
        auto b = e.as<Binary>();
        internal_check(b) << "mask analysis: unexpected int expression " << e;
        IntIv x = integer(b->a);
        // Multiplication and division by a constant keep their sign known at codegen time.
        auto c = b->b.as<Const>();
        if (c && (b->op == BinaryOp::Mul || b->op == BinaryOp::Div || b->op == BinaryOp::Mod)) {
            const long long k = c->i;
            d_.note(e);
            switch (b->op) {
            case BinaryOp::Mul: return interval::cap_int32(d_, interval::mul_by_const(d_, x, k));
            case BinaryOp::Div:
                if (k == 0) return unknown_int();
                return interval::div_by_const(d_, x, k);
            default:
                if (k == 0) return unknown_int();
                return interval::mod_by_const_signed(d_, x, k);
            }
        }
        if (b->op == BinaryOp::Div || b->op == BinaryOp::Mod) return unknown_int();
        IntIv y = integer(b->b);
        d_.note(e);
        switch (b->op) {
        case BinaryOp::Add: return interval::add(d_, x, y);
        case BinaryOp::Sub: return interval::sub(d_, x, y);
        case BinaryOp::Min: return interval::min(d_, x, y);
        case BinaryOp::Max: return interval::max(d_, x, y);
        case BinaryOp::Mul: return interval::cap_int32(d_, interval::mul(d_, x, y));
        default: break;
        }
        internal_error << "mask analysis: unexpected int operator " << binary_name(b->op);
        return unknown_int();
    }

    FloatIv real(const dsl::Expr& e) {
        using namespace dsl;
        if (auto c = e.as<Const>()) return fpoint(d_.float_const(c->f));
        if (auto s = e.as<ScalarParam>()) return fpoint(d_.float_scalar(s->name));
        if (auto t = e.as<Temp>()) {
            if (auto b = head_temp(*t)) return fpoint(d_.temp_float(b->name));
            auto it = float_memo_.find(t->name);
            if (it != float_memo_.end()) return it->second;
            FloatIv r = real(binding(*t).value);
            float_memo_.emplace(t->name, r);
            return r;
        }
        if (auto l = e.as<TensorLoad>()) {
            d_.note(e);
            auto r = load_float(*l);
            return r ? *r : FloatIv{false, {}, {}};
        }
        if (auto c = e.as<Cast>()) {
            IntIv a = integer(c->a);
            d_.note(e);
            return {true, d_.to_float(a.lo), d_.to_float(a.hi)};
        }
        if (auto u = e.as<Unary>(); u && u->op == UnaryOp::Neg) {
            FloatIv a = real(u->a);
            if (!a.known) return a;
            d_.note(e);
            return {true, d_.fneg(a.hi), d_.fneg(a.lo)};
        }
        return FloatIv{false, {}, {}};
    }

private:
    static IntIv point(V v) { return {v, v}; }
    static FloatIv fpoint(F v) { return {true, v, v}; }
    IntIv unknown_int() { return {d_.int_const(INT32_MIN), d_.int_const(INT32_MAX)}; }
    // A product's bounds meet the int32 range (interval::cap_int32). Sound, since the value
    // itself is an int32 (overflow is undefined, see above), and it keeps every bound within
    // int64: leaves are int32, only a product can multiply their size, and the number of +
    // and - in an expression is bounded (dsl/limits.h).
    Tri unknown_bool() { return {d_.bool_const(true), d_.bool_const(true)}; }

    const Binding& binding(const dsl::Temp& t) const {
        const Binding* b = find_binding(bindings_, t.name);
        internal_check(b) << "mask analysis: temporary " << t.name << " has no binding";
        return *b;
    }
    const Binding* head_temp(const dsl::Temp& t) const {
        const Binding& b = binding(t);
        return D::kHeadTempsArePoints && b.level == Level::Head ? &b : nullptr;
    }

    bool is_head_level(const dsl::Expr& e) const { return level_of(e, bindings_) == Level::Head; }

    // Which index of a load varies (-1: none, -2: not a recognised pattern), and with
    // which variable.
    int varying_index(const dsl::TensorLoad& l, dsl::VarKind* var) const {
        int varying = -1;
        for (size_t i = 0; i < l.indices.size(); ++i) {
            if (is_head_level(l.indices[i])) continue;
            auto v = l.indices[i].as<dsl::Var>();
            if (varying != -1 || !v || (v->var != dsl::VarKind::QIdx && v->var != dsl::VarKind::KvIdx)) return -2;
            varying = static_cast<int>(i);
            *var = v->var;
        }
        return varying;
    }

    std::vector<V> index_points(const dsl::TensorLoad& l, int skip) {
        std::vector<V> idx;
        for (size_t i = 0; i < l.indices.size(); ++i)
            idx.push_back(static_cast<int>(i) == skip ? d_.int_const(0) : integer(l.indices[i]).lo);
        return idx;
    }

    std::optional<IntIv> load_int(const dsl::TensorLoad& l) {
        dsl::VarKind var{};
        const int varying = varying_index(l, &var);
        if (varying == -2) return std::nullopt;
        std::vector<V> idx = index_points(l, varying);
        if (varying == -1) return point(d_.load_int(l, idx));
        const bool q = var == dsl::VarKind::QIdx;
        auto r = d_.load_int_range(l, idx, varying, q ? d_.q0() : d_.k0(), q ? d_.q1() : d_.k1());
        return IntIv{r.first, r.second};
    }

    std::optional<FloatIv> load_float(const dsl::TensorLoad& l) {
        dsl::VarKind var{};
        const int varying = varying_index(l, &var);
        if (varying == -2) return std::nullopt;
        std::vector<V> idx = index_points(l, varying);
        if (varying == -1) return fpoint(d_.load_float(l, idx));
        const bool q = var == dsl::VarKind::QIdx;
        auto r = d_.load_float_range(l, idx, varying, q ? d_.q0() : d_.k0(), q ? d_.q1() : d_.k1());
        return FloatIv{true, r.first, r.second};
    }

    // Exact when x and y share no variable: every value pair in the box is possible.
    Tri compare(dsl::BinaryOp op, const IntIv& x, const IntIv& y) {
        using dsl::BinaryOp;
        switch (op) {
        case BinaryOp::Lt: return {d_.lt(x.lo, y.hi), d_.le(y.lo, x.hi)};
        case BinaryOp::Le: return {d_.le(x.lo, y.hi), d_.lt(y.lo, x.hi)};
        case BinaryOp::Gt: return compare(BinaryOp::Lt, y, x);
        case BinaryOp::Ge: return compare(BinaryOp::Le, y, x);
        case BinaryOp::Eq:
        case BinaryOp::Ne: {
            P x_below = d_.le(x.lo, y.hi);
            P y_below = d_.le(y.lo, x.hi);
            P overlap = d_.and_(x_below, y_below);
            P x_single = d_.eq(x.lo, x.hi);
            P y_single = d_.eq(y.lo, y.hi);
            P both_single = d_.and_(x_single, y_single);
            P same_value = d_.eq(x.lo, y.lo);
            P single = d_.and_(both_single, same_value);
            P differ = d_.not_(single);
            return op == BinaryOp::Eq ? Tri{overlap, differ} : Tri{differ, overlap};
        }
        default: break;
        }
        internal_error << "mask analysis: unexpected comparison";
        return unknown_bool();
    }

    // A NaN operand makes every comparison but != false, so those can never be proven
    // always true; != can never be proven always false... unless the ranges overlap.
    Tri compare_float(dsl::BinaryOp op, const FloatIv& x, const FloatIv& y) {
        using dsl::BinaryOp;
        const P yes = d_.bool_const(true);
        switch (op) {
        case BinaryOp::Lt: return {d_.flt(x.lo, y.hi), yes};
        case BinaryOp::Le: return {d_.fle(x.lo, y.hi), yes};
        case BinaryOp::Gt: return {d_.flt(y.lo, x.hi), yes};
        case BinaryOp::Ge: return {d_.fle(y.lo, x.hi), yes};
        case BinaryOp::Eq:
        case BinaryOp::Ne: {
            P x_below = d_.fle(x.lo, y.hi);
            P y_below = d_.fle(y.lo, x.hi);
            P overlap = d_.and_(x_below, y_below);
            return op == BinaryOp::Eq ? Tri{overlap, yes} : Tri{yes, overlap};
        }
        default: break;
        }
        internal_error << "mask analysis: unexpected float comparison";
        return unknown_bool();
    }

    D& d_;
    const Bindings& bindings_;
    std::map<std::string, IntIv> int_memo_;
    std::map<std::string, FloatIv> float_memo_;
    std::map<std::string, Tri> bool_memo_;
};

}  // namespace attnjit::codegen::detail
