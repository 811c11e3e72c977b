#include "api/aot.h"

#include <map>
#include <sstream>

#include "api/attention_backward.h"
#include "api/autotune.h"
#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "runtime/compiler.h"
#include "runtime/kernel_cache.h"

namespace attnjit::api {

namespace {

bool any_sm90(const AttentionBackward& b) {
    for (KernelKind kind : b.kernel_kinds())
        if (b.config(kind).mainloop == MainloopKind::sm90) return true;
    return false;
}

// The backward's options for `arch` as AotOptions ask (compile only).
CompileOptions backward_options(const std::string& arch, const AotOptions& options) {
    CompileOptions o;
    o.arch = arch;
    o.grads = options.grads;
    o.deterministic = options.deterministic;
    return o;
}

}  // namespace

std::string compile_for_bundle(const AttentionSpec& spec, const std::string& arch, const AotOptions& options) {
    CompileOptions base;
    base.arch = arch;
    std::ostringstream what;
    if (options.forward) {
        const Attention forward(spec, base);
        what << "forward " << mainloop_kind_name(forward.config().mainloop);
        if (forward.config().mainloop == MainloopKind::sm90) {  // and its fallback for unreadable tensors
            CompileOptions sm80 = base;
            sm80.mainloop = MainloopKind::sm80;
            const Attention fallback(spec, sm80);
            what << " + sm80";
        }
    }
    if (options.backward.value_or(spec.returns_lse())) {
        CompileOptions o = backward_options(arch, options);
        const AttentionBackward backward(spec, o);
        what << (options.forward ? ", " : "") << "backward";
        for (KernelKind kind : backward.kernel_kinds()) what << " " << kernel_kind_name(kind);
        if (any_sm90(backward)) {
            o.mainloop = MainloopKind::sm80;
            const AttentionBackward fallback(spec, o);
            what << " (sm90, + sm80)";
        }
    }
    return what.str();
}

namespace {

// The choices among `entries` recorded under `want`'s key (whatever the GPU and compiler) over
// `candidates`: one a (GPU, bucket), the one timed with `toolchain` where there are several.
std::vector<runtime::BundleTuning> choices_for(const runtime::TuningKey& want,
                                               const std::vector<KernelConfig>& candidates,
                                               const std::vector<runtime::TuningDb::Entry>& entries,
                                               const std::string& toolchain) {
    std::map<std::pair<std::string, std::string>, runtime::BundleTuning> chosen;  // (GPU, bucket) -> choice
    for (const runtime::TuningDb::Entry& e : entries) {
        const runtime::TuningKey& k = e.key;
        if (!k.same_but_gpu_and_compiler(want)) continue;  // another spec or arch, or another candidate list
        for (const auto& [bucket, result] : e.buckets) {
            if (!candidate_named(candidates, result)) continue;  // not a configuration the process would take
            auto [it, added] = chosen.try_emplace({k.device, bucket}, runtime::BundleTuning{k, bucket, result});
            if (!added && k.toolchain == toolchain) it->second = runtime::BundleTuning{k, bucket, result};
        }
    }
    std::vector<runtime::BundleTuning> out;
    for (auto& [where, t] : chosen) out.push_back(std::move(t));
    return out;
}

}  // namespace

std::vector<runtime::BundleTuning> compile_tuned_for_bundle(const AttentionSpec& spec, const std::string& arch,
                                                            const std::vector<runtime::TuningDb::Entry>& entries,
                                                            const std::string& toolchain, const AotOptions& options) {
    std::vector<runtime::BundleTuning> out;
    if (options.forward) {
        const std::vector<KernelConfig> candidates = forward_candidates(spec, arch);
        for (runtime::BundleTuning& t :
             choices_for(forward_tuning_key(spec, "", arch, "", candidates), candidates, entries, toolchain)) {
            CompileOptions tuned;
            tuned.arch = arch;
            tuned.tile = t.result.tile;
            tuned.mainloop = t.result.mainloop;
            const Attention forward(spec, tuned);  // into the cache, as the process will look it up
            out.push_back(std::move(t));
        }
    }
    if (options.backward.value_or(spec.returns_lse()) && !spec.has_latent()) {
        const CompileOptions base = backward_options(arch, options);
        const AttentionBackward defaults(spec, base);
        const KernelKind keys = defaults.key_kind();
        const std::vector<KernelConfig> candidates = backward_candidates(spec, defaults.config(keys), arch);
        for (runtime::BundleTuning& t :
             choices_for(tuning_key(spec, tuning_kind(keys, defaults.deterministic()), "", arch, "", candidates),
                         candidates, entries, toolchain)) {
            CompileOptions tuned = base;
            tuned.tile = t.result.tile;
            tuned.mainloop = t.result.mainloop;
            const AttentionBackward backward(spec, tuned);  // as BackwardTuner builds it
            out.push_back(std::move(t));
        }
    }
    return out;
}

runtime::BundleManifest write_bundle_of_compiled(const std::string& directory,
                                                 const std::vector<std::pair<AttentionSpec, std::string>>& spec_files,
                                                 std::vector<runtime::BundleTuning> tuning) {
    std::map<std::string, std::string> file_of;  // hash tag -> file
    for (const auto& [spec, file] : spec_files) file_of[codegen::kernel_name_tag(spec)] = file;
    runtime::KernelCache& cache = runtime::KernelCache::global();
    runtime::BundleManifest manifest = runtime::current_bundle_manifest();
    manifest.toolchain = cache.toolchain();
    manifest.tuning = std::move(tuning);
    std::vector<runtime::CompiledKernel> entries;
    for (const auto& [index_key, kernel] : cache.compiled_kernels()) {
        runtime::BundleKernel k;
        k.index_key = index_key;
        k.name = kernel->name;
        k.arch = kernel->arch;
        std::ostringstream config;
        config << kernel->config;
        k.config = config.str();
        // The spec file, by the tag at the end of the kernel's name. For people only: sources
        // that differ in name alone share an entry, named after whichever compiled first.
        const size_t tail = k.name.rfind('_');
        if (tail != std::string::npos)
            if (auto it = file_of.find(k.name.substr(tail + 1)); it != file_of.end()) k.spec = it->second;
        manifest.kernels.push_back(std::move(k));
        entries.push_back(*kernel);
    }
    runtime::write_bundle(directory, manifest, entries);
    return manifest;
}

}  // namespace attnjit::api
