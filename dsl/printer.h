// The textual form of expressions: infix with C precedence, e.g.
//   30.0 * tanh(score / 30.0)      bias[b, h, q_idx, kv_idx]      select(kv_idx <= q_idx, score, -inf)
// Used in error messages, in comments of generated code, and (later) as the syntax of
// the textual spec format, so it is unambiguous: a negated literal prints as -(2.0),
// a negative literal as -2.0; float literals always carry a '.', 'e' or 'inf'.
#pragma once

#include <ostream>
#include <string>

#include "dsl/ir.h"

namespace attnjit::dsl {

std::ostream& operator<<(std::ostream& os, const Expr& e);
std::string to_string(const Expr& e);
// Shortest decimal that reads back as the same double, always recognisable as float.
std::string float_literal(double v);

}  // namespace attnjit::dsl
