#include "api/attention_backward.h"

#include "api/backward_launch.h"
#include "api/prepared_kernel.h"
#include "codegen/kernel_config.h"
#include "runtime/stream_buffer.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

struct AttentionBackward::Impl {
    AttentionSpec spec;  // validated, returns LSE
    SpecInputs inputs;   // spec_inputs(spec)
    std::string arch;
    api::PreparedKernel dkdv, dq;

    const api::PreparedKernel& kernel(KernelKind kind) const {
        user_check(kind == KernelKind::backward_dkdv || kind == KernelKind::backward_dq)
            << "AttentionBackward has backward_dkdv and backward_dq kernels, not " << kernel_kind_name(kind);
        return kind == KernelKind::backward_dkdv ? dkdv : dq;
    }
};

AttentionBackward::AttentionBackward(const AttentionSpec& spec, const CompileOptions& options)
    : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    user_check(spec.returns_lse()) << "AttentionBackward needs the forward's LSE: build the spec with .return_lse() "
                                      "and use the same spec for the forward";
    impl_->spec = spec;
    const api::Target target = api::resolve_target(options);
    impl_->arch = target.arch;
    impl_->dkdv = api::prepare_kernel(spec, impl_->inputs, KernelKind::backward_dkdv, target, options.tile);
    impl_->dq = api::prepare_kernel(spec, impl_->inputs, KernelKind::backward_dq, target, options.tile);
    debug(1) << "AttentionBackward ready: " << spec << " -> " << *impl_->dkdv.compiled << ", " << *impl_->dq.compiled;
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
    if (q[0] == 0 || q[1] == 0) return;  // no batch or no heads: nothing to write
    // The per-row statistics backward_dq writes and backward_dkdv reads (O(N) memory).
    const runtime::StreamBuffer stats(api::backward_stats_bytes(fwd), static_cast<CUstream>(stream));
    const BackwardArgs block = api::backward_args(impl_->spec, fwd, grads, static_cast<float*>(stats.data()));
    // dQ first: it writes the statistics. dK and dV are written even when Nq == 0 (zeros).
    if (q[2] > 0) {
        const api::PreparedKernel& dq = impl_->dq;
        dq.launch(api::backward_grid(dq.config, fwd), api::backward_params(dq.layout, block, fwd), stream);
    }
    if (k[2] > 0) {
        const api::PreparedKernel& dkdv = impl_->dkdv;
        dkdv.launch(api::backward_grid(dkdv.config, fwd), api::backward_params(dkdv.layout, block, fwd), stream);
    }
}

const AttentionSpec& AttentionBackward::spec() const { return impl_->spec; }
const KernelConfig& AttentionBackward::config(KernelKind kind) const { return impl_->kernel(kind).config; }
codegen::KernelSource AttentionBackward::source(KernelKind kind) const {
    return impl_->kernel(kind).source(impl_->spec, impl_->inputs);
}
bool AttentionBackward::can_launch() const { return impl_->dkdv.loaded && impl_->dq.loaded; }
double AttentionBackward::compile_seconds() const {
    return impl_->dkdv.compile_seconds + impl_->dq.compile_seconds;
}

}  // namespace attnjit
