// From checked LaunchArgs to a launch: the Params bytes (packed with the same
// ParamsLayout the generator used for the struct) and the grid.
#pragma once

#include <vector>

#include "attnjit/common/kernel_config.h"
#include "codegen/params_layout.h"
#include "runtime/attention.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::runtime {

// The bytes of the generated Params struct for these (already checked) arguments.
std::vector<unsigned char> pack_params(const codegen::ParamsLayout& layout, const AttentionSpec& spec,
                                       const LaunchArgs& args);

// One CTA per (query tile, query head, batch), as templates/README.md says.
Dim3 forward_grid(const KernelConfig& config, const LaunchArgs& args);

}  // namespace attnjit::runtime
