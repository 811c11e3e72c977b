#include "api/prepared_kernel.h"

#include <memory>
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
        // A well-formed arch; whether this NVRTC targets it is compile_kernel's check, on a
        // miss: a kernel from a bundle (runtime/kernel_bundle.h) needs no NVRTC at all.
        codegen::sm_version(*options.arch);
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
    return std::move(prepare_kernels(spec, inputs, target, {KernelRequest{kind, tile, grads, mainloop}}).front());
}

std::vector<PreparedKernel> prepare_kernels(const AttentionSpec& spec, const codegen::SpecInputs& inputs,
                                            const Target& target, const std::vector<KernelRequest>& requests) {
    const size_t n = requests.size();
    std::vector<PreparedKernel> kernels(n);
    std::vector<std::optional<codegen::KernelPlan>> plans(n);
    // The cache calls make_source only for a kernel not in memory: then this call generated
    // it and took it from a bundle, read it from disk or compiled it. One flag a kernel (each
    // its own thread's).
    std::unique_ptr<bool[]> generated(new bool[n]());
    std::vector<runtime::KernelCache::Request> cache_requests;
    for (size_t i = 0; i < n; ++i) {
        const KernelRequest& r = requests[i];
        PreparedKernel& k = kernels[i];
        k.config = codegen::make_config(spec, r.kind, target.arch, r.tile, r.mainloop);
        if ((r.kind == KernelKind::backward_dq || r.kind == KernelKind::backward_dkdv) && !r.grads.empty()) {
            plans[i] = codegen::lower(spec, inputs, r.kind, r.grads);  // its gradient outputs shape the Params
            if (plans[i]->grad_outputs.empty()) plans[i].reset();      // the kernel without gradients (dkdv, no planes)
            else k.grads = r.grads;
        }
        // The layout generate() declares in the kernel (one rule: codegen::plan_params_layout).
        k.layout = plans[i] ? codegen::plan_params_layout(*plans[i], r.kind) : codegen::params_layout(inputs, r.kind);
        cache_requests.push_back({fast_key(spec, inputs, k.config, target.arch, k.grads), [&, i] {
                                      generated[i] = true;
                                      return codegen::generate(
                                          plans[i] ? *plans[i] : codegen::lower(spec, inputs, requests[i].kind),
                                          kernels[i].config, target.arch);
                                  }});
    }
    auto& cache = runtime::KernelCache::global();
    std::vector<double> seconds;
    if (target.on_device) {
        const auto loaded = cache.get_loaded(cache_requests, &seconds);
        for (size_t i = 0; i < n; ++i) {
            kernels[i].loaded = loaded[i];
            kernels[i].compiled = std::shared_ptr<const runtime::CompiledKernel>(loaded[i], &loaded[i]->compiled());
        }
    } else {
        const auto compiled = cache.get_compiled(cache_requests, target.arch, &seconds);
        for (size_t i = 0; i < n; ++i) kernels[i].compiled = compiled[i];
    }
    for (size_t i = 0; i < n; ++i)
        if (generated[i]) kernels[i].compile_seconds = seconds[i];
    return kernels;
}

}  // namespace attnjit::api
