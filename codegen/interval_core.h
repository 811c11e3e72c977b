// The int-interval rules, written once. Each rule is a template over a scalar arithmetic
// A (A::V a 64-bit int value, A::P a bool; int_const, add, sub, mul, div, neg, min, max,
// select, le), so the same text of a rule
//   - emits C in mask_analysis (its CodeDomain: values are C expressions),
//   - runs on numbers in classify_box and in the bounds evaluator (Int64Arith).
// Callers pick the overflow policy: mask analysis caps products to int32 (cap_int32),
// the bounds evaluator reports anything beyond int32 (bounds_check.cpp).
// The order of the A calls inside a rule is part of the emitted CUDA text: keep it.
#pragma once

#include <climits>

#include "support/int_arith.h"

namespace attnjit::codegen::interval {

template <class V>
struct Interval {
    V lo, hi;
};

// Plain 64-bit numbers, saturating where the exact result would not fit (never UB).
struct Int64Arith {
    using V = long long;
    using P = bool;
    V int_const(long long v) { return v; }
    V add(V a, V b) { return int_arith::saturating_add(a, b); }
    V sub(V a, V b) { return int_arith::saturating_sub(a, b); }
    V mul(V a, V b) { return int_arith::saturating_mul(a, b); }
    V div(V a, V b) { return int_arith::saturating_div(a, b); }
    V neg(V a) { return int_arith::saturating_neg(a); }
    V min(V a, V b) { return a < b ? a : b; }
    V max(V a, V b) { return a > b ? a : b; }
    V select(P c, V a, V b) { return c ? a : b; }
    P lt(V a, V b) { return a < b; }
    P le(V a, V b) { return a <= b; }
    P eq(V a, V b) { return a == b; }
};

using IntInterval = Interval<long long>;

// ---- Rules over any arithmetic A ------------------------------------------------------

template <class A>
Interval<typename A::V> add(A& a, const Interval<typename A::V>& x, const Interval<typename A::V>& y) {
    return {a.add(x.lo, y.lo), a.add(x.hi, y.hi)};
}

template <class A>
Interval<typename A::V> sub(A& a, const Interval<typename A::V>& x, const Interval<typename A::V>& y) {
    return {a.sub(x.lo, y.hi), a.sub(x.hi, y.lo)};
}

template <class A>
Interval<typename A::V> neg(A& a, const Interval<typename A::V>& x) {
    return {a.neg(x.hi), a.neg(x.lo)};
}

template <class A>
Interval<typename A::V> abs(A& a, const Interval<typename A::V>& x) {
    using V = typename A::V;
    using P = typename A::P;
    V zero = a.int_const(0);
    P nonneg = a.le(zero, x.lo);
    P nonpos = a.le(x.hi, zero);
    V neg_hi = a.neg(x.hi);
    V neg_lo = a.neg(x.lo);
    V lo_if_mixed = a.select(nonpos, neg_hi, zero);
    V lo = a.select(nonneg, x.lo, lo_if_mixed);
    return {lo, a.max(neg_lo, x.hi)};
}

template <class A>
Interval<typename A::V> min(A& a, const Interval<typename A::V>& x, const Interval<typename A::V>& y) {
    return {a.min(x.lo, y.lo), a.min(x.hi, y.hi)};
}

template <class A>
Interval<typename A::V> max(A& a, const Interval<typename A::V>& x, const Interval<typename A::V>& y) {
    return {a.max(x.lo, y.lo), a.max(x.hi, y.hi)};
}

// The smallest interval holding both (a select that may take either side).
template <class A>
Interval<typename A::V> hull(A& a, const Interval<typename A::V>& x, const Interval<typename A::V>& y) {
    typename A::V lo = a.min(x.lo, y.lo);
    typename A::V hi = a.max(x.hi, y.hi);
    return {lo, hi};
}

// Exact: the extremes of a product are among the four corner products.
template <class A>
Interval<typename A::V> mul(A& a, const Interval<typename A::V>& x, const Interval<typename A::V>& y) {
    using V = typename A::V;
    V p = a.mul(x.lo, y.lo), q = a.mul(x.lo, y.hi), r = a.mul(x.hi, y.lo), s = a.mul(x.hi, y.hi);
    V lo_pq = a.min(p, q);
    V lo_rs = a.min(r, s);
    V hi_pq = a.max(p, q);
    V hi_rs = a.max(r, s);
    V lo = a.min(lo_pq, lo_rs);
    V hi = a.max(hi_pq, hi_rs);
    return {lo, hi};
}

// A constant's sign is known, so two products suffice.
template <class A>
Interval<typename A::V> mul_by_const(A& a, const Interval<typename A::V>& x, long long k) {
    typename A::V kv = a.int_const(k);
    if (k >= 0) {
        typename A::V lo = a.mul(x.lo, kv);
        return {lo, a.mul(x.hi, kv)};
    }
    typename A::V lo = a.mul(x.hi, kv);
    return {lo, a.mul(x.lo, kv)};
}

// C division truncates toward zero, which is monotone in the dividend. k != 0.
template <class A>
Interval<typename A::V> div_by_const(A& a, const Interval<typename A::V>& x, long long k) {
    typename A::V kv = a.int_const(k);
    if (k > 0) {
        typename A::V lo = a.div(x.lo, kv);
        return {lo, a.div(x.hi, kv)};
    }
    typename A::V lo = a.div(x.hi, kv);
    return {lo, a.div(x.lo, kv)};
}

// C %: the sign of the dividend, magnitude below |k|; only the dividend's sign is used
// (what classify() computes on the device). k != 0.
template <class A>
Interval<typename A::V> mod_by_const_signed(A& a, const Interval<typename A::V>& x, long long k) {
    using V = typename A::V;
    using P = typename A::P;
    const long long m = (k < 0 ? -k : k) - 1;
    P nonneg = a.le(a.int_const(0), x.lo);
    P nonpos = a.le(x.hi, a.int_const(0));
    V lo = a.select(nonneg, a.int_const(0), a.int_const(-m));
    V hi = a.select(nonpos, a.int_const(0), a.int_const(m));
    return {lo, hi};
}

// Meets the int32 range: sound for a value the GPU holds in an int32 (overflow is
// undefined there), and it keeps later bounds within int64.
template <class A>
Interval<typename A::V> cap_int32(A& a, const Interval<typename A::V>& r) {
    using V = typename A::V;
    V lo_capped = a.min(r.lo, a.int_const(INT32_MAX));
    V hi_capped = a.min(r.hi, a.int_const(INT32_MAX));
    V lo = a.max(lo_capped, a.int_const(INT32_MIN));
    return {lo, a.max(hi_capped, a.int_const(INT32_MIN))};
}

// ---- The same rules on plain numbers -------------------------------------------------

inline IntInterval add(IntInterval x, IntInterval y) { Int64Arith a; return add(a, x, y); }
inline IntInterval sub(IntInterval x, IntInterval y) { Int64Arith a; return sub(a, x, y); }
inline IntInterval neg(IntInterval x) { Int64Arith a; return neg(a, x); }
inline IntInterval abs(IntInterval x) { Int64Arith a; return abs(a, x); }
inline IntInterval min(IntInterval x, IntInterval y) { Int64Arith a; return min(a, x, y); }
inline IntInterval max(IntInterval x, IntInterval y) { Int64Arith a; return max(a, x, y); }
inline IntInterval hull(IntInterval x, IntInterval y) { Int64Arith a; return hull(a, x, y); }
inline IntInterval mul(IntInterval x, IntInterval y) { Int64Arith a; return mul(a, x, y); }
inline IntInterval div_by_const(IntInterval x, long long k) { Int64Arith a; return div_by_const(a, x, k); }
inline IntInterval cap_int32(IntInterval x) { Int64Arith a; return cap_int32(a, x); }

// C %, bounded by both the dividend's sign and its magnitude (host only: tighter than
// mod_by_const_signed when the dividend is small). k != 0.
inline IntInterval mod_by_const(IntInterval x, long long k) {
    const long long m = (k < 0 ? -k : k) - 1;
    if (x.lo >= 0) return {0, x.hi < m ? x.hi : m};
    if (x.hi <= 0) return {x.lo > -m ? x.lo : -m, 0};
    return {-m, m};
}

// Comparisons of ints, for narrowing.
enum class Cmp { Lt, Le, Gt, Ge, Eq, Ne };

// The values of v for which "v op y" can hold for some y in `bound` (Ne narrows nothing).
inline IntInterval narrow(IntInterval v, Cmp op, IntInterval bound) {
    switch (op) {
    case Cmp::Lt: v.hi = v.hi < bound.hi - 1 ? v.hi : bound.hi - 1; break;
    case Cmp::Le: v.hi = v.hi < bound.hi ? v.hi : bound.hi; break;
    case Cmp::Gt: v.lo = v.lo > bound.lo + 1 ? v.lo : bound.lo + 1; break;
    case Cmp::Ge: v.lo = v.lo > bound.lo ? v.lo : bound.lo; break;
    case Cmp::Eq:
        v.lo = v.lo > bound.lo ? v.lo : bound.lo;
        v.hi = v.hi < bound.hi ? v.hi : bound.hi;
        break;
    case Cmp::Ne: break;
    }
    return v;
}

inline const char* cmp_name(Cmp c) {
    switch (c) {
    case Cmp::Lt: return "<";
    case Cmp::Le: return "<=";
    case Cmp::Gt: return ">";
    case Cmp::Ge: return ">=";
    case Cmp::Eq: return "==";
    case Cmp::Ne: return "!=";
    }
    return "?";
}

}  // namespace attnjit::codegen::interval
