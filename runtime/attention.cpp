#include "runtime/attention.h"

#include <chrono>
#include <mutex>
#include <sstream>

#include "codegen/generate.h"
#include "codegen/params_layout.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime/launcher.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

struct Attention::Impl {
    AttentionSpec spec;  // validated
    SpecInputs inputs;   // spec_inputs(spec): checked at every launch, never re-derived
    TileConfig tile{};
    std::string arch;
    codegen::ParamsLayout layout;
    std::shared_ptr<const runtime::CompiledKernel> compiled;
    std::shared_ptr<const runtime::LoadedKernel> loaded;  // null when compiled without a GPU
    mutable std::once_flag source_once;  // source() may be called from several threads
    mutable std::optional<codegen::KernelSource> source;  // generated on demand
    double compile_seconds = 0;

    codegen::KernelSource make_source() const { return codegen::generate_forward(spec, tile); }
};

namespace {

ElemKind elem_kind(DType d) {
    switch (d) {
    case DType::f16: return ElemKind::f16;
    case DType::bf16: return ElemKind::bf16;
    default: return ElemKind::f32;
    }
}

// Unique per generated kernel and architecture, and cheap: no source is generated to
// compute it. It is the spec's full printed form plus the types of its inputs (the
// printer leaves those out), not a hash, so two specs can never share a kernel.
std::string fast_key(const AttentionSpec& spec, const SpecInputs& in, const TileConfig& t, const std::string& arch) {
    std::ostringstream s;
    s << spec << "|";
    for (const auto& [name, info] : in.tensors) s << name << ":" << dtype_name(info.dtype) << info.rank << ",";
    for (const auto& [name, type] : in.scalars) s << name << ":" << dsl::type_name(type) << ",";
    s << "|" << t.block_m << "x" << t.block_n << "w" << t.warps << "s" << t.stages << "|" << arch << "|g"
      << codegen::kGeneratorVersion;
    return s.str();
}

}  // namespace

Attention::Attention(const AttentionSpec& spec, const CompileOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    impl_->spec = spec;
    const ElemKind e = elem_kind(spec.dtype());
    impl_->tile = options.tile ? *options.tile : default_forward_tile(e, spec.head_dim_qk(), spec.head_dim_v());
    if (const char* why = why_tile_invalid(e, spec.head_dim_qk(), spec.head_dim_v(), impl_->tile)) {
        const TileConfig& t = impl_->tile;
        user_error << "CompileOptions.tile {block_m " << t.block_m << ", block_n " << t.block_n << ", warps "
                   << t.warps << ", stages " << t.stages << "} is invalid for " << dtype_name(spec.dtype())
                   << " head dims " << spec.head_dim_qk() << "x" << spec.head_dim_v() << ": " << why
                   << "; leave CompileOptions.tile empty to use the default";
    }
    auto no_gpu = runtime::why_no_gpu();
    const bool on_device = !no_gpu && (!options.arch || *options.arch == runtime::current_device().arch());
    if (options.arch) {
        impl_->arch = *options.arch;
    } else {
        user_check(!no_gpu) << "no GPU is usable (" << *no_gpu
                            << "); to compile without one, pass CompileOptions{.arch = \"sm_90a\"} (or another arch)";
        impl_->arch = runtime::current_device().arch();
    }
    impl_->layout = codegen::params_layout(spec);

    auto& cache = runtime::KernelCache::global();
    const std::string key = fast_key(spec, impl_->inputs, impl_->tile, impl_->arch);
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
    const auto params = runtime::pack_params(impl_->layout, impl_->spec, args);
    const auto& c = impl_->loaded->compiled();
    impl_->loaded->launch(runtime::forward_grid(impl_->tile, args),
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
const TileConfig& Attention::tile() const { return impl_->tile; }

std::ostream& operator<<(std::ostream& os, const Attention& a) {
    const TileConfig& t = a.tile();
    return os << "Attention(" << a.spec() << ", tile " << t.block_m << "x" << t.block_n << " w" << t.warps << " s"
              << t.stages << ", " << a.arch() << (a.can_launch() ? ", loaded" : ", compiled only") << ")";
}

}  // namespace attnjit
