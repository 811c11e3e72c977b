// Ahead of time (tools/attnjit-aot, docs/aot.md): every kernel a deployment of a spec runs on an
// arch, compiled through the JIT path itself (Attention and AttentionBackward with
// CompileOptions.arch), so that a bundle holds exactly the kernels a process would otherwise
// generate and compile, under the keys it looks them up by (runtime/kernel_bundle.h).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/attention.h"
#include "runtime/kernel_bundle.h"

namespace attnjit::api {

struct AotOptions {
    bool forward = true;
    // The backward's kernels; unset: when the spec returns its LSE (which a backward needs).
    std::optional<bool> backward;
    std::set<std::string> grads;  // the backward's CompileOptions.grads
    bool deterministic = true;    // the backward's CompileOptions.deterministic
};

// Compiles, into runtime::KernelCache::global(), the kernels of `spec` on `arch`: the forward
// and (AotOptions.backward) the backward with their default configurations, and where those
// run on the sm90 loop also the sm80 ones that calls whose tensors the bulk copies cannot read
// fall back to. Returns a line for people ("forward sm90 ..., backward ..."). UserError for a
// spec or arch that cannot be compiled (as Attention says).
std::string compile_for_bundle(const AttentionSpec& spec, const std::string& arch, const AotOptions& options);

// The autotuner's choices for `spec` on `arch` among `entries` (a tuning database's,
// attnjit-aot --tuning), for the forward and the backward as `options` ask for them: every GPU
// of that arch and every shape bucket tuned over today's candidates by this generator, whatever
// compiler built the timed kernels (one choice a GPU and bucket: the one timed with `toolchain`,
// attnjit-aot's own compiler, where there are several). A choice that is not among today's
// candidates is left out. Compiles each chosen configuration's kernels into
// runtime::KernelCache::global() (as compile_for_bundle does the defaults) and returns the
// choices for the bundle's manifest.
std::vector<runtime::BundleTuning> compile_tuned_for_bundle(const AttentionSpec& spec, const std::string& arch,
                                                            const std::vector<runtime::TuningDb::Entry>& entries,
                                                            const std::string& toolchain,
                                                            const AotOptions& options = {});

// The bundle of every kernel runtime::KernelCache::global() holds (what compile_for_bundle
// compiled), written to `directory` (runtime::write_bundle), with `tuning` (the tuned choices
// it carries). `spec_files` names, by spec hash, the file each spec came from (the manifest's
// `spec` of its kernels). Returns its manifest.
runtime::BundleManifest write_bundle_of_compiled(const std::string& directory,
                                                 const std::vector<std::pair<AttentionSpec, std::string>>& spec_files,
                                                 std::vector<runtime::BundleTuning> tuning = {});

}  // namespace attnjit::api
