// What users write: C++ operators and math functions on Expr. Mixed int/float operands
// promote to float; a bool where a number is needed (or the reverse) is a UserError
// that prints the offending expression. Integer / and % truncate toward zero, as in C++.
#pragma once

#include "dsl/ir.h"

namespace attnjit::dsl {

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator%(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr operator==(const Expr& a, const Expr& b);
Expr operator!=(const Expr& a, const Expr& b);
Expr operator<(const Expr& a, const Expr& b);
Expr operator<=(const Expr& a, const Expr& b);
Expr operator>(const Expr& a, const Expr& b);
Expr operator>=(const Expr& a, const Expr& b);
Expr operator&&(const Expr& a, const Expr& b);
Expr operator||(const Expr& a, const Expr& b);
Expr operator!(const Expr& a);

Expr select(const Expr& cond, const Expr& if_true, const Expr& if_false);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr clamp(const Expr& x, const Expr& lo, const Expr& hi);
Expr abs(const Expr& a);
Expr pow(const Expr& a, const Expr& b);
Expr exp(const Expr& a);
Expr exp2(const Expr& a);
Expr log(const Expr& a);
Expr log2(const Expr& a);
Expr tanh(const Expr& a);
Expr sigmoid(const Expr& a);
Expr sqrt(const Expr& a);
Expr rsqrt(const Expr& a);
Expr floor(const Expr& a);
Expr ceil(const Expr& a);
Expr sin(const Expr& a);
Expr cos(const Expr& a);
Expr to_float(const Expr& a);
Expr to_int(const Expr& a);  // truncates toward zero

// IEEE infinity as a Float constant (e.g. select(keep, score, -infinity())).
Expr infinity();

}  // namespace attnjit::dsl
