// The backward kernels' launch: their shared argument block (attnjit::BackwardArgs) from
// checked arguments, the Params bytes and the grids.
#pragma once

#include <cstddef>
#include <vector>

#include "api/attention_backward.h"
#include "attnjit/backward/args.h"
#include "attnjit/common/kernel_config.h"
#include "codegen/params_layout.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::api {

// stats: the workspace of backward_stats_bytes(fwd) bytes (BackwardArgs::stats).
BackwardArgs backward_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads, float* stats);
size_t backward_stats_bytes(const LaunchArgs& fwd);

std::vector<unsigned char> backward_params(const codegen::ParamsLayout& layout, const BackwardArgs& block,
                                           const LaunchArgs& fwd);

// backward_dkdv: one CTA per (KV tile, kv head, batch); backward_dq: one per (query tile,
// query head, batch).
runtime::Dim3 backward_grid(const KernelConfig& config, const LaunchArgs& fwd);

}  // namespace attnjit::api
