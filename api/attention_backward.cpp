#include "api/attention_backward.h"

#include <chrono>

#include "api/autotune.h"
#include "api/backward_launch.h"
#include "api/backward_tuning.h"
#include "api/tma_maps.h"
#include "api/grad_planes.h"
#include "api/latent_backward.h"
#include "api/latent_projection.h"
#include "api/prepared_kernel.h"
#include "codegen/input_grads.h"
#include "codegen/kernel_config.h"
#include "codegen/lower.h"
#include "dsl/printer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
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

// The fused kernels exist where backward_fused has its sm80 main loop (fp16 / bf16), its
// warp grids fit the head dims (64, 128, 256 in column halves) and its tile fits the GPU's
// shared memory (head dims over 128: not on the 99 KiB GPUs). The ordered one finds, for every step, the
// CTA whose addition comes before its own by classifying that CTA's tile (in growing boxes of
// key tiles). A mask whose classification reads tensors (a document mask) reads those boxes'
// ids at memory latency, so those take the two-pass backward: 3.4x faster on the H100 at
// N 8192 with the sm80 kernels (bench/results/2026-11-23-h100-8086ade-fwdbwd.md), 209 against
// 74 TFLOP/s with the sm90 one (bench/results/2026-11-29-h200-document-mask-probe.md).
BackwardPath choose_path(const AttentionSpec& spec, const codegen::SpecInputs& inputs, const CompileOptions& options,
                         const api::Target& target) {
    const KernelConfig c = default_config(KernelKind::backward_fused, codegen::elem_kind(spec.dtype()),
                                          spec.head_dim_qk(), spec.head_dim_v(), codegen::sm_version(target.arch));
    // The reciprocal band: backward_fused with its band terms where its tile fits (head dims
    // up to 128, sm80/backward_fused.cuh), else backward_dq then backward_dkdv.
    if (spec.has_reciprocal_band()) {
        const int sm = codegen::sm_version(target.arch), limit = max_dynamic_smem_bytes(sm);
        KernelConfig band = c;
        band.recip_band = true;
        band.tile = default_recip_band_tile(band, sm);
        if (c.mainloop != MainloopKind::sm80 || fused_column_split(c.head_dim_qk, c.head_dim_v) > 1 ||
            (limit != 0 && smem_bytes(band) > limit))
            return BackwardPath::two_pass;
    }
    if (spec.has_score_conv()) {
        // backward_fused has the convolution's backward (sm80/score_conv_backward.cuh);
        // backward_dq, with the forward's convolution, the gradients of captured tensors.
        user_check(c.mainloop == MainloopKind::sm80)
            << "the backward of a score convolution runs for f16 / bf16 (got " << dtype_name(spec.dtype())
            << "); train it in f16 or bf16, or without score_conv()";
        const int sm = codegen::sm_version(target.arch), limit = max_dynamic_smem_bytes(sm);
        KernelConfig conv = c;
        conv.score_conv = true;
        conv.tile = default_score_conv_tile(sm, c.head_dim_qk, c.head_dim_v, KernelKind::backward_fused);
        user_check(limit == 0 || smem_bytes(conv) <= limit)
            << "the backward of a score convolution at head dims " << spec.head_dim_qk() << " x " << spec.head_dim_v()
            << " needs " << smem_bytes(conv) / 1024 << " KiB of shared memory a block, more than the "
            << limit / 1024 << " KiB of " << target.arch
            << "; head dims over 128 train on sm_90 or sm_100 GPUs, head dims up to 128 everywhere";
        return options.deterministic ? BackwardPath::fused_ordered : BackwardPath::fused_any;
    }
    // Without a convolution, backward_fused only where it needs no extra padding and fits.
    if (!fused_backward_runs(c.elem, spec.head_dim_qk(), spec.head_dim_v(), codegen::sm_version(target.arch)))
        return BackwardPath::two_pass;
    if (!options.grads.empty()) return BackwardPath::two_pass;  // backward_dq computes the input gradients
    if (!options.deterministic) return BackwardPath::fused_any;
    if (!options.fused_backward || codegen::lower(spec, inputs, KernelKind::backward_fused).classify.reads_memory)
        return BackwardPath::two_pass;
    return BackwardPath::fused_ordered;
}

// Whether CompileOptions.grads names only the sinks and the gate, whose gradients come from
// their own kernels (backward_sink_grad, backward_stats), not from backward_dq's plan.
bool structural_grads_only(const AttentionSpec& spec, const CompileOptions& options) {
    for (const std::string& name : options.grads)
        if (!(spec.has_sinks() && name == spec.sinks_name()) && !(spec.has_gate() && name == spec.gate_name()))
            return false;
    return true;
}

// Whether the sm90 backward runs this spec on this target: sm_90a, no structural modifier but
// sinks and a gate, no gradients of captured tensors, and a key-tile kernel that the config
// rules accept (why_config_invalid_on: f16 / bf16, head dims of whole 64-column tiles up to 128).
bool sm90_backward_carries(const AttentionSpec& spec, const CompileOptions& options, const api::Target& target) {
    if (!codegen::arch_has_wgmma(target.arch) || spec.has_latent() || spec.has_score_conv() ||
        spec.has_reciprocal_band() || !structural_grads_only(spec, options))
        return false;
    KernelConfig c{KernelKind::backward_fused, MainloopKind::sm90, codegen::elem_kind(spec.dtype()), spec.head_dim_qk(),
                   spec.head_dim_v(), TileConfig{}};
    c.tile = default_sm90_tile(c);
    return why_config_invalid_on(c, 90) == nullptr;
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
    bool sinks_grad_asked = false;  // CompileOptions.grads names the sinks: their gradient is required
    bool gate_grad_asked = false;   // CompileOptions.grads names the gate (backward_stats writes it)
    bool alpha_grad_asked = false;  // CompileOptions.grads names the reciprocal band's alpha
    bool conv_grad_asked = false;   // CompileOptions.grads names the score convolution's kernel
    std::vector<api::PreparedKernel> kernels;  // in launch order
    double compile_seconds = 0;                // the wall time of compiling them (at once)
    // A latent projection's backward (api/latent_backward.h): everything else here is unused.
    std::unique_ptr<api::LatentBackward> latent;
    // Gradients of captured tensors and scalars (CompileOptions.grads), from backward_dq's plan.
    std::set<std::string> grads;
    std::vector<codegen::InputGradOutput> grad_outputs;
    std::map<std::string, codegen::InputGradSite> stored_sites;  // their one site each
    int grad_accums = 0;           // sites summed per CTA
    bool grad_work = false;        // the GradWork field exists
    std::string table_name;         // the tensor of the table site (GradWork::table_rows), empty: none
    int table_dim = -1;             // its index that varies over the score matrix
    // The one gradient site may be summed over the batch by backward_dq's batch-sum launch
    // (sm80/backward_dq.cuh run_batch_sum) instead of planes: the Variant has
    // kInputGradBatchSum and backward_dq runs on the tensor cores; at launch, when
    // api::batch_sum_fits.
    bool batch_sum_ok = false;
    // Autotuning (CompileOptions.autotune, ATTNJIT_AUTOTUNE): the backward chosen per shape
    // bucket (api/backward_tuning.h); null when not asked for.
    std::unique_ptr<api::BackwardTuner> tuner;

    struct Launch;
    Launch check(const LaunchArgs& fwd, const GradArgs& grads) const;  // every argument check

    // The sm90 backward taken by default (not forced): the same backward on the sm80 loop, for a
    // call whose Q, K, V or dO its bulk copies cannot read (api/tma_maps.h), built on first need.
    bool sm90_default = false;
    CompileOptions sm80_options;
    mutable std::once_flag sm80_once;
    mutable std::unique_ptr<AttentionBackward> sm80;
    const AttentionBackward& sm80_backward() const {
        std::call_once(sm80_once, [this] { sm80 = std::make_unique<AttentionBackward>(spec, sm80_options); });
        return *sm80;
    }

    const api::PreparedKernel& kernel(KernelKind kind) const {
        for (const auto& k : kernels)
            if (k.config.kind == kind) return k;
        user_error << "this AttentionBackward has no " << kernel_kind_name(kind) << " kernel; it runs "
                   << path_kernels(path)
                   << (spec.has_sinks() ? ", then backward_sink_grad when the sinks' gradient is asked for"
                                        : " (and backward_sink_grad only for a spec with sinks)");
        return kernels.front();
    }
};

AttentionBackward::AttentionBackward(const AttentionSpec& spec, const CompileOptions& options)
    : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    user_check(spec.returns_lse()) << "AttentionBackward needs the forward's LSE: build the spec with .return_lse() "
                                      "and use the same spec for the forward";
    user_check(!options.schedule) << "AttentionBackward: CompileOptions.schedule chooses the forward's CTA schedule; "
                                     "the backward's kernels have none to choose, so leave it unset here";
    impl_->spec = spec;
    const api::Target target = api::resolve_target(options);
    impl_->arch = target.arch;
    // The sm90 loop: the kernel that owns the keys (backward_fused, or in the two-pass backward
    // backward_dkdv) on it (sm90/backward_dkdv.cuh); the per-row kernels and backward_dq stay as
    // they are. Taken on sm_90a where it carries the spec (sm90_backward_carries) and no tile is
    // given, or forced by CompileOptions.mainloop = sm90; mainloop = sm80 keeps the sm80 kernels.
    const bool sm90_keys = options.mainloop == MainloopKind::sm90 ||
                           (!options.mainloop && !options.tile && sm90_backward_carries(spec, options, target));
    impl_->sm90_default = sm90_keys && !options.mainloop;
    if (impl_->sm90_default) {
        impl_->sm80_options = options;
        impl_->sm80_options.mainloop = MainloopKind::sm80;
    }
    if (options.mainloop == MainloopKind::sm90)
        user_check(!spec.has_latent() && !spec.has_score_conv() && !spec.has_reciprocal_band() &&
                   structural_grads_only(spec, options))
            << "AttentionBackward with CompileOptions.mainloop = sm90 for " << spec
            << ": the sm90 backward has no latent projection, score convolution, reciprocal band or gradients of "
               "captured tensors yet; leave CompileOptions.mainloop unset";
    if (spec.has_latent()) {
        impl_->latent = std::make_unique<api::LatentBackward>(spec, options, target);
        return;
    }
    // The sinks' gradient comes from backward_sink_grad, not from backward_dq's plan.
    CompileOptions opts = options;
    if (spec.has_sinks()) impl_->sinks_grad_asked = opts.grads.erase(spec.sinks_name()) > 0;
    // The gate's gradient comes from backward_stats, which every gated backward runs first.
    if (spec.has_gate()) impl_->gate_grad_asked = opts.grads.erase(spec.gate_name()) > 0;
    // The score convolution's kernel gradient: backward_fused's sums, added by backward_dq_convert.
    if (spec.has_score_conv()) impl_->conv_grad_asked = opts.grads.erase(spec.score_conv_name()) > 0;
    // The reciprocal band's alpha: backward_dq's sums (BackwardArgs::d_alpha).
    if (spec.has_reciprocal_band()) impl_->alpha_grad_asked = opts.grads.erase(spec.reciprocal_band_alpha()) > 0;
    impl_->path = choose_path(spec, impl_->inputs, opts, target);
    if (target.on_device) impl_->sm_count = runtime::current_device().sm_count;
    bool batch_sum_plan = false;  // the plan allows the batch-sum launch (impl_->batch_sum_ok)
    if (!opts.grads.empty()) {
        // Validates the names and refuses the reads whose sums are not implemented
        // (codegen/input_grads.h), before anything is compiled.
        const codegen::KernelPlan plan = codegen::lower(spec, impl_->inputs, KernelKind::backward_dq, opts.grads);
        impl_->grads = opts.grads;
        impl_->grad_outputs = plan.grad_outputs;
        // Sites written once per element (elementwise, per query, per key: api/grad_planes.h);
        // per-key sites are backward_dkdv's, not in backward_dq's plan.
        bool key_sites = false;
        for (const auto& site : codegen::plan_input_grads(spec, opts.grads).sites)
            if (site.store || site.per_query || site.per_key) {
                const std::string& name = plan.grad_outputs[static_cast<size_t>(site.output)].name;
                impl_->stored_sites.emplace(name, site);
                key_sites = key_sites || site.per_key;
            }
        impl_->grad_accums = plan.grad_accums();
        // GradWork: backward_dq's per-CTA sums; its ticket also serves backward_dkdv's per-key sums.
        impl_->grad_work = plan.grad_accum_outputs() > 0 || key_sites;
        for (const auto& site : plan.grad_sites)
            if (site.table) {
                impl_->table_name = plan.grad_outputs[static_cast<size_t>(site.output)].name;
                impl_->table_dim = site.table_dim;
            }
        batch_sum_plan = plan.grad_batch_sum() && impl_->stored_sites.size() == 1 && !key_sites;
        // With a score convolution, backward_dq computes these gradients after backward_fused,
        // and backward_dkdv (per-key sums, plane sums) does not run.
        if (spec.has_score_conv())
            for (const auto& [name, site] : impl_->stored_sites)
                user_check(!site.per_key)
                    << "the gradient of '" << name
                    << "' sums its reads over the queries of each key, which the backward of a score convolution "
                       "does not compute yet (reads per query, per element, per head or of scalars it does); "
                       "leave '"
                    << name << "' out of CompileOptions.grads, or read it per query or per element";
    }
    std::vector<api::KernelRequest> requests;
    auto add = [&](KernelKind kind, const std::optional<TileConfig>& tile) {
        // backward_dq computes the input gradients, backward_dkdv sums their planes (if any).
        const bool grad_kind = kind == KernelKind::backward_dq || kind == KernelKind::backward_dkdv;
        const bool on_sm90 = sm90_keys && owns_keys(kind);
        requests.push_back({kind, on_sm90 ? std::nullopt : tile, grad_kind ? impl_->grads : std::set<std::string>{},
                            on_sm90 ? std::optional(MainloopKind::sm90) : std::nullopt});
    };
    if (impl_->path != BackwardPath::two_pass) {
        add(KernelKind::backward_stats, std::nullopt);  // per-row kernels: their own tile
        add(KernelKind::backward_fused, options.tile);
        add(KernelKind::backward_dq_convert, std::nullopt);
        // A score convolution's gradients of captured tensors: backward_dq with the
        // convolution, computing no dQ (sm80/backward_dq.cuh kConv).
        if (spec.has_score_conv() && !impl_->grads.empty()) add(KernelKind::backward_dq, std::nullopt);
    } else {
        if (spec.has_gate()) add(KernelKind::backward_stats, std::nullopt);  // the gate's work first
        add(KernelKind::backward_dq, options.tile);  // first (after a gate's backward_stats): it writes the per-row statistics
        add(KernelKind::backward_dkdv, options.tile);
    }
    // Attention sinks: their gradient, from LSE, O and dO alone (launched when asked for).
    if (spec.has_sinks()) add(KernelKind::backward_sink_grad, std::nullopt);
    // Compiled at once (api::prepare_kernels), kept in launch order.
    const auto start = std::chrono::steady_clock::now();
    impl_->kernels = api::prepare_kernels(spec, impl_->inputs, target, requests);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const api::PreparedKernel& k : impl_->kernels)
        if (k.compile_seconds > 0) impl_->compile_seconds = wall;  // one was not in memory
    for (const api::PreparedKernel& k : impl_->kernels)
        debug(1) << "AttentionBackward: " << spec << " -> " << *k.compiled;
    impl_->batch_sum_ok = batch_sum_plan && (impl_->path == BackwardPath::two_pass || spec.has_score_conv()) &&
                          impl_->kernel(KernelKind::backward_dq).config.mainloop == MainloopKind::sm80;
    // Not where it computes gradients of captured tensors: with backward_dq's gradient code, the
    // two other tiles measured compiled about 3x slower than the default (55 and 61 s against
    // 20 s for the whole backward on the 2-core build machine, pair bias at D 128), and a cold
    // tuning of that bucket took 199 s on the H100's host, ten times the budget (docs/autotune.md).
    if (api::autotune_asked(options) && !options.tile && !options.mainloop && target.on_device && impl_->grads.empty())
        impl_->tuner = std::make_unique<api::BackwardTuner>(spec, options, config(key_kind()), deterministic(), target.arch);
}

AttentionBackward::~AttentionBackward() = default;
AttentionBackward::AttentionBackward(AttentionBackward&&) noexcept = default;
AttentionBackward& AttentionBackward::operator=(AttentionBackward&&) noexcept = default;

// What operator() launches with, once every argument is checked: the gradient views as
// the kernels take them, and the planes of elementwise gradients that receive sums.
struct AttentionBackward::Impl::Launch {
    std::optional<GradArgs> adjusted;  // only when a captured tensor broadcasts with size 1
    std::map<std::string, api::GradPlanes> planes;  // buffer offsets until it is allocated
    size_t plane_bytes = 0;
    bool batch_sum = false;  // backward_dq's batch-sum launch writes the one site's gradient
};

AttentionBackward::Impl::Launch AttentionBackward::Impl::check(const LaunchArgs& fwd, const GradArgs& grads_in) const {
    check_launch_args(spec, inputs, fwd);
    check_grad_args(spec, fwd, grads_in);
    std::set<std::string> structural;
    if (spec.has_sinks()) structural.insert(spec.sinks_name());
    if (spec.has_gate()) structural.insert(spec.gate_name());
    if (spec.has_score_conv()) structural.insert(spec.score_conv_name());
    if (spec.has_reciprocal_band()) structural.insert(spec.reciprocal_band_alpha());
    check_input_grad_args(fwd, grads_in, grad_outputs, structural);
    for (const auto& [asked, name, what] :
         {std::tuple{sinks_grad_asked, spec.sinks_name(), "sinks"}, std::tuple{gate_grad_asked, spec.gate_name(), "gate"},
          std::tuple{conv_grad_asked, spec.score_conv_name(), "score convolution's kernel"},
          std::tuple{alpha_grad_asked, spec.reciprocal_band_alpha(), "reciprocal band's alpha"}})
        user_check(!asked || grads_in.grads.count(name))
            << "the gradient of the " << what << " '" << name << "' is missing: GradArgs::grads[\"" << name
            << "\"] must be given (CompileOptions.grads names it)";

    const auto& q = fwd.q.shape;
    // Gradients of captured tensors and scalars are written by backward_dq, which has no CTA
    // without a score element.
    user_check((grads.empty() && !alpha_grad_asked) || (q[0] > 0 && q[1] > 0 && q[2] > 0))
        << "this backward computes gradients of captured tensors or scalars, which no score element reads when B, "
           "Hq or Nq is 0 (got q of shape ["
        << q[0] << ", " << q[1] << ", " << q[2] << ", " << q[3] << "]): they are all zero; skip the backward";
    Launch l;
    // A dimension where the captured tensor broadcasts with size 1 is read at any index:
    // its gradient is the sum over it, whatever the gradient's stride there.
    for (const auto& [name, view] : grads_in.grads) {
        auto t = fwd.tensors.find(name);
        if (t == fwd.tensors.end()) continue;  // a scalar
        for (size_t d = 0; d < view.strides.size(); ++d)
            if (t->second.strides[d] == 0 && t->second.shape[d] == 1 && view.strides[d] != 0) {
                if (!l.adjusted) l.adjusted = grads_in;
                l.adjusted->grads.at(name).strides[d] = 0;
            }
    }
    const GradArgs& grads_out = l.adjusted ? *l.adjusted : grads_in;
    // Planes of elementwise gradients that receive sums (api/grad_planes.h), zeroed by
    // operator(); summed by backward_dkdv.
    for (const auto& [name, site] : stored_sites) {
        api::GradPlanes pl = api::plan_grad_planes(site, grads_out.grads.at(name), fwd, name);
        if (batch_sum_ok && api::batch_sum_fits(site, grads_out.grads.at(name), pl)) {
            l.batch_sum = true;  // summed over b in registers by the batch-sum launch, no planes
            continue;
        }
        if (pl.elems == 0) continue;
        user_check(!spec.has_score_conv())
            << "the gradient of '" << name
            << "' is a sum over the batch or the heads here (the tensor broadcasts over them), which the backward of "
               "a score convolution computes only for a single elementwise gradient broadcast over the batch alone "
               "(a pair bias); give '"
            << name << "' a batch and a head dimension of its own, or leave it out of CompileOptions.grads";
        const size_t count = static_cast<size_t>((pl.plane_b ? q[0] : 1) * (pl.plane_h ? q[1] : 1));
        pl.planes = reinterpret_cast<float*>(l.plane_bytes);  // offset for now
        l.plane_bytes += count * static_cast<size_t>(pl.elems) * sizeof(float);
        l.planes.emplace(name, pl);
    }
    return l;
}

void AttentionBackward::check_args(const LaunchArgs& fwd, const GradArgs& grads) const {
    if (impl_->latent) return impl_->latent->check(fwd, grads);
    impl_->check(fwd, grads);
}

void AttentionBackward::operator()(const LaunchArgs& fwd, const GradArgs& grads_in, Stream stream) const {
    if (impl_->latent) return impl_->latent->run(fwd, grads_in, stream);
    Impl::Launch l = impl_->check(fwd, grads_in);  // before anything reads the views' dims
    if (impl_->sm90_default) {
        if (const auto why = api::why_not_tma_readable(fwd, grads_in.d_o)) {
            debug(1) << "sm90 backward: " << *why << "; running the sm80 kernels";
            return impl_->sm80_backward()(fwd, grads_in, stream);
        }
    }
    const GradArgs& grads = l.adjusted ? *l.adjusted : grads_in;
    auto& planes = l.planes;
    const size_t plane_bytes = l.plane_bytes;
    const auto &q = fwd.q.shape, &k = fwd.k.shape;
    user_check(can_launch()) << "this AttentionBackward was compiled for " << impl_->arch
                             << " only (CompileOptions.arch, or no usable GPU at construction), so it cannot "
                                "launch; construct it without CompileOptions.arch where the GPU is";
    if (impl_->tuner && q[0] > 0 && q[2] > 0 && k[2] > 0)
        if (const auto tuned = impl_->tuner->for_call(fwd, grads_in, stream)) return (*tuned)(fwd, grads_in, stream);
    // Attention sinks' gradient, when asked for: after the other kernels (it needs none of
    // them), and even with no batch or no rows (it writes zeros then).
    std::optional<SinkGradArgs> sinks = api::sink_grad_args(impl_->spec, fwd, grads);
    auto launch_sink_grad = [&] {
        if (!sinks || q[1] == 0) return;
        const api::PreparedKernel& kernel = impl_->kernel(KernelKind::backward_sink_grad);
        // Workspace, O(Hq * B * Nq / kSinkGradChunkRows): the chunks' sums.
        const runtime::StreamBuffer partials(api::sink_grad_partials_bytes(*sinks), static_cast<CUstream>(stream));
        sinks->partials = static_cast<float*>(partials.data());
        for (int phase : {0, 1}) {
            sinks->phase = phase;
            if (sinks->chunks > 0 || phase == 1)
                kernel.launch(api::sink_grad_grid(*sinks), api::sink_grad_params(kernel.layout, *sinks, fwd), stream);
        }
    };
    // The score convolution's kernel gradient, when given: backward_fused's per-(batch, head,
    // key tile) sums in a zeroed workspace, added by backward_dq_convert (which also runs
    // with no rows or no batch, to write zeros).
    const auto conv_grad = impl_->spec.has_score_conv() ? grads.grads.find(impl_->spec.score_conv_name())
                                                        : grads.grads.end();
    const bool conv_grad_given = conv_grad != grads.grads.end();
    auto set_conv_grad_args = [&](BackwardArgs& b, float* partials, int key_tiles) {
        b.d_score_conv = conv_grad->second.data;
        for (int d = 0; d < 3; ++d) b.d_score_conv_stride[d] = conv_grad->second.strides[d];
        b.score_conv_partials = partials;
        b.score_conv_key_tiles = key_tiles;
    };
    if (q[0] == 0 || q[1] == 0) {  // no batch or no heads: nothing else to write
        if (conv_grad_given && q[1] > 0) {
            BackwardArgs block = api::backward_args(impl_->spec, fwd, grads, nullptr, nullptr);
            set_conv_grad_args(block, nullptr, 0);
            const api::PreparedKernel& kernel = impl_->kernel(KernelKind::backward_dq_convert);
            kernel.launch(runtime::Dim3{1u, static_cast<unsigned>(q[1]), 1u},
                          api::backward_params(kernel.layout, block, fwd, nullptr, nullptr, &l.planes), stream);
        }
        launch_sink_grad();
        return;
    }
    // Workspaces, O(N): the per-row statistics; fused: the fp32 dQ sums, and (ordered)
    // the turn counters of the query tiles, zeroed.
    const bool fused = impl_->path != BackwardPath::two_pass;
    const auto cu_stream = static_cast<CUstream>(stream);
    const runtime::StreamBuffer stats(api::backward_stats_bytes(fwd), cu_stream);
    const runtime::StreamBuffer dq_accum(fused ? api::backward_dq_accum_bytes(fwd) : 0, cu_stream);
    const size_t turns_bytes =
        impl_->path == BackwardPath::fused_ordered
            ? api::backward_dq_turns_bytes(fwd, impl_->kernel(KernelKind::backward_fused).config)
            : 0;
    const runtime::StreamBuffer dq_turns(turns_bytes, cu_stream);
    dq_turns.zero(0, turns_bytes);
    BackwardArgs block = api::backward_args(impl_->spec, fwd, grads, static_cast<float*>(stats.data()),
                                            static_cast<float*>(dq_accum.data()));
    block.dq_turns = static_cast<int*>(dq_turns.data());
    // An output gate: backward_stats writes dO * sigmoid(gate) here for the later kernels
    // (backward/args.h), O(B Hq Nq Dv) in the dtype of q.
    std::optional<runtime::StreamBuffer> gated_d_o;
    if (impl_->spec.has_gate()) {
        gated_d_o.emplace(static_cast<size_t>(fwd.o.numel()) * dtype_size(fwd.o.dtype), cu_stream);
        api::set_gate_args(block, impl_->spec, fwd, grads, gated_d_o->data());
    }
    std::optional<runtime::StreamBuffer> conv_partials;  // O(B Hq Nk / block_n c_q c_k) f32
    if (conv_grad_given) {
        const int key_tiles =
            ceil_div(static_cast<int>(k[2]), impl_->kernel(KernelKind::backward_fused).config.tile.block_n);
        const size_t bytes = sizeof(float) * static_cast<size_t>(q[0] * q[1]) * static_cast<size_t>(key_tiles) *
                             static_cast<size_t>(impl_->spec.score_conv_rows() * impl_->spec.score_conv_cols());
        conv_partials.emplace(bytes, cu_stream);
        conv_partials->zero(0, bytes);
        set_conv_grad_args(block, static_cast<float*>(conv_partials->data()), key_tiles);
    }
    if (impl_->path == BackwardPath::fused_ordered) {
        // The rotated order of turns (no waiting once under way) needs all the key tiles
        // of a kv head resident at once: at most one per SM, and no more than query tiles.
        // Rotated by d, a CTA's predecessor in a turn visited the tile d steps earlier: the
        // largest d that d * key tiles <= query tiles allows (2 for 64-query steps over
        // 128-key tiles), at most 4.
        const KernelConfig& c = impl_->kernel(KernelKind::backward_fused).config;
        const TileConfig& t = c.tile;
        const long long key_tiles = (k[2] + t.block_n - 1) / t.block_n, query_tiles = (q[2] + t.block_m - 1) / t.block_m;
        const long long ctas = key_tiles * fused_column_split(c.head_dim_qk, c.head_dim_v);  // of a kv head
        block.dq_rotate =
            key_tiles <= query_tiles && ctas <= impl_->sm_count ? static_cast<int>(std::min(query_tiles / key_tiles, 4LL)) : 0;
    }
    // The per-CTA sums of gradients of captured tensors and scalars (GradWork): one partial
    // and one index per summed site and backward_dq CTA, and a ticket zeroed here.
    std::optional<runtime::StreamBuffer> work_buffer;
    GradWork work{};
    if (impl_->grad_work) {
        const runtime::Dim3 g = api::backward_grid(impl_->kernel(KernelKind::backward_dq).config, fwd);
        const int ctas = static_cast<int>(g.x * g.y * g.z);
        work_buffer.emplace(api::grad_work_bytes(impl_->grad_accums, ctas), cu_stream);
        work = api::grad_work(work_buffer->data(), impl_->grad_accums, ctas);
        work_buffer->zero(api::grad_work_ticket_offset(impl_->grad_accums, ctas), 16);
    }
    // The table site's rows (one per backward_dq thread, of its table elements per (b, h)),
    // per-CTA partials and bases (backward/grad_args.h); the kernel clears the rows.
    std::optional<runtime::StreamBuffer> table_buffer;
    if (!impl_->table_name.empty()) {
        const TensorView& view = grads.grads.at(impl_->table_name);
        const size_t dd = static_cast<size_t>(impl_->table_dim);
        const long long len = view.strides[dd] == 0 ? 1 : view.shape[dd];
        const int threads = impl_->kernel(KernelKind::backward_dq).compiled->threads;
        const size_t ctas = static_cast<size_t>(work.ctas);
        const size_t rows = ctas * static_cast<size_t>(threads) * static_cast<size_t>(len);
        constexpr size_t kMaxRowBytes = size_t{1} << 31;
        user_check(rows * sizeof(float) <= kMaxRowBytes)
            << "the gradient of tensor '" << impl_->table_name << "' (a table read, " << len
            << " table elements per (batch, head)) needs " << rows * sizeof(float)
            << " bytes of workspace here (one fp32 row of table elements per backward thread: " << ctas << " CTAs x "
            << threads << " threads), more than the " << kMaxRowBytes
            << " attnjit allows; use a smaller table, fewer heads or a shorter sequence, or drop '" << impl_->table_name
            << "' from the gradients asked for";
        table_buffer.emplace(ctas * sizeof(long long) + (ctas * static_cast<size_t>(len) + rows) * sizeof(float),
                            cu_stream);
        auto* base = static_cast<unsigned char*>(table_buffer->data());
        work.table_threads = threads;
        work.table_len = len;
        work.table_base = reinterpret_cast<long long*>(base);
        work.table_partials = reinterpret_cast<float*>(base + ctas * sizeof(long long));
        work.table_rows = work.table_partials + ctas * static_cast<size_t>(len);
    }
    std::optional<runtime::StreamBuffer> plane_buffer;
    if (plane_bytes) {
        plane_buffer.emplace(plane_bytes, cu_stream);
        plane_buffer->zero(0, plane_bytes);
        for (auto& [name, pl] : planes)
            pl.planes = reinterpret_cast<float*>(static_cast<unsigned char*>(plane_buffer->data()) +
                                                 reinterpret_cast<size_t>(pl.planes));
    }
    // The reciprocal band: f32 workspaces of backward_dq's dQ sums and U (zeroed), and d
    // alpha's per-CTA sums with a zeroed ticket per head (backward/args.h).
    // Fused: band_dq zeroed too, and dK's f32 sums [B, Hkv, Nk, Dqk]; d alpha's sums are then
    // backward_dq_convert's.
    std::optional<runtime::StreamBuffer> band_buffer;
    if (impl_->spec.has_reciprocal_band()) {
        const size_t rows = static_cast<size_t>(q[0] * q[1] * q[2]), cols = static_cast<size_t>(q[3]);
        const size_t kv_rows = fused ? static_cast<size_t>(k[0] * k[1] * k[2]) : 0;
        const unsigned query_tiles =
            api::backward_grid(impl_->kernel(fused ? KernelKind::backward_dq_convert : KernelKind::backward_dq).config,
                               fwd)
                .x;
        const size_t partials = static_cast<size_t>(q[0] * q[1]) * query_tiles;
        const size_t floats = (2 * rows + kv_rows) * cols + partials;
        band_buffer.emplace(sizeof(float) * floats + sizeof(unsigned) * static_cast<size_t>(q[1]), cu_stream);
        auto* base = static_cast<float*>(band_buffer->data());
        block.band_dq = base;
        block.band_dk = base + rows * cols;
        block.band_dk_sums = fused ? base + 2 * rows * cols : nullptr;
        block.band_alpha_partials = base + (2 * rows + kv_rows) * cols;
        block.band_tickets = reinterpret_cast<unsigned*>(base + floats);
        band_buffer->zero(fused ? 0 : sizeof(float) * rows * cols, sizeof(float) * rows * cols * (fused ? 2 : 1));
        band_buffer->zero(sizeof(float) * floats, sizeof(unsigned) * static_cast<size_t>(q[1]));
        if (impl_->alpha_grad_asked) {
            const TensorView& d_alpha = grads.grads.at(impl_->spec.reciprocal_band_alpha());
            block.d_alpha = static_cast<float*>(d_alpha.data);
            block.d_alpha_stride = d_alpha.strides[0];
        }
    }
    block.batch_sum = l.batch_sum ? 1 : 0;  // backward_dq skips the site the batch-sum launch sums
    for (const api::PreparedKernel& kernel : impl_->kernels) {
        if (kernel.config.kind == KernelKind::backward_sink_grad) continue;  // below
        // Kernels over query rows have nothing to do when Nq == 0; dK and dV are written
        // (zeros) even then.
        runtime::Dim3 grid = api::backward_grid(kernel.config, fwd);
        if ((owns_keys(kernel.config.kind) ? k[2] : q[2]) == 0) {
            if (!(conv_grad_given && kernel.config.kind == KernelKind::backward_dq_convert)) continue;
            grid.x = 1;  // dtheta's sums (zeros) with no rows
        }
        const bool with_grads = !kernel.grads.empty();
        std::optional<BackwardTmaMaps> maps;  // the sm90 backward_dkdv's descriptors
        if (kernel.config.mainloop == MainloopKind::sm90) {
            if (const auto why = api::why_not_tma_readable(fwd, grads.d_o))
                user_error << "CompileOptions.mainloop = sm90: " << *why << "; pass the tensor without the broadcast, "
                           << "or leave mainloop unset";
            // With a gate the kernels read dO * sigmoid(gate), which backward_stats wrote.
            // (Nq == 0: nothing was written and the map is never read; the buffer is empty, null.)
            const TensorView d_o = gated_d_o && fwd.o.numel() > 0
                                       ? TensorView::contiguous(gated_d_o->data(), fwd.o.dtype, fwd.o.shape)
                                       : grads.d_o;
            maps = api::backward_tma_maps(kernel.config, fwd, d_o);
        }
        kernel.launch(grid,
                      api::backward_params(kernel.layout, block, fwd, with_grads ? &grads : nullptr,
                                           with_grads && impl_->grad_work ? &work : nullptr, &planes),
                      stream, maps ? &*maps : nullptr);
    }
    if (l.batch_sum && q[2] > 0 && k[2] > 0) {  // after backward_dq, whose row statistics it reads
        const api::PreparedKernel& kernel = impl_->kernel(KernelKind::backward_dq);
        const TileConfig& t = kernel.config.tile;
        const unsigned tiles_x = static_cast<unsigned>(ceil_div(static_cast<int>(k[2]), t.block_n)),
                       tiles_y = static_cast<unsigned>(ceil_div(static_cast<int>(q[2]), t.block_m));
        const size_t tiles = size_t{tiles_x} * tiles_y * static_cast<size_t>(q[1]);
        const int chunks = api::batch_sum_chunks(tiles, q[0], q[1] * q[2] * k[2]);
        // With chunks: f32 partials O(chunks Hq Nq Nk) and a zeroed ticket per tile.
        const size_t part_bytes = chunks > 1 ? sizeof(float) * static_cast<size_t>(chunks * q[1] * q[2] * k[2]) : 0;
        const runtime::StreamBuffer partials(part_bytes, cu_stream);
        const runtime::StreamBuffer tickets(chunks > 1 ? tiles * sizeof(unsigned) : 0, cu_stream);
        if (chunks > 1) tickets.zero(0, tiles * sizeof(unsigned));
        block.batch_sum = 2;
        block.batch_sum_chunks = chunks;
        block.batch_sum_partials = static_cast<float*>(partials.data());
        block.batch_sum_tickets = static_cast<unsigned*>(tickets.data());
        kernel.launch(runtime::Dim3{tiles_x, tiles_y, static_cast<unsigned>(q[1] * chunks)},
                      api::backward_params(kernel.layout, block, fwd, &grads, nullptr, &planes), stream);
    }
    launch_sink_grad();
}

const AttentionSpec& AttentionBackward::spec() const { return impl_->spec; }
const KernelConfig& AttentionBackward::config(KernelKind kind) const {
    if (const auto& l = impl_->latent) return kind == KernelKind::latent_gemm ? l->gemm().config : l->heads().config(kind);
    return impl_->kernel(kind).config;
}
std::vector<KernelKind> AttentionBackward::kernel_kinds() const {
    std::vector<KernelKind> kinds;
    if (const auto& l = impl_->latent) {  // latent_gemm before and after the per-head kernels
        kinds = l->heads().kernel_kinds();
        kinds.insert(kinds.begin(), KernelKind::latent_gemm);
        kinds.push_back(KernelKind::latent_gemm);
        return kinds;
    }
    for (const auto& k : impl_->kernels) kinds.push_back(k.config.kind);
    return kinds;
}
KernelKind AttentionBackward::key_kind() const {
    user_check(!impl_->latent) << "AttentionBackward::key_kind(): a latent projection's backward runs per-head "
                                  "backwards between its latent_gemm kernels; it has no one key-tile kernel";
    return impl_->path == BackwardPath::two_pass ? KernelKind::backward_dkdv : KernelKind::backward_fused;
}

codegen::KernelSource AttentionBackward::source(KernelKind kind) const {
    if (const auto& l = impl_->latent)
        return kind == KernelKind::latent_gemm ? l->gemm().source(api::latent_gemm_spec(impl_->spec),
                                                                  spec_inputs(api::latent_gemm_spec(impl_->spec)))
                                               : l->heads().source(kind);
    return impl_->kernel(kind).source(impl_->spec, impl_->inputs);
}
bool AttentionBackward::can_launch() const {
    if (const auto& l = impl_->latent) return l->gemm().loaded && l->heads().can_launch();
    for (const auto& k : impl_->kernels)
        if (!k.loaded) return false;
    return true;
}
double AttentionBackward::compile_seconds() const {
    if (const auto& l = impl_->latent) return l->gemm().compile_seconds + l->heads().compile_seconds();
    return impl_->compile_seconds;
}
bool AttentionBackward::deterministic() const {
    return impl_->latent ? impl_->latent->heads().deterministic() : impl_->path != BackwardPath::fused_any;
}

void check_input_grad_args(const LaunchArgs& fwd, const GradArgs& g,
                           const std::vector<codegen::InputGradOutput>& outputs,
                           const std::set<std::string>& structural) {
    for (const auto& [name, view] : g.grads) {
        if (structural.count(name)) continue;
        bool asked = false;
        for (const auto& o : outputs) asked = asked || o.name == name;
        user_check(asked) << "GradArgs::grads has '" << name
                          << "', which this AttentionBackward was not asked for; name it in CompileOptions.grads "
                             "when constructing the backward";
    }
    for (const auto& o : outputs) {
        auto it = g.grads.find(o.name);
        user_check(it != g.grads.end()) << "the gradient of " << (o.scalar ? "scalar '" : "tensor '") << o.name
                                        << "' is missing: GradArgs::grads[\"" << o.name
                                        << "\"] must be given (CompileOptions.grads names it)";
        const TensorView& t = it->second;
        const std::string what = "GradArgs::grads[\"" + o.name + "\"]";
        if (o.scalar) {
            user_check(t.shape.empty() && t.dtype == DType::f32)
                << what << " must be a 0-dim f32 tensor (the gradient of runtime scalar '" << o.name << "'), got dtype "
                << dtype_name(t.dtype) << " and rank " << t.shape.size();
            user_check(t.data != nullptr) << what << " has a null data pointer";
            continue;
        }
        const TensorView& in = fwd.tensors.at(o.name);  // check_launch_args ran: it exists
        user_check(t.dtype == in.dtype) << what << " has dtype " << dtype_name(t.dtype)
                                        << " but must have the dtype of captured tensor '" << o.name << "', "
                                        << dtype_name(in.dtype);
        user_check(t.shape == in.shape && t.strides.size() == t.shape.size())
            << what << " must have the shape of captured tensor '" << o.name << "' (rank " << in.shape.size()
            << ", the same sizes); got rank " << t.shape.size();
        const bool empty = t.numel() == 0;
        user_check(empty || t.data != nullptr) << what << " has a null data pointer";
        if (empty) continue;  // written nowhere: no stride or memory to share
        for (size_t d = 0; d < t.shape.size(); ++d) {
            if (t.shape[d] <= 1) continue;
            user_check(t.strides[d] != 0 || in.strides[d] == 0)
                << what << " has stride 0 in dimension " << d << " where captured tensor '" << o.name
                << "' has stride " << in.strides[d]
                << ": a gradient may have stride 0 only where its tensor broadcasts (the element then receives the "
                   "sum over the dimension)";
        }
        for (const auto* out : {&g.dq, &g.dk, &g.dv, &g.d_o})
            user_check(out->numel() == 0 || t.data != out->data)
                << what << " is the same memory as another gradient argument; pass a separate buffer";
        user_check(in.numel() == 0 || t.data != in.data)
            << what << " is the same memory as captured tensor '" << o.name << "'; pass a separate buffer";
    }
}

}  // namespace attnjit
