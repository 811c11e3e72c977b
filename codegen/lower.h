// lower: AttentionSpec -> KernelPlan, a flat list of passes (after Halide's Lower.cpp):
//
//   [spec_inputs: validate, collect inputs, bounds_analysis of the spec's own
//   expressions (every read the user wrote)] -> simplify -> cse -> hoist
//   -> split per hook -> mask_analysis
//
// ATTNJIT_DEBUG=1 logs each pass's name and time, ATTNJIT_DEBUG=2 also its output.
// Deterministic: the same spec gives the same plan, in any process.
#pragma once

#include <set>
#include <string>

#include "attnjit/common/kernel_config.h"
#include "codegen/kernel_plan.h"
#include "codegen/spec_inputs.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

// Throws UserError when the spec is invalid (AttentionSpec::validate()).
KernelPlan lower(const dsl::AttentionSpec& spec);
// For a caller that already holds spec_inputs(spec) (the spec is then valid): the spec is
// neither validated nor analysed again. A backward `kind` adds d_score (autodiff), CSE'd
// and hoisted with score_mod and the mask.
// `grads`: captured tensors and runtime scalars whose gradients a backward_dq kernel
// computes (input_grads.h; other kinds ignore it): their partials are CSE'd and hoisted
// with score_mod too. Empty: the plan (and the source) of a backward without them.
KernelPlan lower(const dsl::AttentionSpec& spec, SpecInputs inputs, KernelKind kind = KernelKind::forward,
                 const std::set<std::string>& grads = {});

}  // namespace attnjit::codegen
