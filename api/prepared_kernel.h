// One generated kernel of a spec, compiled (and loaded when its target is this process's
// GPU): what each facade holds per kernel kind. The target, the memory and disk caches and
// the key that finds a kernel without generating it are decided here once for every kind.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/attention.h"
#include "codegen/params_layout.h"
#include "codegen/spec_inputs.h"
#include "runtime/compiled_kernel.h"
#include "runtime/loaded_kernel.h"

namespace attnjit::api {

// Where kernels are compiled for: CompileOptions.arch, else the current GPU's arch (a
// UserError without a usable GPU). on_device: kernels are also loaded to launch.
struct Target {
    std::string arch;
    bool on_device = false;
};
Target resolve_target(const CompileOptions& options);

struct PreparedKernel {
    KernelConfig config{};
    codegen::ParamsLayout layout;
    std::shared_ptr<const runtime::CompiledKernel> compiled;
    std::shared_ptr<const runtime::LoadedKernel> loaded;  // null when compiled only
    double compile_seconds = 0;  // spent generating and compiling (or reading the disk cache); 0 from memory
    std::set<std::string> grads;  // backward_dq, backward_dkdv: the gradients of captured tensors and scalars it has outputs for

    // Launches the loaded kernel with its block size and shared memory; `second`: the sm90
    // forward's second parameter (api/tma_maps.h), null for every other kernel.
    void launch(runtime::Dim3 grid, const std::vector<unsigned char>& params, Stream stream,
                const void* second = nullptr) const;

    // The generated source, again (for inspection): from `inputs`, not validated again.
    codegen::KernelSource source(const AttentionSpec& spec, const codegen::SpecInputs& inputs) const;
};

// `inputs` = spec_inputs(spec). tile: CompileOptions.tile, else default_tile() for the kind.
// grads: the captured tensors and scalars whose gradients the backward computes
// (codegen/input_grads.h): backward_dq computes them, backward_dkdv sums the planes of
// elementwise ones (where there are none its kernel is the one without gradients); ignored
// by other kinds.
// mainloop: CompileOptions.mainloop (codegen::make_config).
PreparedKernel prepare_kernel(const AttentionSpec& spec, const codegen::SpecInputs& inputs, KernelKind kind,
                              const Target& target, const std::optional<TileConfig>& tile,
                              const std::set<std::string>& grads = {},
                              const std::optional<MainloopKind>& mainloop = std::nullopt);

// One kernel for prepare_kernels: prepare_kernel's arguments after `target`.
struct KernelRequest {
    KernelKind kind;
    std::optional<TileConfig> tile;
    std::set<std::string> grads = {};
    std::optional<MainloopKind> mainloop = std::nullopt;
};

// prepare_kernel of each request, their generation and compiles at once, each on a thread
// of its own (runtime::KernelCache's batch: a backward's kernels take the longest compile's
// time, not the sum), their loads on this thread; in the order given.
std::vector<PreparedKernel> prepare_kernels(const AttentionSpec& spec, const codegen::SpecInputs& inputs,
                                            const Target& target, const std::vector<KernelRequest>& requests);

}  // namespace attnjit::api
