#include "api/prepared_kernel.h"

#include <chrono>
#include <sstream>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "support/error.h"

namespace attnjit::api {
namespace {

// Unique per generated kernel and architecture, and cheap: no source is generated to
// compute it. It is the spec's full printed form plus the types of its inputs (the
// printer leaves those out), not a hash, so two specs can never share a kernel.
std::string fast_key(const AttentionSpec& spec, const codegen::SpecInputs& in, const KernelConfig& c,
                     const std::string& arch, const std::set<std::string>& grads) {
    std::ostringstream s;
    s << spec << "|";
    for (const auto& [name, info] : in.tensors) s << name << ":" << dtype_name(info.dtype) << info.rank << ",";
    for (const auto& [name, type] : in.scalars) s << name << ":" << dsl::type_name(type) << ",";
    s << "|" << codegen::config_id(c) << "|" << arch << "|g" << codegen::kGeneratorVersion;
    if (!grads.empty()) {
        s << "|grads:";
        for (const auto& g : grads) s << g << ",";
    }
    return s.str();
}

}  // namespace

Target resolve_target(const CompileOptions& options) {
    auto no_gpu = runtime::why_no_gpu();
    Target t;
    t.on_device = !no_gpu && (!options.arch || *options.arch == runtime::current_device().arch());
    if (options.arch) {
        runtime::check_arch(*options.arch);  // one this NVRTC can target (EnvironmentError otherwise)
        t.arch = *options.arch;
    } else {
        user_check(!no_gpu) << "no GPU is usable (" << *no_gpu
                            << "); to compile without one, pass CompileOptions{.arch = \"sm_90a\"} (or another arch)";
        t.arch = runtime::current_device().arch();
    }
    return t;
}

codegen::KernelSource PreparedKernel::source(const AttentionSpec& spec, const codegen::SpecInputs& inputs) const {
    return codegen::generate(codegen::lower(spec, inputs, config.kind, grads), config, compiled->arch);
}

void PreparedKernel::launch(runtime::Dim3 grid, const std::vector<unsigned char>& params, Stream stream,
                            const void* second) const {
    internal_check(loaded != nullptr) << "launch of a kernel compiled only; the facade checks can_launch first";
    internal_check(second != nullptr || config.mainloop != MainloopKind::sm90)
        << "launch of an sm90 kernel without its bulk-copy descriptors (api/tma_maps.h)";
    const auto& c = loaded->compiled();
    loaded->launch(grid, runtime::Dim3{static_cast<unsigned>(c.threads), 1, 1}, static_cast<unsigned>(c.smem_bytes),
                   params.data(), params.size(), static_cast<CUstream>(stream), second);
}

PreparedKernel prepare_kernel(const AttentionSpec& spec, const codegen::SpecInputs& inputs, KernelKind kind,
                              const Target& target, const std::optional<TileConfig>& tile,
                              const std::set<std::string>& grads, const std::optional<MainloopKind>& mainloop) {
    PreparedKernel k;
    k.config = codegen::make_config(spec, kind, target.arch, tile, mainloop);
    std::optional<codegen::KernelPlan> plan;
    if ((kind == KernelKind::backward_dq || kind == KernelKind::backward_dkdv) && !grads.empty()) {
        plan = codegen::lower(spec, inputs, kind, grads);  // its gradient outputs shape the Params
        if (plan->grad_outputs.empty()) plan.reset();      // the kernel without gradients (dkdv, no planes)
        else k.grads = grads;
    }
    // The layout generate() declares in the kernel (one rule: codegen::plan_params_layout).
    k.layout = plan ? codegen::plan_params_layout(*plan, kind) : codegen::params_layout(inputs, kind);
    auto& cache = runtime::KernelCache::global();
    const std::string key = fast_key(spec, inputs, k.config, target.arch, k.grads);
    // The cache calls make() only when the kernel is not in memory: then this call
    // generated it and compiled it or read it from disk.
    bool generated = false;
    const auto start = std::chrono::steady_clock::now();
    auto make = [&] {
        generated = true;
        return codegen::generate(plan ? *plan : codegen::lower(spec, inputs, kind), k.config, target.arch);
    };
    if (target.on_device) {
        k.loaded = cache.get_loaded(key, make);
        k.compiled = std::shared_ptr<const runtime::CompiledKernel>(k.loaded, &k.loaded->compiled());
    } else {
        k.compiled = cache.get_compiled(key, make, target.arch);
    }
    if (generated) k.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return k;
}

}  // namespace attnjit::api
