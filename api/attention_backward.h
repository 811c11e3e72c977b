// The backward of an AttentionSpec: dQ, dK and dV for every variant the forward runs, with
// the derivative of score_mod taken from the DSL (codegen/autodiff.h). Deterministic by
// default: the same inputs give the same bits (no atomics; kernels backward_dq then
// backward_dkdv). CompileOptions.deterministic = false asks for the fast backward where
// it exists (fp16 / bf16, head dims up to 128: backward_stats, backward_fused,
// backward_dq_convert), whose dQ is summed with fp32 atomics: two products fewer per tile,
// but the bits of dQ may change from run to run (dK and dV stay deterministic).
//
//   attnjit::Attention fwd(spec.return_lse());       // the forward must return LSE
//   attnjit::AttentionBackward bwd(spec.return_lse());
//   LaunchArgs a{q, k, v, o};  a.lse = lse;  ...     // the forward's arguments
//   fwd(a, stream);
//   bwd(a, GradArgs{d_o, dq, dk, dv}, stream);       // after the forward, on the same stream
//
// Attention sinks (spec.sinks(name)): pass grads.tensors[name], [Hq] in the sinks' dtype,
// and a last kernel, backward_sink_grad, writes d sink_h = -sum_{b,i} exp(sink_h - LSE_i)
// Delta_i there (deterministic); without that entry the sinks get no gradient.
// Gradients of the other captured tensors and of runtime scalars come with the next step
// of this issue; they are not computed yet (asking for one is a UserError).
#pragma once

#include <memory>

#include "api/attention.h"

namespace attnjit {

struct GradArgs {
    TensorView d_o;  // [B, Hq, Nq, Dv]   the loss's gradient with respect to o (the spec's dtype)
    TensorView dq;   // [B, Hq, Nq, Dqk]  written
    TensorView dk;   // [B, Hkv, Nk, Dqk] written (summed over the query heads of a group)
    TensorView dv;   // [B, Hkv, Nk, Dv]  written
    // Gradients of captured tensors, by name, written. Today only the spec's sinks tensor
    // (spec.sinks(name)): [Hq], its dtype; optional (absent: the sinks get no gradient).
    std::map<std::string, TensorView> tensors = {};
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
    // launches both kernels on `stream`.
    void operator()(const LaunchArgs& fwd, const GradArgs& grads, Stream stream = nullptr) const;

    const AttentionSpec& spec() const;
    const KernelConfig& config(KernelKind kind) const;  // one of the kernels it runs
    // False when it runs the fast backward (CompileOptions.deterministic = false).
    bool deterministic() const;
    codegen::KernelSource source(KernelKind kind) const;
    bool can_launch() const;
    double compile_seconds() const;  // all its kernels

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The checks operator() runs on the gradient arguments (after check_launch_args on fwd).
void check_grad_args(const AttentionSpec& spec, const LaunchArgs& fwd, const GradArgs& grads);

}  // namespace attnjit
