// The backward kernels' launch: their shared argument block (attnjit::BackwardArgs) from
// checked arguments, the Params bytes and the grids.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <optional>
#include <vector>

#include "api/attention_backward.h"
#include "attnjit/backward/args.h"
#include "attnjit/backward/grad_args.h"
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
// How many chunks backward_dq's batch-sum launch splits the batch into (BackwardArgs::
// batch_sum_chunks): 1 when its tiles x heads fill the GPU, else enough CTAs for about
// two waves of an H100, at least 8 batches a chunk and at most 256 MiB of f32 partials.
// A function of the shape only, so the bits do not depend on the GPU.
int batch_sum_chunks(size_t tiles, int64_t batch, int64_t elems_per_chunk);
size_t backward_dq_accum_bytes(const LaunchArgs& fwd);
// The ordered backward_fused's turn counters (BackwardArgs::dq_turns), one per query tile
// and CTA of a key tile (fused_column_split).
size_t backward_dq_turns_bytes(const LaunchArgs& fwd, const KernelConfig& fused);

// grads, work: a backward_dq kernel with gradient outputs (ParamsField::Kind::Grad, GradWork
// fields); null otherwise.
// Where an elementwise gradient's sums go (attnjit::GradArg's plane fields): planes null
// for direct stores.
struct GradPlanes {
    float* planes = nullptr;
    long long elems = 0;
    int plane_b = 0, plane_h = 0;
};
std::vector<unsigned char> backward_params(const codegen::ParamsLayout& layout, const BackwardArgs& block,
                                           const LaunchArgs& fwd, const GradArgs* grads = nullptr,
                                           const GradWork* work = nullptr,
                                           const std::map<std::string, GradPlanes>* planes = nullptr);

// The workspace of the per-CTA sums of `sites` summed sites over `ctas` CTAs
// (attnjit::GradWork): partials, indices, then the ticket (which must be zeroed).
size_t grad_work_bytes(int sites, int ctas);
GradWork grad_work(void* base, int sites, int ctas);
size_t grad_work_ticket_offset(int sites, int ctas);

// backward_sink_grad's block: present when the spec has sinks and grads.grads holds
// their gradient (checked arguments); phase 0, partials still null. Its two launches:
// phase 0 on sink_grad_grid (chunks, Hq), skipped when chunks == 0, into a workspace of
// sink_grad_partials_bytes; phase 1 on (Hq).
// An output gate (spec.gate()): d_o becomes `gated_d_o` (contiguous [B, Hq, Nq, Dv], written by
// backward_stats), delta_d_o stays the caller's dO; gate and d_gate (if GradArgs::grads has
// the gate's name) as backward/args.h says.
void set_gate_args(BackwardArgs& block, const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads,
                   void* gated_d_o);

std::optional<SinkGradArgs> sink_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads);
size_t sink_grad_partials_bytes(const SinkGradArgs& block);
runtime::Dim3 sink_grad_grid(const SinkGradArgs& block);
std::vector<unsigned char> sink_grad_params(const codegen::ParamsLayout& layout, const SinkGradArgs& block,
                                            const LaunchArgs& fwd);

// backward_dkdv, backward_fused: one CTA per (KV tile, kv head, batch); the others: one
// per (query tile, query head, batch). (backward_sink_grad: sink_grad_grid.)
runtime::Dim3 backward_grid(const KernelConfig& config, const LaunchArgs& fwd);

}  // namespace attnjit::api
