// cse: common subexpression elimination into let-bindings.
//
// Every non-trivial subexpression (not a constant, variable, scalar or temporary) that
// occurs more than once across `exprs` is computed once, as a binding named
// <prefix>0, <prefix>1, ... in evaluation order (a binding only refers to earlier ones),
// and each occurrence becomes a dsl::Temp of that name. Structural equality decides
// what is "the same", so the names depend only on the expressions: deterministic.
//
// Bindings are evaluated unconditionally, before the results. Inside a guarded operand
// (a select branch, or the right operand of && or ||, which C and dsl::interpret only
// evaluate when the left one does not decide the result) only speculatable
// subexpressions (no tensor load, no int / or %) are shared, so a guarded load such as
// select(j < n, table[j], 0.0) or j < n && table[j] > 0 is never hoisted out of its guard.
#pragma once

#include <string>
#include <vector>

#include "codegen/binding.h"

namespace attnjit::codegen {

struct CseResult {
    Bindings bindings;              // all at Level::Element; hoist() assigns levels
    std::vector<dsl::Expr> results;  // one per input (undefined stays undefined)
};

CseResult cse(const std::vector<dsl::Expr>& exprs, const std::string& prefix = "t");

// True when evaluating e can never fault or be undefined whatever its operands are:
// no tensor load and no integer division or modulo.
bool speculatable(const dsl::Expr& e);

// True for && and ||: their right operand is evaluated only when the left one does not
// decide the result, so it is guarded exactly like a select branch.
bool short_circuits(dsl::BinaryOp op);

}  // namespace attnjit::codegen
