// The backward kernels' launch: their shared argument block (attnjit::BackwardArgs) from
// checked arguments, the Params bytes and the grids.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "api/attention_backward.h"
#include "attnjit/backward/args.h"
#include "attnjit/backward/sink_grad_args.h"
#include "attnjit/common/kernel_config.h"
#include "codegen/params_layout.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::api {

// stats, dq_accum: the workspaces of backward_stats_bytes(fwd) and (fast backward, else
// null) backward_dq_accum_bytes(fwd) bytes (BackwardArgs::stats, dq_accum).
BackwardArgs backward_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads, float* stats,
                           float* dq_accum);
size_t backward_stats_bytes(const LaunchArgs& fwd);
size_t backward_dq_accum_bytes(const LaunchArgs& fwd);

std::vector<unsigned char> backward_params(const codegen::ParamsLayout& layout, const BackwardArgs& block,
                                           const LaunchArgs& fwd);

// backward_sink_grad's block: present when the spec has sinks and grads.tensors holds
// their gradient (checked arguments); phase 0, partials still null. Its two launches:
// phase 0 on sink_grad_grid (chunks, Hq), skipped when chunks == 0, into a workspace of
// sink_grad_partials_bytes; phase 1 on (Hq).
std::optional<SinkGradArgs> sink_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads);
size_t sink_grad_partials_bytes(const SinkGradArgs& block);
runtime::Dim3 sink_grad_grid(const SinkGradArgs& block);
std::vector<unsigned char> sink_grad_params(const codegen::ParamsLayout& layout, const SinkGradArgs& block,
                                            const LaunchArgs& fwd);

// backward_dkdv, backward_fused: one CTA per (KV tile, kv head, batch); the others: one
// per (query tile, query head, batch). (backward_sink_grad: sink_grad_grid.)
runtime::Dim3 backward_grid(const KernelConfig& config, const LaunchArgs& fwd);

}  // namespace attnjit::api
