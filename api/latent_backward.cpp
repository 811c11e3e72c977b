#include "api/latent_backward.h"

#include <algorithm>
#include <cstdint>

#include "api/latent_projection.h"
#include "runtime/stream_buffer.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit::api {

namespace {

CompileOptions without_weights(CompileOptions o, const AttentionSpec& spec) {
    o.grads.erase(spec.latent_w_qlat());
    o.grads.erase(spec.latent_w_vup());
    return o;
}

// A fake device address for views that are only checked (check() before any allocation):
// 1 MiB aligned, distinct per buffer, never dereferenced.
void* unallocated(int slot) { return reinterpret_cast<void*>(static_cast<uintptr_t>(1 + slot) << 20); }

}  // namespace

struct LatentBackward::Heads {
    LaunchArgs fwd;
    GradArgs grads;
    void *k_h, *v_h, *dk_h, *dv_h;
};

LatentBackward::LatentBackward(const AttentionSpec& spec, const CompileOptions& options, const Target& target)
    : spec_(spec) {
    internal_check(spec.has_latent() && spec.returns_lse()) << "LatentBackward of " << spec;
    w_qlat_asked_ = options.grads.count(spec.latent_w_qlat()) > 0;
    w_vup_asked_ = options.grads.count(spec.latent_w_vup()) > 0;
    CompileOptions head_options = without_weights(options, spec);
    head_options.arch = target.arch;
    heads_ = std::make_unique<AttentionBackward>(latent_head_spec(spec), head_options);
    gemm_ = prepare_latent_gemm(spec, target);
    debug(1) << "LatentBackward: " << spec << " -> " << *gemm_.compiled;
}

size_t LatentBackward::workspace_bytes(const AttentionSpec& spec, const LaunchArgs& fwd) {
    const LatentShape s(fwd);
    return static_cast<size_t>(2 * (s.k_elems() + s.v_elems())) * static_cast<size_t>(dtype_size(spec.dtype()));
}

LatentBackward::Heads LatentBackward::head_args(const LaunchArgs& fwd, const GradArgs& grads, void* workspace) const {
    const LatentShape s(fwd);
    const size_t esize = static_cast<size_t>(dtype_size(spec_.dtype()));
    auto at = [&](int slot, int64_t offset_elems) {
        return workspace ? static_cast<void*>(static_cast<char*>(workspace) + static_cast<size_t>(offset_elems) * esize)
                         : unallocated(slot);
    };
    Heads h;
    h.k_h = at(0, 0);
    h.dk_h = at(1, s.k_elems());
    h.v_h = at(2, 2 * s.k_elems());
    h.dv_h = at(3, 2 * s.k_elems() + s.v_elems());
    h.fwd = latent_head_args(spec_, fwd, h.k_h, h.v_h);
    h.grads = grads;
    h.grads.dk = TensorView::contiguous(h.dk_h, spec_.dtype(), {s.b, s.hq, s.nk, s.d});
    h.grads.dv = TensorView::contiguous(h.dv_h, spec_.dtype(), {s.b, s.hq, s.nk, s.dv});
    h.grads.grads.erase(spec_.latent_w_qlat());
    h.grads.grads.erase(spec_.latent_w_vup());
    return h;
}

void LatentBackward::check(const LaunchArgs& fwd, const GradArgs& grads) const {
    check_launch_args(spec_, fwd);
    check_grad_args(spec_, fwd, grads);
    for (const auto& [asked, name] : {std::pair{w_qlat_asked_, spec_.latent_w_qlat()}, std::pair{w_vup_asked_, spec_.latent_w_vup()}})
        user_check(!asked || grads.grads.count(name))
            << "the gradient of the latent projection's weight '" << name << "' is missing: GradArgs::grads[\"" << name
            << "\"] must be given (CompileOptions.grads names it)";
    const Heads h = head_args(fwd, grads, nullptr);
    heads_->check_args(h.fwd, h.grads);
}

void LatentBackward::run(const LaunchArgs& fwd, const GradArgs& grads, Stream stream) const {
    check(fwd, grads);
    user_check(heads_->can_launch() && gemm_.loaded)
        << "this AttentionBackward was compiled for another arch (CompileOptions.arch, or no usable GPU at "
           "construction), so it cannot launch; construct it without CompileOptions.arch where the GPU is";
    const LatentShape s(fwd);
    // At least a little, so that no view is null when B, Hq or Nk is 0.
    const runtime::StreamBuffer workspace(std::max<size_t>(workspace_bytes(spec_, fwd), 256),
                                          static_cast<CUstream>(stream));
    const Heads h = head_args(fwd, grads, workspace.data());
    project_latent_kv(gemm_, spec_, fwd, h.k_h, h.v_h, stream);  // K_h, V_h
    (*heads_)(h.fwd, h.grads, stream);  // dq, dK_h, dV_h

    // dK_lat[b] = sum_h dK_h[b, h] W_qlat[h], dV_lat[b] = sum_h dV_h[b, h] W_vup[h]^T: k = (h, d).
    const auto &ks = fwd.k.strides, &vs = fwd.v.strides, &dks = grads.dk.strides, &dvs = grads.dv.strides;
    const TensorView& wq = fwd.tensors.at(spec_.latent_w_qlat());
    const TensorView& wv = fwd.tensors.at(spec_.latent_w_vup());
    const long long hk = s.nk * s.d, hv = s.nk * s.dv;  // one head of dK_h, dV_h
    auto launch = [&](const LatentGemmArgs& a, int64_t z_hi_count) { launch_latent_gemm(gemm_, a, z_hi_count, stream); };
    auto args = latent_gemm_args;
    auto operand = latent_operand;
    launch(args(operand(h.dk_h, s.hq * hk, 0, hk, 1, s.d, true), operand(wq.data, 0, 0, wq.strides[0], wq.strides[1], 1, false),
                grads.dk.data, dks[0], 0, dks[2], s.nk, s.l, s.d, s.hq, 1),
           s.b);
    launch(args(operand(h.dv_h, s.hq * hv, 0, hv, 1, s.dv, true), operand(wv.data, 0, 0, wv.strides[0], 1, wv.strides[1], true),
                grads.dv.data, dvs[0], 0, dvs[2], s.nk, s.l, s.dv, s.hq, 1),
           s.b);
    // dW_qlat[h] = sum_b dK_h[b, h]^T K_lat[b], dW_vup[h] = sum_b V_lat[b]^T dV_h[b, h]: k = (b, key).
    if (auto g = grads.grads.find(spec_.latent_w_qlat()); g != grads.grads.end())
        launch(args(operand(h.dk_h, 0, hk, s.hq * hk, s.d, 1, false), operand(fwd.k.data, 0, 0, ks[0], ks[2], 1, false),
                    g->second.data, 0, g->second.strides[0], g->second.strides[1], s.d, s.l, s.nk, s.b, s.hq),
               1);
    if (auto g = grads.grads.find(spec_.latent_w_vup()); g != grads.grads.end())
        launch(args(operand(fwd.v.data, 0, 0, vs[0], vs[2], 1, false), operand(h.dv_h, 0, hv, s.hq * hv, s.dv, 1, false),
                    g->second.data, 0, g->second.strides[0], g->second.strides[1], s.l, s.dv, s.nk, s.b, s.hq),
               1);
}

}  // namespace attnjit::api
