// Kernels compiled ahead of time (tools/attnjit-aot, docs/aot.md), which a process runs
// without NVRTC: a bundle directory opened at run time (load_bundle), or the same bytes
// linked into the program (the CMake function attnjit_add_kernel_bundle). KernelCache looks
// in the registered bundles after memory and before the disk cache, by
// toolchain_index_key(source, arch): the kernel's identity without the compiler, which a
// process computes without loading NVRTC. An entry is used only when it is intact and is the
// kernel the source asks for (entry_check.h), as a disk entry is.
//
//   <bundle>/manifest.json                 BundleManifest (to_json below)
//   <bundle>/kernels/<index key>.kernel    serialize(CompiledKernel) (compiled_kernel.h)
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_source.h"
#include "runtime/compiled_kernel.h"
#include "runtime/tuning_db.h"

namespace attnjit::runtime {

inline constexpr const char* kBundleFormat = "attnjit.bundle/1";

struct BundleKernel {
    std::string index_key;  // toolchain_index_key(source, arch): what a lookup asks for
    std::string name;       // KernelSource::name
    std::string arch;       // "sm_80", "sm_90a", ...
    std::string config;     // the KernelConfig as printed, for people
    std::string spec;       // where its spec came from (a file name), for people; may be empty
};

// A tuned configuration the bundle carries (attnjit-aot --tuning): what the autotuner chose for
// one shape bucket of one forward on one GPU, so that a process with autotuning on takes it
// (and its kernel) from the bundle, without NVRTC and without timing. Matched by every field of
// the tuning key but the toolchain: a bundle's kernels are compiled by attnjit-aot's NVRTC,
// whatever compiled the ones that were timed (key.toolchain says which, for people).
struct BundleTuning {
    TuningKey key;
    std::string bucket;
    TuningResult result;
};

struct BundleManifest {
    std::string attnjit_version;  // of the attnjit-aot that wrote it
    int generator_version = 0;    // codegen::kGeneratorVersion
    std::string templates_hash;   // codegen::templates_hash()
    int entry_format = 0;         // kCompiledKernelFormatVersion of its entries
    std::string toolchain;        // the NVRTC that compiled them (nvrtc_toolchain_id())
    std::vector<BundleKernel> kernels;
    std::vector<BundleTuning> tuning;  // absent from a manifest written without --tuning
};

// The manifest's JSON text (two-space indent, a newline at the end).
std::string to_json(const BundleManifest& manifest);
// UserError naming `where` for a document that is not a bundle manifest of kBundleFormat.
BundleManifest bundle_manifest_from_json(const std::string& text, const std::string& where);
// The manifest of this library's generator and entry format (no kernels, no toolchain).
BundleManifest current_bundle_manifest();
// "" when this library asks for kernels the manifest can hold (the same generator version,
// templates and entry format); else why not, and what to do.
std::string why_bundle_is_stale(const BundleManifest& manifest);

class KernelBundle {
public:
    // Opens a bundle directory: its manifest is read and checked (UserError: no manifest, not
    // a bundle, another format, made by another attnjit); entries are read when asked for.
    static std::shared_ptr<const KernelBundle> open(const std::string& directory);
    // A bundle linked into the program: the manifest's text and its entries' bytes in the
    // manifest's order, kept alive by the program (static storage). UserError as open().
    static std::shared_ptr<const KernelBundle> linked(const std::string& name, std::string_view manifest,
                                                      const std::vector<std::string_view>& entries);

    const std::string& name() const { return name_; }  // the directory, or the linked name
    const BundleManifest& manifest() const { return manifest_; }
    // The kernel stored under `index_key`: null when the bundle has none, or (with `why_not`
    // saying so) when its entry is missing, damaged or of another format.
    std::optional<CompiledKernel> find(const std::string& index_key, std::string* why_not) const;

private:
    KernelBundle() = default;
    std::string name_;
    std::string directory_;                 // empty for a linked bundle
    BundleManifest manifest_;
    std::vector<std::string_view> linked_;  // a linked bundle's entries, in manifest order
};

// The bundles of this process, searched in the order they were added.
class BundleRegistry {
public:
    static BundleRegistry& global();  // never destroyed, like KernelCache::global()

    void add(std::shared_ptr<const KernelBundle> bundle);
    // A linked bundle that could not be used (stale, damaged): said once on stderr and in
    // the message of a kernel nothing provides (describe()).
    void add_problem(const std::string& problem);

    struct Hit {
        CompiledKernel kernel;
        std::string bundle;  // its name
    };
    // The first bundle's entry for `source` on `arch` (index_key: toolchain_index_key of
    // both) that is intact and matches it; an unusable entry is said once on stderr and
    // skipped.
    std::optional<Hit> find(const std::string& index_key, const codegen::KernelSource& source,
                            const std::string& arch) const;
    // The first bundle's tuned choice for `key`'s forward in `bucket`, matched on every field of
    // the key but the toolchain (BundleTuning); nullopt when no bundle has one.
    std::optional<TuningResult> find_tuning(const TuningKey& key, const std::string& bucket) const;
    // For messages: the bundles and their architectures, and the problems; "" when none.
    std::string describe() const;
    size_t size() const;
    void clear();  // tests

private:
    mutable std::mutex mu_;
    std::vector<std::shared_ptr<const KernelBundle>> bundles_;
    std::vector<std::string> problems_;
    mutable std::vector<std::string> warned_;  // entries already said to be unusable
};

// Writes a bundle directory (what attnjit-aot does): `kernels[i]` is `manifest.kernels[i]`'s
// entry. Creates the directory and kernels/ where missing; each file is written whole or not
// at all. EnvironmentError naming the path when a write fails.
void write_bundle(const std::string& directory, const BundleManifest& manifest,
                  const std::vector<CompiledKernel>& kernels);

// Opens a bundle directory and adds it to the global registry (UserError as
// KernelBundle::open). Returns the number of kernels it holds.
size_t load_bundle(const std::string& directory);

// What the source that attnjit_add_kernel_bundle generates calls at static initialisation:
// adds a linked bundle to the global registry. Never throws: a bundle that cannot be used
// goes to add_problem.
void register_linked_bundle(const char* name, const char* manifest, size_t manifest_size,
                            const unsigned char* const* entries, const size_t* entry_sizes, size_t count) noexcept;

}  // namespace attnjit::runtime
