// SpecInputs: what a valid spec reads at run time besides Q, K and V (its captured tensors
// and runtime scalars, as declared) and the bounds of its captured-tensor reads as a
// program over launch numbers (bounds_analysis.h).
//
// spec_inputs() is the one place a spec is validated and its inputs collected: the
// attention API does it once per kernel, and the plan, the params layout and every
// launch check read the result.
#pragma once

#include <map>
#include <string>

#include "codegen/bounds_program.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

struct SpecInputs {
    std::map<std::string, dsl::TensorInfo> tensors;  // sorted by name
    std::map<std::string, dsl::Type> scalars;        // sorted by name
    BoundsProgram tensor_reads;
};

// Validates the spec (UserError naming what is wrong) and collects its inputs.
SpecInputs spec_inputs(const dsl::AttentionSpec& spec);

}  // namespace attnjit::codegen
