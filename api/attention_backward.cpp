#include "api/attention_backward.h"

#include "api/backward_launch.h"
#include "api/prepared_kernel.h"
#include "codegen/kernel_config.h"

#include <vector>
#include "runtime/stream_buffer.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

struct AttentionBackward::Impl {
    AttentionSpec spec;  // validated, returns LSE
    SpecInputs inputs;   // spec_inputs(spec)
    std::string arch;
    bool fast = false;                    // backward_stats, backward_fused, backward_dq_convert
    std::vector<api::PreparedKernel> kernels;  // in launch order

    const api::PreparedKernel& kernel(KernelKind kind) const {
        for (const auto& k : kernels)
            if (k.config.kind == kind) return k;
        user_error << "this AttentionBackward has no " << kernel_kind_name(kind) << " kernel; it runs "
                   << (fast ? "backward_stats, backward_fused and backward_dq_convert (CompileOptions.deterministic "
                              "is false)"
                            : "backward_dq and backward_dkdv")
                   << (spec.has_sinks() ? ", then backward_sink_grad" : " (and backward_sink_grad only for a spec "
                                                                        "with sinks)");
        return kernels.front();
    }
};

namespace {

// The fast sequence where it exists (its main loop is sm80: fp16 / bf16, head dims up to
// 128); the deterministic one otherwise.
bool use_fast_backward(const AttentionSpec& spec, const CompileOptions& options, const api::Target& target) {
    if (options.deterministic) return false;
    const KernelConfig c = default_config(KernelKind::backward_fused, codegen::elem_kind(spec.dtype()),
                                          spec.head_dim_qk(), spec.head_dim_v(), codegen::sm_version(target.arch));
    return c.mainloop == MainloopKind::sm80;
}

}  // namespace

AttentionBackward::AttentionBackward(const AttentionSpec& spec, const CompileOptions& options)
    : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    user_check(spec.returns_lse()) << "AttentionBackward needs the forward's LSE: build the spec with .return_lse() "
                                      "and use the same spec for the forward";
    impl_->spec = spec;
    const api::Target target = api::resolve_target(options);
    impl_->arch = target.arch;
    impl_->fast = use_fast_backward(spec, options, target);
    auto add = [&](KernelKind kind, const std::optional<TileConfig>& tile) {
        impl_->kernels.push_back(api::prepare_kernel(spec, impl_->inputs, kind, target, tile));
        debug(1) << "AttentionBackward: " << spec << " -> " << *impl_->kernels.back().compiled;
    };
    if (impl_->fast) {
        add(KernelKind::backward_stats, std::nullopt);  // per-row kernels: their own tile
        add(KernelKind::backward_fused, options.tile);
        add(KernelKind::backward_dq_convert, std::nullopt);
    } else {
        add(KernelKind::backward_dq, options.tile);  // first: it writes the per-row statistics
        add(KernelKind::backward_dkdv, options.tile);
    }
    // Attention sinks: their gradient, from LSE, O and dO alone (launched when asked for).
    if (spec.has_sinks()) add(KernelKind::backward_sink_grad, std::nullopt);
}

AttentionBackward::~AttentionBackward() = default;
AttentionBackward::AttentionBackward(AttentionBackward&&) noexcept = default;
AttentionBackward& AttentionBackward::operator=(AttentionBackward&&) noexcept = default;

void AttentionBackward::operator()(const LaunchArgs& fwd, const GradArgs& grads, Stream stream) const {
    check_launch_args(impl_->spec, impl_->inputs, fwd);
    check_grad_args(impl_->spec, fwd, grads);
    user_check(can_launch()) << "this AttentionBackward was compiled for " << impl_->arch
                             << " only (CompileOptions.arch, or no usable GPU at construction), so it cannot "
                                "launch; construct it without CompileOptions.arch where the GPU is";
    const auto &q = fwd.q.shape, &k = fwd.k.shape;
    // Attention sinks' gradient, when asked for: after the other kernels (it needs none of
    // them), and even with no batch or no rows (it writes zeros then).
    std::optional<SinkGradArgs> sinks = api::sink_grad_args(impl_->spec, fwd, grads);
    auto launch_sink_grad = [&] {
        if (!sinks || q[1] == 0) return;
        const api::PreparedKernel& kernel = impl_->kernel(KernelKind::backward_sink_grad);
        // Workspace, O(Hq * B * Nq / kSinkGradChunkRows): the chunks' sums.
        const runtime::StreamBuffer partials(api::sink_grad_partials_bytes(*sinks), static_cast<CUstream>(stream));
        sinks->partials = static_cast<float*>(partials.data());
        for (int phase : {0, 1}) {
            sinks->phase = phase;
            if (sinks->chunks > 0 || phase == 1)
                kernel.launch(api::sink_grad_grid(*sinks), api::sink_grad_params(kernel.layout, *sinks, fwd), stream);
        }
    };
    if (q[0] == 0 || q[1] == 0) {  // no batch or no heads: nothing else to write
        launch_sink_grad();
        return;
    }
    // Workspaces, O(N): the per-row statistics, and (fast) the fp32 dQ sums.
    const runtime::StreamBuffer stats(api::backward_stats_bytes(fwd), static_cast<CUstream>(stream));
    const runtime::StreamBuffer dq_accum(impl_->fast ? api::backward_dq_accum_bytes(fwd) : 0,
                                         static_cast<CUstream>(stream));
    const BackwardArgs block = api::backward_args(impl_->spec, fwd, grads, static_cast<float*>(stats.data()),
                                                  static_cast<float*>(dq_accum.data()));
    for (const api::PreparedKernel& kernel : impl_->kernels) {
        if (kernel.config.kind == KernelKind::backward_sink_grad) continue;  // below
        // Kernels over query rows have nothing to do when Nq == 0; dK and dV are written
        // (zeros) even then.
        if ((owns_keys(kernel.config.kind) ? k[2] : q[2]) == 0) continue;
        kernel.launch(api::backward_grid(kernel.config, fwd), api::backward_params(kernel.layout, block, fwd),
                      stream);
    }
    launch_sink_grad();
}

const AttentionSpec& AttentionBackward::spec() const { return impl_->spec; }
const KernelConfig& AttentionBackward::config(KernelKind kind) const { return impl_->kernel(kind).config; }
codegen::KernelSource AttentionBackward::source(KernelKind kind) const {
    return impl_->kernel(kind).source(impl_->spec, impl_->inputs);
}
bool AttentionBackward::can_launch() const {
    for (const auto& k : impl_->kernels)
        if (!k.loaded) return false;
    return true;
}
double AttentionBackward::compile_seconds() const {
    double s = 0;
    for (const auto& k : impl_->kernels) s += k.compile_seconds;
    return s;
}
bool AttentionBackward::deterministic() const { return !impl_->fast; }

}  // namespace attnjit
