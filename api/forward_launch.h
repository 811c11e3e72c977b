// The forward kernel's launch: its argument block (attnjit::ForwardArgs) from checked
// LaunchArgs, the Params bytes (runtime/params_packer.h) and the grid. A backward kernel
// gets a file like this one beside it.
#pragma once

#include <vector>

#include "api/attention.h"
#include "attnjit/common/kernel_config.h"
#include "attnjit/forward/args.h"
#include "codegen/params_layout.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::api {

ForwardArgs forward_args(const AttentionSpec& spec, const LaunchArgs& args);

// The bytes of the generated Params struct for these (already checked) arguments.
std::vector<unsigned char> forward_params(const codegen::ParamsLayout& layout, const AttentionSpec& spec,
                                          const LaunchArgs& args);

// One CTA per (query tile, query head, batch), as templates/README.md says.
runtime::Dim3 forward_grid(const KernelConfig& config, const LaunchArgs& args);

}  // namespace attnjit::api
