#include "api/attention.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <sstream>

#include "api/autotune.h"
#include "api/candidate_timing.h"
#include "api/forward_launch.h"
#include "api/tma_maps.h"
#include "api/tuned_buckets.h"
#include "api/latent_projection.h"
#include "api/prepared_kernel.h"
#include "codegen/kernel_config.h"
#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "runtime/device_buffer.h"
#include "runtime/kernel_cache.h"
#include "runtime/stream_buffer.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit {

struct Attention::Impl {
    AttentionSpec spec;  // validated
    SpecInputs inputs;   // spec_inputs(spec): checked at every launch, never re-derived
    std::string arch;
    api::PreparedKernel kernel;
    // RA + MLA over L 256, which the fused latent kernel does not build (its latent columns are
    // split across warps there): latent_gemm projects K and V per head into a workspace and
    // `kernel` is the forward of latent_head_spec(spec) over them (api/latent_projection.h).
    std::optional<api::PreparedKernel> latent_gemm;
    AttentionSpec kernel_spec;  // what `kernel` is generated from: spec, or its latent_head_spec
    SpecInputs kernel_inputs;
    // `kernel` on the sm90 loop: the sm80 kernel of the same spec, for a call whose Q, K or V its
    // bulk copies cannot read (api/tma_maps.h: a broadcast by stride 0), compiled on first need;
    // not when CompileOptions.mainloop asked for sm90 (that call is a UserError).
    api::Target target;
    bool sm90_forced = false;
    mutable std::once_flag sm80_once;
    mutable std::optional<api::PreparedKernel> sm80;
    const api::PreparedKernel& sm80_kernel() const {
        std::call_once(sm80_once, [this] {
            sm80 = api::prepare_kernel(kernel_spec, kernel_inputs, KernelKind::forward, target, std::nullopt, {},
                                       MainloopKind::sm80);
            sm80->config.schedule.order = kernel.config.schedule.order;  // a chosen order holds here too
        });
        return *sm80;
    }
    mutable api::WorkCounters work_counters;  // the sm90 forward's persistent grid's, one a stream
    int sm_count = 0;  // of the GPU it launches on (0: compile only), read once, not per launch
    std::string tma_bias;  // `kernel`'s bias tile tensor on the sm90 loop, "" for none (api/tma_maps.h)
    mutable std::once_flag source_once;  // source() may be called from several threads
    mutable std::optional<codegen::KernelSource> source;  // generated on demand

    // Autotuning (api/autotune.h): the kernel chosen for each shape bucket, tuned on its first
    // launch (or taken from the tuning database).
    bool autotune = false;
    struct Tuned {
        api::PreparedKernel kernel;
        std::string tma_bias;
    };
    mutable api::TunedBuckets<Tuned> tuned;
    std::shared_ptr<const Tuned> tuned_for(const LaunchArgs& args, Stream stream) const;
    Tuned tune(const LaunchArgs& args, Stream stream, const std::string& bucket) const;

    // Launches `k` (the forward of kernel_spec, not a latent projection's) on checked args.
    void launch(const api::PreparedKernel& k, const std::string& bias, const LaunchArgs& args, Stream stream) const;
};

void Attention::Impl::launch(const api::PreparedKernel& k, const std::string& bias, const LaunchArgs& args,
                             Stream stream) const {
    if (k.config.mainloop != MainloopKind::sm90) {
        k.launch(api::forward_grid(k.config, args), api::forward_params(k, spec, args), stream);
        return;
    }
    std::optional<ForwardTmaMaps> maps;
    if (const auto why = api::why_not_tma_readable(args, bias)) {
        user_check(!sm90_forced) << "CompileOptions.mainloop = sm90: " << *why
                                 << "; pass the tensor without the broadcast, or leave mainloop unset "
                                    "(such calls then run on the sm80 loop)";
    } else if (sm90_forced) {
        maps = api::forward_tma_maps(k.config, args, bias);
    } else {
        try {  // a layout the driver refuses all the same also runs on the sm80 kernel
            maps = api::forward_tma_maps(k.config, args, bias);
        } catch (const UserError& e) {
            debug(1) << "sm90 forward: " << e.what() << "; running the sm80 kernel";
        }
    }
    if (!maps) {
        const api::PreparedKernel& f = sm80_kernel();
        f.launch(api::forward_grid(f.config, args), api::forward_params(f, spec, args), stream);
        return;
    }
    api::launch_sm90_forward(k, spec, args, *maps, work_counters, sm_count, stream);
}

std::shared_ptr<const Attention::Impl::Tuned> Attention::Impl::tuned_for(const LaunchArgs& args, Stream stream) const {
    // Calls the sm90 kernels cannot read (a broadcast Q, K, V or bias) run on sm80 kernels
    // whatever is chosen: they are a bucket of their own.
    const std::string bucket = api::shape_bucket(args.q.shape[2], args.k.shape[2]) +
                               (api::why_not_tma_readable(args, tma_bias) ? "_sm80" : "");
    return tuned.choice(
        bucket, stream, "Attention", [&] { return std::make_shared<const Tuned>(tune(args, stream, bucket)); },
        [&] { return std::make_shared<const Tuned>(Tuned{kernel, tma_bias}); });
}

Attention::Impl::Tuned Attention::Impl::tune(const LaunchArgs& args, Stream stream, const std::string& bucket) const {
    const auto start = std::chrono::steady_clock::now();
    const runtime::DeviceInfo& device = runtime::current_device();
    auto prepare = [&](const KernelConfig& c, const api::Target& t) {
        api::PreparedKernel k =
            api::prepare_kernel(kernel_spec, kernel_inputs, KernelKind::forward, t, c.tile, {}, c.mainloop);
        k.config.schedule = c.schedule;  // chosen at launch: the same compiled kernel
        return k;
    };
    auto tuned_of = [&](api::PreparedKernel k) {
        std::string bias = api::tma_bias_tensor(k.config, kernel_spec);
        return Tuned{std::move(k), std::move(bias)};
    };
    const std::vector<KernelConfig> candidates = api::forward_candidates(kernel_spec, arch);
    std::optional<Tuned> recorded;
    if (api::take_recorded_choice(kernel_spec, api::tuning_kind(KernelKind::forward), device.name, arch, bucket, candidates, "forward",
                                  [&](const KernelConfig& c) { recorded = tuned_of(prepare(c, target)); }))
        return std::move(*recorded);
    const runtime::TuningKey key = api::forward_tuning_key(kernel_spec, device.name, arch,
                                                           runtime::KernelCache::global().toolchain(), candidates);
    // Loaded here, in this thread's context, after every candidate compiled at once.
    const api::Target compile_only{arch, false};
    const std::vector<char> compiled =
        api::compile_at_once(candidates, [&](size_t i) { prepare(candidates[i], compile_only); });
    const bool tma_readable = !api::why_not_tma_readable(args, tma_bias);
    std::vector<std::optional<Tuned>> kernels(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
        // An sm90 candidate on a call its bulk copies cannot read would time the sm80 fallback.
        if (!compiled[i] || (candidates[i].mainloop == MainloopKind::sm90 && !tma_readable)) continue;
        try {
            kernels[i] = tuned_of(prepare(candidates[i], target));
        } catch (const std::exception& e) {
            debug(1) << "autotune: " << candidates[i] << " does not load: " << e.what();
        }
    }
    const auto timing = api::lock_timing();
    // Scratch outputs of the call's shapes: the caller's are never written.
    const auto cu_stream = static_cast<CUstream>(stream);
    const size_t esize = static_cast<size_t>(dtype_size(spec.dtype()));
    const runtime::StreamBuffer o(static_cast<size_t>(args.o.numel()) * esize, cu_stream);
    const runtime::StreamBuffer lse(args.lse ? static_cast<size_t>(args.lse->numel()) * sizeof(float) : 0, cu_stream);
    LaunchArgs scratch = args;
    scratch.o = TensorView::contiguous(o.data(), args.o.dtype, args.o.shape);
    if (args.lse) scratch.lse = TensorView::contiguous(lse.data(), DType::f32, args.lse->shape);
    std::vector<double> medians;
    const size_t best = api::time_candidates(
        candidates.size(),
        [&](size_t i) {
            if (!kernels[i]) return false;
            launch(kernels[i]->kernel, kernels[i]->tma_bias, scratch, stream);
            return true;
        },
        stream, medians);
    // Then the fastest tile's schedules: the same kernel, launched otherwise (nothing compiled).
    const std::vector<KernelConfig> schedules = api::schedule_variants(candidates[best]);
    std::vector<Tuned> scheduled(schedules.size(), *kernels[best]);
    for (size_t i = 0; i < schedules.size(); ++i) scheduled[i].kernel.config.schedule = schedules[i].schedule;
    std::vector<double> schedule_medians{medians[best]};
    const size_t best_schedule = schedules.size() < 2 ? 0
                                                      : api::time_candidates(
                                                            schedules.size(),
                                                            [&](size_t i) {
                                                                launch(scheduled[i].kernel, scheduled[i].tma_bias,
                                                                       scratch, stream);
                                                                return true;
                                                            },
                                                            stream, schedule_medians);
    std::ostringstream what;
    what << spec;
    api::record_tuning(key, bucket, schedules[best_schedule],
                       api::scheduled_seconds(medians[best], schedule_medians, best_schedule), medians[0],
                       candidates.size() + schedules.size() - 1, start, what.str());
    return std::move(scheduled[best_schedule]);
}

Attention::Attention(const AttentionSpec& spec, const CompileOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->inputs = spec_inputs(spec);  // validates
    impl_->spec = spec;
    const api::Target target = api::resolve_target(options);
    impl_->arch = target.arch;
    impl_->target = target;
    impl_->sm90_forced = options.mainloop == MainloopKind::sm90;
    if (target.on_device) impl_->sm_count = runtime::current_device().sm_count;
    const bool per_head = spec.has_latent() && spec.has_reciprocal_band() && latent_col_split(spec.latent_dim()) > 1;
    if (per_head)
        user_check(spec.dtype() != DType::f32)
            << "AttentionSpec.latent(" << spec.latent_dim() << ", ...) with a reciprocal band: the latent projection "
            << "runs for f16 or bf16; use one of them";
    impl_->kernel_spec = per_head ? api::latent_head_spec(spec) : spec;
    impl_->kernel_inputs = per_head ? spec_inputs(impl_->kernel_spec) : impl_->inputs;
    if (options.schedule) {  // checked before anything compiles
        KernelConfig pinned = codegen::make_config(impl_->kernel_spec, KernelKind::forward, target.arch, options.tile,
                                                   options.mainloop);
        pinned.schedule = *options.schedule;
        codegen::check_schedule(pinned, "CompileOptions.schedule");
    }
    impl_->kernel =
        api::prepare_kernel(impl_->kernel_spec, impl_->kernel_inputs, KernelKind::forward, target, options.tile, {},
                            options.mainloop);
    if (options.schedule) impl_->kernel.config.schedule = *options.schedule;  // chosen at launch
    if (per_head) impl_->latent_gemm = api::prepare_latent_gemm(spec, target);
    impl_->tma_bias = api::tma_bias_tensor(impl_->kernel.config, impl_->kernel_spec);
    impl_->autotune = api::autotune_asked(options) && !options.tile && !options.mainloop && !options.schedule &&
                      !per_head && target.on_device;
    debug(1) << "Attention ready: " << spec << " -> " << *impl_->kernel.compiled;
}

Attention::~Attention() = default;
Attention::Attention(Attention&&) noexcept = default;
Attention& Attention::operator=(Attention&&) noexcept = default;

void Attention::operator()(const LaunchArgs& args, Stream stream) const {
    check_launch_args(impl_->spec, impl_->inputs, args);
    const api::PreparedKernel& k = impl_->kernel;
    user_check(k.loaded && (!impl_->latent_gemm || impl_->latent_gemm->loaded)) << "this Attention was compiled for " << impl_->arch
                         << " only (CompileOptions.arch, or no usable GPU at construction), so it cannot "
                            "launch; construct it without CompileOptions.arch where the GPU is";
    if (args.q.shape[0] == 0 || args.q.shape[2] == 0) return;  // empty problem: nothing to do
    if (!impl_->latent_gemm) {
        if (impl_->autotune)
            if (const auto t = impl_->tuned_for(args, stream)) return impl_->launch(t->kernel, t->tma_bias, args, stream);
        impl_->launch(k, impl_->tma_bias, args, stream);
        return;
    }
    // K_h [B, Hq, Nk, D] and V_h [B, Hq, Nk, Dv] for the call (at least a little: no null view).
    const api::LatentShape s(args);
    const size_t esize = static_cast<size_t>(dtype_size(impl_->spec.dtype()));
    const runtime::StreamBuffer workspace(std::max<size_t>(static_cast<size_t>(s.k_elems() + s.v_elems()) * esize, 256),
                                          static_cast<CUstream>(stream));
    void* k_h = workspace.data();
    void* v_h = static_cast<char*>(workspace.data()) + static_cast<size_t>(s.k_elems()) * esize;
    api::project_latent_kv(*impl_->latent_gemm, impl_->spec, args, k_h, v_h, stream);
    const LaunchArgs heads = api::latent_head_args(impl_->spec, args, k_h, v_h);
    k.launch(api::forward_grid(k.config, heads), api::forward_params(k, impl_->kernel_spec, heads), stream);
}

const AttentionSpec& Attention::spec() const { return impl_->spec; }

const codegen::KernelSource& Attention::source() const {
    std::call_once(impl_->source_once, [this] { impl_->source = impl_->kernel.source(impl_->kernel_spec, impl_->kernel_inputs); });
    return *impl_->source;
}

const std::string& Attention::arch() const { return impl_->arch; }
double Attention::compile_seconds() const {
    return impl_->kernel.compile_seconds + (impl_->latent_gemm ? impl_->latent_gemm->compile_seconds : 0.0);
}
bool Attention::can_launch() const {
    return impl_->kernel.loaded != nullptr && (!impl_->latent_gemm || impl_->latent_gemm->loaded != nullptr);
}
const TileConfig& Attention::tile() const { return impl_->kernel.config.tile; }
const KernelConfig& Attention::config() const { return impl_->kernel.config; }

std::ostream& operator<<(std::ostream& os, const Attention& a) {
    return os << "Attention(" << a.spec() << ", " << a.config() << ", " << a.arch()
              << (a.can_launch() ? ", loaded" : ", compiled only") << ")";
}

}  // namespace attnjit
