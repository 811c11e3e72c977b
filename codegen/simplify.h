// simplify: constant folding and a short list of algebraic identities.
//
// Folds constants (arithmetic, comparisons, casts, select with a constant condition,
// && and || with a constant side), removes identities (x + 0, x - 0, x * 1, x / 1,
// !!x, -(-x), min/max of equal operands, select with equal branches), and puts
// constants on the right of commutative operators and comparisons (2 * x -> x * 2,
// 0 <= x -> x >= 0) so later passes see one form.
//
// Float rules never change results: x * 0 -> 0 and x - x -> 0 are applied to ints only
// (NaN and inf), x + 0.0 is kept (it turns -0.0 into +0.0), and no float is
// reassociated. Int constants fold with int32 semantics and are left alone when the C
// result would overflow or divide by zero. Float constants fold in double precision
// and are rounded to fp32 once, when emitted.
#pragma once

#include "dsl/ir.h"

namespace attnjit::codegen {

dsl::Expr simplify(const dsl::Expr& e);

}  // namespace attnjit::codegen
