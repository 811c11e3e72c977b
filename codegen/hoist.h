// hoist: loop-invariant code motion into the Variant's per-head and per-row closures.
//
// Every binding and every maximal subexpression is classified by what it reads
// (Level, binding.h): b, h, kv_head, q_len, kv_len, scalars and tensors indexed by
// those are Head level (computed once per CTA in make_head); adding q_idx makes it Row
// level (make_row); kv_idx or the score keep it per element. Maximal lower-level
// subexpressions of a higher-level expression become fields of their level (equal ones
// share a field), so ALiBi's slopes[h] is loaded once per head, not once per score.
// A float x / y whose y is of a lower level becomes x * (1 / y) with 1 / y a field (one
// division a head for softcap's score / cap, not one a score).
// Trivial leaves (constants, variables, scalars) are never hoisted, and inside a select
// branch or the right operand of && / || only speculatable expressions move (see cse.h):
// an expression hoisted whole keeps its own short-circuit. A guarded unsafe expression
// may still read a field that an equal unguarded occurrence already computes.
// (dq[b, q_idx] >= kv_idx && valid[dq[b, q_idx]]: r0 = dq[b, q_idx]; the mask reads
// valid[r0] per element, never in make_row.)
//
// Names: head fields h0, h1, ..., row fields r0, ..., element bindings t0, ..., each in
// evaluation order.
#pragma once

#include <vector>

#include "codegen/binding.h"

namespace attnjit::codegen {

struct HoistResult {
    Bindings head;                   // Level::Head, evaluation order
    Bindings row;                    // Level::Row, may read head fields
    Bindings element;                // Level::Element, may read head and row fields
    std::vector<dsl::Expr> results;  // rewritten to read the above through dsl::Temp
};

HoistResult hoist(const Bindings& bindings, const std::vector<dsl::Expr>& results);

// The level of e; Temps are looked up in `bindings` (an unknown Temp is an internal error).
Level level_of(const dsl::Expr& e, const Bindings& bindings);

}  // namespace attnjit::codegen
