// lower: AttentionSpec -> KernelPlan, a flat list of passes (after Halide's Lower.cpp):
//
//   validate -> simplify -> cse -> hoist -> split per hook -> mask_analysis
//   -> bounds_analysis (of the spec's own expressions: every read the user wrote)
//
// ATTNJIT_DEBUG=1 logs each pass's name and time, ATTNJIT_DEBUG=2 also its output.
// Deterministic: the same spec gives the same plan, in any process.
#pragma once

#include "codegen/kernel_plan.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

// Throws UserError when the spec is invalid (AttentionSpec::validate()).
KernelPlan lower(const dsl::AttentionSpec& spec);

}  // namespace attnjit::codegen
