#include "api/attention_backward.h"

#include "api/backward_launch.h"
#include "api/prepared_kernel.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"

#include <vector>
#include "runtime/device.h"
#include "runtime/stream_buffer.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

namespace {

// The kernels a backward runs, in launch order (attnjit/common/kernel_config.h):
enum class BackwardPath {
    two_pass,       // backward_dq, backward_dkdv: deterministic, every main loop
    fused_ordered,  // backward_stats, backward_fused (dQ added in a fixed order), backward_dq_convert
    fused_any,      // the same, dQ added in any order: the fast backward
};

// The fused kernels exist where backward_fused has its sm80 main loop (fp16 / bf16) and
// its warp grids fit the head dims (64, 128). The ordered one finds, for every step, the
// CTA whose addition comes before its own by classifying that CTA's tile; a mask whose
// classification reads tensors (a document mask) would pay a block-wide range reduction
// per candidate, so those take the two-pass backward (3.4x faster on the H100 at N 8192,
// bench/results/2026-11-23-h100-8086ade-fwdbwd.md).
BackwardPath choose_path(const AttentionSpec& spec, const codegen::SpecInputs& inputs, const CompileOptions& options,
                         const api::Target& target) {
    const KernelConfig c = default_config(KernelKind::backward_fused, codegen::elem_kind(spec.dtype()),
                                          spec.head_dim_qk(), spec.head_dim_v(), codegen::sm_version(target.arch));
    if (c.mainloop != MainloopKind::sm80 || !config_is_valid(c)) return BackwardPath::two_pass;
    if (!options.deterministic) return BackwardPath::fused_any;
    if (!options.fused_backward || codegen::lower(spec, inputs, KernelKind::backward_fused).classify.reads_memory)
        return BackwardPath::two_pass;
    return BackwardPath::fused_ordered;
}

const char* path_kernels(BackwardPath path) {
    return path == BackwardPath::two_pass ? "backward_dq and backward_dkdv"
                                          : "backward_stats, backward_fused and backward_dq_convert";
}

}  // namespace

struct AttentionBackward::Impl {
    AttentionSpec spec;  // validated, returns LSE
    SpecInputs inputs;   // spec_inputs(spec)
    std::string arch;
    BackwardPath path = BackwardPath::two_pass;
    int sm_count = 0;  // of the GPU it runs on (0: compile only)
    std::vector<api::PreparedKernel> kernels;  // in launch order

    const api::PreparedKernel& kernel(KernelKind kind) const {
        for (const auto& k : kernels)
            if (k.config.kind == kind) return k;
        user_error << "this AttentionBackward has no " << kernel_kind_name(kind) << " kernel; it runs "
                   << path_kernels(path);
        return kernels.front();
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
    impl_->path = choose_path(spec, impl_->inputs, options, target);
    if (target.on_device) impl_->sm_count = runtime::current_device().sm_count;
    auto add = [&](KernelKind kind, const std::optional<TileConfig>& tile) {
        impl_->kernels.push_back(api::prepare_kernel(spec, impl_->inputs, kind, target, tile));
        debug(1) << "AttentionBackward: " << spec << " -> " << *impl_->kernels.back().compiled;
    };
    if (impl_->path != BackwardPath::two_pass) {
        add(KernelKind::backward_stats, std::nullopt);  // per-row kernels: their own tile
        add(KernelKind::backward_fused, options.tile);
        add(KernelKind::backward_dq_convert, std::nullopt);
    } else {
        add(KernelKind::backward_dq, options.tile);  // first: it writes the per-row statistics
        add(KernelKind::backward_dkdv, options.tile);
    }
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
    // Workspaces, O(N): the per-row statistics; fused: the fp32 dQ sums, and (ordered)
    // the turn counters of the query tiles, zeroed.
    const bool fused = impl_->path != BackwardPath::two_pass;
    const auto cu_stream = static_cast<CUstream>(stream);
    const runtime::StreamBuffer stats(api::backward_stats_bytes(fwd), cu_stream);
    const runtime::StreamBuffer dq_accum(fused ? api::backward_dq_accum_bytes(fwd) : 0, cu_stream);
    runtime::StreamBuffer dq_turns(
        impl_->path == BackwardPath::fused_ordered
            ? api::backward_dq_turns_bytes(fwd, impl_->kernel(KernelKind::backward_fused).config.tile.block_m)
            : 0,
        cu_stream);
    dq_turns.zero();
    BackwardArgs block = api::backward_args(impl_->spec, fwd, grads, static_cast<float*>(stats.data()),
                                            static_cast<float*>(dq_accum.data()));
    block.dq_turns = static_cast<int*>(dq_turns.data());
    if (impl_->path == BackwardPath::fused_ordered) {
        // The rotated order of turns (no waiting once under way) needs all the key tiles
        // of a kv head resident at once: at most one per SM, and no more than query tiles.
        const TileConfig& t = impl_->kernel(KernelKind::backward_fused).config.tile;
        const long long key_tiles = (k[2] + t.block_n - 1) / t.block_n, query_tiles = (q[2] + t.block_m - 1) / t.block_m;
        block.dq_rotate = key_tiles <= query_tiles && key_tiles <= impl_->sm_count ? 1 : 0;
    }
    for (const api::PreparedKernel& kernel : impl_->kernels) {
        // Kernels over query rows have nothing to do when Nq == 0; dK and dV are written
        // (zeros) even then.
        if ((owns_keys(kernel.config.kind) ? k[2] : q[2]) == 0) continue;
        kernel.launch(api::backward_grid(kernel.config, fwd), api::backward_params(kernel.layout, block, fwd),
                      stream);
    }
}

const AttentionSpec& AttentionBackward::spec() const { return impl_->spec; }
const KernelConfig& AttentionBackward::config(KernelKind kind) const { return impl_->kernel(kind).config; }
std::vector<KernelKind> AttentionBackward::kernel_kinds() const {
    std::vector<KernelKind> kinds;
    for (const auto& k : impl_->kernels) kinds.push_back(k.config.kind);
    return kinds;
}
codegen::KernelSource AttentionBackward::source(KernelKind kind) const {
    return impl_->kernel(kind).source(impl_->spec, impl_->inputs);
}
bool AttentionBackward::can_launch() const {
    for (const auto& k : impl_->kernels)
        if (!k.loaded) return false;
    return true;
}
double AttentionBackward::compile_seconds() const {
    double s = 0;
    for (const auto& k : impl_->kernels) s += k.compile_seconds;
    return s;
}
bool AttentionBackward::deterministic() const { return impl_->path != BackwardPath::fused_any; }

}  // namespace attnjit
