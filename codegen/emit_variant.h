// The generated Variant: the plan's hooks (make_head, make_row, score_mod, mask, classify)
// as a struct deriving from attnjit::VariantDefaults (templates/attnjit/common/variant.cuh),
// which supplies the structural hooks this plan does not override. Shared by every kernel
// kind: a backward or decode kernel calls the same hooks.
#pragma once

#include "codegen/kernel_plan.h"
#include "codegen/source_writer.h"

namespace attnjit::codegen {

void emit_variant(SourceWriter& w, const KernelPlan& plan);

}  // namespace attnjit::codegen
