// The user-facing entry point: compile an AttentionSpec once, launch it many times.
//
//   attnjit::Attention attn(spec);             // generate, compile (JIT + caches), load
//   attnjit::LaunchArgs a{q, k, v, o};         // TensorViews over device memory
//   a.tensors["bias"] = bias;  a.scalars["cap"] = 30.0;
//   attn(a, stream);                           // every argument is checked before launch
#pragma once

#include <map>
#include <set>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "attnjit/common/kernel_config.h"
#include "codegen/spec_inputs.h"
#include "codegen/kernel_source.h"
#include "dsl/attention_spec.h"
#include "runtime/tensor_view.h"

namespace attnjit {

using dsl::AttentionSpec;
using runtime::TensorView;

// Any CUDA stream handle (CUstream or cudaStream_t); null is the legacy default stream.
using Stream = void*;

struct CompileOptions {
    // Compile for this arch ("sm_80", "sm_90a", ...) instead of the current GPU's. With
    // no GPU present attnjit compiles only, and launching throws.
    std::optional<std::string> arch;
    // Tile configuration; default: default_tile() (attnjit/common/kernel_config.h) for the
    // spec's dtype and head dims on the target arch.
    std::optional<TileConfig> tile;
    // AttentionBackward only: false lets the fused backward add dQ with fp32 atomics in
    // any order (its bits may change from run to run), where it exists (fp16 / bf16, head
    // dims 64 and 128); elsewhere the deterministic one runs regardless.
    bool deterministic = true;
    // AttentionBackward only, deterministic: false runs the two-kernel backward
    // (backward_dq, then backward_dkdv) where the fused one (dQ sums added in a fixed order)
    // exists too. The fused one does two products fewer per tile; both give fixed bits.
    bool fused_backward = true;
    // AttentionBackward only: the captured tensors and runtime scalars whose gradients it
    // computes (GradArgs::grads); asking for any runs the deterministic backward.
    std::set<std::string> grads = {};
    // Attention: the forward's main loop. Unset: sm90 (TMA + wgmma) on sm_90a where it
    // carries the spec, else sm80 (f16 / bf16) or simt (f32); set: that loop, or a UserError
    // saying why it cannot run the spec. AttentionBackward: the kernel that owns the keys
    // (backward_fused, or backward_dkdv in the two-pass backward) on the sm90 loop, unset: on
    // sm_90a where it carries the spec (f16 / bf16, head dims up to 128, no score convolution,
    // reciprocal band, latent projection or gradients of captured tensors) and `tile` is unset,
    // with the sm80 kernels for a call whose tensors the bulk copies cannot read; sm90: always
    // (its own tile, whatever `tile` says; a UserError where it cannot run); sm80: never.
    std::optional<MainloopKind> mainloop;
    // Tune the configuration on the first launch of each shape bucket (api/autotune.h,
    // docs/autotune.md): Attention its forward kernel's, AttentionBackward the tile of its
    // kernel that owns the key tiles (api/backward_tuning.h); unset: ATTNJIT_AUTOTUNE. Ignored
    // where a `tile`, a `mainloop` or a `schedule` is given, and for a latent projection (its kernels
    // are fixed).
    std::optional<bool> autotune;
    // Attention only: how the forward's CTAs take their work (CtaSchedule, kernel_config.h: the
    // CTA order, and the sm90 loop's grid), chosen at launch, the compiled kernel the same; unset:
    // the kernel's own, or the tuned one. A UserError where the kernel has no such choice (a
    // grid off the sm90 loop, an order on the simt loop), and from AttentionBackward.
    std::optional<CtaSchedule> schedule;
};

struct LaunchArgs {
    TensorView q;  // [B, Hq, Nq, Dqk]  any strides, unit stride on the last dim
    TensorView k;  // [B, Hkv, Nk, Dqk]
    TensorView v;  // [B, Hkv, Nk, Dv]
    TensorView o;  // [B, Hq, Nq, Dv]   written
    std::optional<TensorView> lse;            // [B, Hq, Nq] f32, required iff spec.return_lse()
    std::map<std::string, TensorView> tensors;  // every captured tensor of the spec, by name
    std::map<std::string, double> scalars;      // every runtime scalar of the spec, by name
};

class Attention {
public:
    explicit Attention(const AttentionSpec& spec, const CompileOptions& options = {});
    ~Attention();
    Attention(Attention&&) noexcept;
    Attention& operator=(Attention&&) noexcept;

    // Checks every argument against the spec (UserError, nothing launched on failure),
    // then launches on `stream`. Asynchronous, like any CUDA launch.
    void operator()(const LaunchArgs& args, Stream stream = nullptr) const;

    const AttentionSpec& spec() const;
    const codegen::KernelSource& source() const;  // the generated CUDA
    const std::string& arch() const;              // what it was compiled for
    // Seconds the constructor spent generating the kernel and compiling it (or reading
    // it from the disk cache); 0 when it was already in memory.
    double compile_seconds() const;
    bool can_launch() const;                      // false when compiled without a GPU
    const TileConfig& tile() const;
    const KernelConfig& config() const;           // the kernel it runs: kind, main loop, dtype, dims, tile

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Attention& a);

// What a (valid) spec reads besides Q, K, V, and the bounds of its tensor reads as a
// program over launch numbers (codegen/spec_inputs.h); computed once per Attention, not
// per launch. spec_inputs(spec) validates the spec (UserError) and collects them: the one
// place either happens.
using codegen::SpecInputs;
using codegen::spec_inputs;

// Checks launch arguments against a spec without launching (what operator() does
// first). Throws UserError naming the argument, the problem and the fix.
void check_launch_args(const AttentionSpec& spec, const LaunchArgs& args);
// The same for a spec already validated, with its inputs already collected (spec_inputs).
void check_launch_args(const AttentionSpec& spec, const SpecInputs& inputs, const LaunchArgs& args);

}  // namespace attnjit
