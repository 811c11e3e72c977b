#include "api/attention.h"

#include <chrono>
#include <mutex>
#include <sstream>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "codegen/params_layout.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "api/forward_launch.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

struct Attention::Impl {
    AttentionSpec spec;  // validated
    SpecInputs inputs;   // spec_inputs(spec): checked at every launch, never re-derived
    KernelConfig config{};  // what kernel, for `arch`
    std::string arch;
    codegen::ParamsLayout layout;
    std::shared_ptr<const runtime::CompiledKernel> compiled;
    std::shared_ptr<const runtime::LoadedKernel> loaded;  // null when compiled without a GPU
    mutable std::once_flag source_once;  // source() may be called from several threads
    mutable std::optional<codegen::KernelSource> source;  // generated on demand
    double compile_seconds = 0;

    // From the inputs collected at construction: the spec is not validated or analysed again.
    codegen::KernelSource make_source() const { return codegen::generate(codegen::lower(spec, inputs), config, arch); }
};

namespace {

// Unique per generated kernel and architecture, and cheap: no source is generated to
// compute it. It is the spec's full printed form plus the types of its inputs (the
// printer leaves those out), not a hash, so two specs can never share a kernel.
std::string fast_key(const AttentionSpec& spec, const SpecInputs& in, const KernelConfig& c, const std::string& arch) {
    std::ostringstream s;
    s << spec << "|";
    for (const auto& [name, info] : in.tensors) s << name << ":" << dtype_name(info.dtype) << info.rank << ",";
    for (const auto& [name, type] : in.scalars) s << name << ":" << dsl::type_name(type) << ",";
    s << "|" << codegen::config_id(c) << "|" << arch << "|g"
      << codegen::kGeneratorVersion;
    return s.str();
}

}  // namespace

Attention::Attention(const AttentionSpec& spec, const CompileOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    impl_->spec = spec;
    auto no_gpu = runtime::why_no_gpu();
    const bool on_device = !no_gpu && (!options.arch || *options.arch == runtime::current_device().arch());
    if (options.arch) {
        runtime::check_arch(*options.arch);  // one this NVRTC can target (EnvironmentError otherwise)
        impl_->arch = *options.arch;
    } else {
        user_check(!no_gpu) << "no GPU is usable (" << *no_gpu
                            << "); to compile without one, pass CompileOptions{.arch = \"sm_90a\"} (or another arch)";
        impl_->arch = runtime::current_device().arch();
    }
    impl_->config = codegen::make_config(spec, KernelKind::forward, impl_->arch, options.tile);
    impl_->layout = codegen::params_layout(impl_->inputs, impl_->config.kind);

    auto& cache = runtime::KernelCache::global();
    const std::string key = fast_key(spec, impl_->inputs, impl_->config, impl_->arch);
    // The cache calls make() only when the kernel is not in memory: then this
    // constructor generated it and compiled it or read it from disk.
    bool generated = false;
    const auto start = std::chrono::steady_clock::now();
    auto make = [this, &generated] {
        generated = true;
        return impl_->make_source();
    };
    if (on_device) {
        impl_->loaded = cache.get_loaded(key, make);
        impl_->compiled = std::shared_ptr<const runtime::CompiledKernel>(impl_->loaded, &impl_->loaded->compiled());
    } else {
        impl_->compiled = cache.get_compiled(key, make, impl_->arch);
    }
    if (generated)
        impl_->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    debug(1) << "Attention ready: " << spec << " -> " << *impl_->compiled;
}

Attention::~Attention() = default;
Attention::Attention(Attention&&) noexcept = default;
Attention& Attention::operator=(Attention&&) noexcept = default;

void Attention::operator()(const LaunchArgs& args, Stream stream) const {
    check_launch_args(impl_->spec, impl_->inputs, args);
    user_check(impl_->loaded) << "this Attention was compiled for " << impl_->arch
                              << " only (CompileOptions.arch, or no usable GPU at construction), so it cannot "
                                 "launch; construct it without CompileOptions.arch where the GPU is";
    if (args.q.shape[0] == 0 || args.q.shape[2] == 0) return;  // empty problem: nothing to do
    const auto params = api::forward_params(impl_->layout, impl_->spec, args);
    const auto& c = impl_->loaded->compiled();
    impl_->loaded->launch(api::forward_grid(impl_->config, args),
                          runtime::Dim3{static_cast<unsigned>(c.threads), 1, 1}, static_cast<unsigned>(c.smem_bytes),
                          params.data(), params.size(), static_cast<CUstream>(stream));
}

const AttentionSpec& Attention::spec() const { return impl_->spec; }

const codegen::KernelSource& Attention::source() const {
    std::call_once(impl_->source_once, [this] { impl_->source = impl_->make_source(); });
    return *impl_->source;
}

const std::string& Attention::arch() const { return impl_->arch; }
double Attention::compile_seconds() const { return impl_->compile_seconds; }
bool Attention::can_launch() const { return impl_->loaded != nullptr; }
const TileConfig& Attention::tile() const { return impl_->config.tile; }
const KernelConfig& Attention::config() const { return impl_->config; }

std::ostream& operator<<(std::ostream& os, const Attention& a) {
    return os << "Attention(" << a.spec() << ", " << a.config() << ", " << a.arch()
              << (a.can_launch() ? ", loaded" : ", compiled only") << ")";
}

}  // namespace attnjit
