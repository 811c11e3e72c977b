#include "api/attention.h"

#include <mutex>

#include "api/forward_launch.h"
#include "api/prepared_kernel.h"
#include "codegen/kernel_config.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

struct Attention::Impl {
    AttentionSpec spec;  // validated
    SpecInputs inputs;   // spec_inputs(spec): checked at every launch, never re-derived
    std::string arch;
    api::PreparedKernel kernel;
    mutable std::once_flag source_once;  // source() may be called from several threads
    mutable std::optional<codegen::KernelSource> source;  // generated on demand
};

Attention::Attention(const AttentionSpec& spec, const CompileOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    impl_->spec = spec;
    const api::Target target = api::resolve_target(options);
    impl_->arch = target.arch;
    impl_->kernel = api::prepare_kernel(spec, impl_->inputs, KernelKind::forward, target, options.tile);
    debug(1) << "Attention ready: " << spec << " -> " << *impl_->kernel.compiled;
}

Attention::~Attention() = default;
Attention::Attention(Attention&&) noexcept = default;
Attention& Attention::operator=(Attention&&) noexcept = default;

void Attention::operator()(const LaunchArgs& args, Stream stream) const {
    check_launch_args(impl_->spec, impl_->inputs, args);
    const api::PreparedKernel& k = impl_->kernel;
    user_check(k.loaded) << "this Attention was compiled for " << impl_->arch
                         << " only (CompileOptions.arch, or no usable GPU at construction), so it cannot "
                            "launch; construct it without CompileOptions.arch where the GPU is";
    if (args.q.shape[0] == 0 || args.q.shape[2] == 0) return;  // empty problem: nothing to do
    k.launch(api::forward_grid(k.config, args), api::forward_params(k.layout, impl_->spec, args), stream);
}

const AttentionSpec& Attention::spec() const { return impl_->spec; }

const codegen::KernelSource& Attention::source() const {
    std::call_once(impl_->source_once, [this] { impl_->source = impl_->kernel.source(impl_->spec, impl_->inputs); });
    return *impl_->source;
}

const std::string& Attention::arch() const { return impl_->arch; }
double Attention::compile_seconds() const { return impl_->kernel.compile_seconds; }
bool Attention::can_launch() const { return impl_->kernel.loaded != nullptr; }
const TileConfig& Attention::tile() const { return impl_->kernel.config.tile; }
const KernelConfig& Attention::config() const { return impl_->kernel.config; }

std::ostream& operator<<(std::ostream& os, const Attention& a) {
    return os << "Attention(" << a.spec() << ", " << a.config() << ", " << a.arch()
              << (a.can_launch() ? ", loaded" : ", compiled only") << ")";
}

}  // namespace attnjit
