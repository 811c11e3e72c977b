#include "codegen/spec_inputs.h"

#include "codegen/bounds_analysis.h"

namespace attnjit::codegen {

SpecInputs spec_inputs(const dsl::AttentionSpec& spec) {
    spec.validate();
    return SpecInputs{spec.tensors(), spec.scalars(), analyze_tensor_reads(spec)};
}

}  // namespace attnjit::codegen
