// The generated Params struct: the fields of a ParamsLayout in order, then a static_assert
// per field (size, alignment) and on the whole, so NVRTC rejects any disagreement with
// the layout the host packs.
#pragma once

#include "codegen/params_layout.h"
#include "codegen/source_writer.h"

namespace attnjit::codegen {

void emit_params(SourceWriter& w, const ParamsLayout& layout);

}  // namespace attnjit::codegen
