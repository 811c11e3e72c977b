// The forward kernel's launch: its argument block (attnjit::ForwardArgs) from checked
// LaunchArgs, the Params bytes (runtime/params_packer.h) and the grid. A backward kernel
// gets a file like this one beside it.
#pragma once

#include <vector>

#include "api/attention.h"
#include "api/prepared_kernel.h"
#include "api/work_counters.h"
#include "attnjit/common/kernel_config.h"
#include "attnjit/forward/args.h"
#include "attnjit/forward/tma_maps.h"
#include "codegen/params_layout.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::api {

ForwardArgs forward_args(const AttentionSpec& spec, const LaunchArgs& args);

// The bytes of kernel k's generated Params struct for these (already checked) arguments, with
// its configuration's CTA order (ForwardArgs::cta_order). work_counter:
// ForwardArgs::work_counter (the sm90 persistent grid's), else null.
std::vector<unsigned char> forward_params(const PreparedKernel& k, const AttentionSpec& spec, const LaunchArgs& args,
                                          int* work_counter = nullptr);

// One CTA per (query tile, query head, batch), as templates/README.md says.
runtime::Dim3 forward_grid(const KernelConfig& config, const LaunchArgs& args);

// Launches the sm90 forward (k: its PreparedKernel) on `stream`. With more work items
// (query tiles x heads x batch) than the GPU's `sms`, on a persistent grid of one CTA an SM that hands
// the items out through the stream's counter of `counters` (ForwardArgs::work_counter,
// sm90/mainloop.cuh); else, or with ATTNJIT_SM90_GRID=items, one CTA an item. A configuration
// whose schedule names a grid (Sm90Grid::persistent, per_item) launches that one whatever the sizes.
void launch_sm90_forward(const PreparedKernel& k, const AttentionSpec& spec, const LaunchArgs& args,
                         const ForwardTmaMaps& maps, WorkCounters& counters, int sms, Stream stream);

}  // namespace attnjit::api
