// autodiff: derivatives of a score_mod, from which the backward kernels' hooks are emitted
// as score_mod is emitted into the forward (SEMANTICS.md section 2).
//
//   derivative(e, leaf)          forward-mode d e / d leaf, where leaf is score(), a runtime
//                                scalar or one captured-tensor read (a TensorLoad); every
//                                node structurally equal to `leaf` is that leaf
//   score_mod_gradients(spec, w) d t / d s, and for every captured tensor and runtime scalar
//                                named in `w`, its read sites with d t / d site; simplified
//
// Rules (the leaves' tangents flow through the chain rule; a non-Float node has none):
//   exp, exp2, log, log2, sin, cos, tanh, sigmoid, sqrt, rsqrt, pow, +, -, *, /, fmod: the
//   usual derivatives; pow follows PyTorch (0 where the exponent is 0 for d/da, and where
//   a == 0 with exponent >= 0 for d/d exponent).
//   abs: sign(a) (0 at 0). min / max: the chosen operand's, half each on a tie (PyTorch).
//   select(c, x, y): select(c, x', y') (the condition has none). floor, ceil, casts from
//   int or bool, comparisons, && and ||: none. Masks have no gradient.
//
// A structural zero (no path from the leaf) is dropped rather than multiplied out, so a
// branch that does not read the leaf contributes nothing, not 0 * inf.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "codegen/grad_reduction.h"
#include "dsl/attention_spec.h"
#include "dsl/ir.h"

namespace attnjit::codegen {

// d e / d leaf, unsimplified; the Float constant 0 when e does not depend on the leaf.
// UserError when the derivative outgrows the internal expression limits (dsl/limits.h).
dsl::Expr derivative(const dsl::Expr& e, const dsl::Expr& leaf);

// One place score_mod reads a captured tensor that needs a gradient: grad[indices] receives
// dT * partial for every (b, h, i, j) (reads of the same element at different sites add).
struct TensorReadGradient {
    std::string tensor;
    dsl::Expr read;     // the TensorLoad (its indices are the element read)
    dsl::Expr partial;  // d score_mod / d read
    GradReductionPlan reduction;  // how contributions to one element meet (grad_reduction.h)
};

struct ScalarGradient {
    std::string scalar;
    dsl::Expr partial;  // d score_mod / d scalar, summed over every (b, h, i, j)
};

struct ScoreModGradients {
    dsl::Expr d_score;  // d score_mod / d s (1 without a score_mod)
    std::vector<TensorReadGradient> tensors;  // by tensor name, then order of first read
    std::vector<ScalarGradient> scalars;      // by name
};

// The gradients a backward needs for `spec` (valid) with respect to the score and the
// captured tensors and runtime scalars named in `wanted`. A wanted name the spec does not
// declare, an integer or bool tensor, or an int scalar is a UserError; a float tensor
// only the mask reads has no read sites (its gradient is zero).
ScoreModGradients score_mod_gradients(const dsl::AttentionSpec& spec, const std::set<std::string>& wanted);

}  // namespace attnjit::codegen
