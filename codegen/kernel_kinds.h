// What differs between kernel kinds on the generated side: the entry symbol, the template
// header and the traits and kernel templates the entry calls. The Params struct (with the
// kind's argument block, params_layout.h) and the Variant (emit_variant.h) are shared by
// every kind. To add a kind: a row here, an argument block in params_layout.cpp, and the
// template header it names.
#pragma once

#include "attnjit/common/kernel_config.h"

namespace attnjit::codegen {

struct KernelKindInfo {
    KernelKind kind;
    const char* entry;        // extern "C" symbol: "attnjit_forward"
    const char* header;       // template the generated source includes
    const char* traits;       // traits template: <MainloopKind, Element, Dqk, Dv, BlockM, BlockN, Warps, Stages>
    const char* kernel;       // device function the entry calls: kernel<Traits, Variant>(p)
    const char* name_prefix;  // kernel names: "fwd"
};

const KernelKindInfo& kernel_kind_info(KernelKind kind);

}  // namespace attnjit::codegen
