// bounds_analysis: the codegen pass behind "no argument that passes check_launch_args can
// make a kernel read outside a captured tensor". It turns every tensor read of a spec into
// a BoundsProgram (bounds_program.h) that bounds_check.h evaluates with a launch's
// numbers, so runtime never walks the IR.
//
// Every int index gets a range over all (b, h, i, j) of the launch, refined along the
// path that reaches the read. In score_mod, inside select(c, x, y), && and ||, a
// comparison of a variable with a bound narrows that variable (select(i < 16, t[i], 0.0)
// reads t only for i < 16). In the mask, guards narrow nothing: the generated classify()
// evaluates the mask's reads over whole tiles, ignoring guards, so every read must be in
// bounds over the whole launch. An index computed from a tensor's elements or from a
// float has no host-side bound unless the expression bounds it itself
// (clamp(doc[b, j], 0, 9)).
#pragma once

#include "codegen/bounds_program.h"
#include "dsl/attention_spec.h"
#include "dsl/ir.h"

namespace attnjit::codegen {

// The reads of spec.score_mod() (guards narrow), then of spec.mask() (guards ignored).
// The spec's own expressions, not the lowered ones: every read the user wrote is
// checked, whatever simplify makes of it.
BoundsProgram analyze_tensor_reads(const dsl::AttentionSpec& spec);
// The same for two expressions, either of which may be undefined.
BoundsProgram analyze_tensor_reads(const dsl::Expr& score_mod, const dsl::Expr& mask);

}  // namespace attnjit::codegen
