// The backward of an AttentionSpec: dQ, dK and dV for every variant the forward runs, with
// the derivative of score_mod taken from the DSL (codegen/autodiff.h). Deterministic by
// default: the same inputs give the same bits. Where the fused kernels exist (fp16 / bf16,
// head dims 64 and 128) it runs backward_stats, backward_fused (dK, dV, and dQ = dS K added
// to fp32 sums, one key tile at a time per query tile in a fixed order) and
// backward_dq_convert; elsewhere, for masks whose tile classification reads tensors
// (document masks), or with CompileOptions.fused_backward = false, backward_dq then
// backward_dkdv (no additions across CTAs; two products more per tile).
// CompileOptions.deterministic = false lets the fused kernel add dQ in any order (fp32
// atomics): a little faster, but the bits of dQ may change from run to run (dK and dV stay
// deterministic).
//
//   attnjit::Attention fwd(spec.return_lse());       // the forward must return LSE
//   attnjit::AttentionBackward bwd(spec.return_lse());
//   LaunchArgs a{q, k, v, o};  a.lse = lse;  ...     // the forward's arguments
//   fwd(a, stream);
//   bwd(a, GradArgs{d_o, dq, dk, dv}, stream);       // after the forward, on the same stream
//
// Gradients of captured tensors and runtime scalars (CompileOptions.grads, GradArgs::grads;
// codegen/input_grads.h says which reads are supported): computed by backward_dq,
// deterministically; asking for any runs the deterministic backward.
//
//   CompileOptions o;  o.grads = {"bias", "cap"};
//   AttentionBackward bwd(spec.return_lse(), o);
//   GradArgs g{d_o, dq, dk, dv};
//   g.grads["bias"] = dbias;   // the shape and dtype of the captured tensor (see GradArgs)
//   g.grads["cap"] = dcap;     // a scalar's: a 0-dim f32 tensor on the device
//
// Attention sinks (spec.sinks(name)) are a captured tensor too: pass grads[name], [Hq] in
// the sinks' dtype, and a last kernel, backward_sink_grad, writes d sink_h = -sum_{b,i}
// exp(sink_h - LSE_i) Delta_i there (deterministic). They need no CompileOptions.grads
// entry (naming them there makes the entry required); without one they get no gradient.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/attention.h"
#include "codegen/kernel_plan.h"

namespace attnjit {

struct GradArgs {
    TensorView d_o;  // [B, Hq, Nq, Dv]   the loss's gradient with respect to o (the spec's dtype)
    TensorView dq;   // [B, Hq, Nq, Dqk]  written
    TensorView dk;   // [B, Hkv, Nk, Dqk] written (summed over the query heads of a group)
    TensorView dv;   // [B, Hkv, Nk, Dv]  written
    // Gradients of the captured tensors and runtime scalars named in CompileOptions.grads,
    // by name, written (every element). A tensor's has its shape and dtype and any strides;
    // stride 0 only where the captured tensor has stride 0 (a broadcast): that element then
    // receives the sum over the dimension, while a gradient with a real stride there gets
    // each index's own (what autograd wants for an expanded tensor). A scalar's is a 0-dim
    // f32 tensor. The spec's sinks tensor (spec.sinks(name)): [Hq], its dtype, optional.
    std::map<std::string, TensorView> grads = {};
};

class AttentionBackward {
public:
    // Compiles the backward kernels for `spec` (see above; options.tile is the tile of the
    // kernels that own tiles). The spec must return LSE (return_lse()), as the forward
    // whose results the backward reads.
    explicit AttentionBackward(const AttentionSpec& spec, const CompileOptions& options = {});
    ~AttentionBackward();
    AttentionBackward(AttentionBackward&&) noexcept;
    AttentionBackward& operator=(AttentionBackward&&) noexcept;

    // fwd: the forward's arguments once it has run (q, k, v, its o and lse, captured
    // tensors, scalars). Checks everything (UserError, nothing launched on failure), then
    // launches its kernels (kernel_kinds()) on `stream`.
    void operator()(const LaunchArgs& fwd, const GradArgs& grads, Stream stream = nullptr) const;

    const AttentionSpec& spec() const;
    const KernelConfig& config(KernelKind kind) const;  // one of the kernels it runs
    std::vector<KernelKind> kernel_kinds() const;       // the kernels it runs, in launch order
    // The kernel that owns the key tiles: backward_fused, or backward_dkdv in the two-pass
    // backward (the one whose tile autotuning chooses). Not for a latent projection (UserError).
    KernelKind key_kind() const;
    // False when dQ is added in any order (CompileOptions.deterministic = false, fused).
    bool deterministic() const;
    // Every check operator() makes of its arguments, launching nothing (UserError): what a
    // caller that cannot launch here (compiled for another arch) still gets told.
    void check_args(const LaunchArgs& fwd, const GradArgs& grads) const;
    codegen::KernelSource source(KernelKind kind) const;
    bool can_launch() const;
    // Seconds the constructor spent generating and compiling its kernels (or reading them from
    // the disk cache): the wall time, the kernels compiling at once; 0 when all were in memory.
    double compile_seconds() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The checks operator() runs on the gradient arguments (after check_launch_args on fwd).
void check_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads);

// The checks of GradArgs::grads for a backward asked for `outputs` (backward_dq's plan).
// structural: the spec's sinks and gate names, if any (their entries are check_grad_args's to check).
void check_input_grad_args(const LaunchArgs& fwd, const GradArgs& grads,
                           const std::vector<codegen::InputGradOutput>& outputs,
                           const std::set<std::string>& structural = {});

}  // namespace attnjit
