// The forward KernelSource of a spec for a target, as the runtime makes it: the default
// configuration for the arch, or `tile` in it. Tests of codegen use this one spelling.
#pragma once

#include <optional>
#include <string>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"

namespace attnjit::testing {

inline codegen::KernelSource forward_source(const dsl::AttentionSpec& spec,
                                            const std::optional<TileConfig>& tile = std::nullopt,
                                            const std::string& arch = "sm_80") {
    return codegen::generate(spec, codegen::make_config(spec, KernelKind::forward, arch, tile), arch);
}

}  // namespace attnjit::testing
