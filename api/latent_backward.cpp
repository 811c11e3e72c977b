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

// The folds of the per-head gradients (latent_gemm products; dK_h, dV_h [B, Hq, Nk, D or
// Dv] contiguous in the workspace):
// dK_lat[b] = sum_h dK_h[b, h] W_qlat[h], a sum over k = (h, d).
void fold_latent_k_grad(const PreparedKernel& gemm, const LatentShape& s, const void* dk_h, const TensorView& wq,
                        const TensorView& dk, Stream stream) {
    const long long hk = s.nk * s.d;  // one head of dK_h
    launch_latent_gemm(gemm,
                       latent_gemm_args(latent_operand(dk_h, s.hq * hk, 0, hk, 1, s.d, true),
                                        latent_operand(wq.data, 0, 0, wq.strides[0], wq.strides[1], 1, false), dk.data,
                                        dk.strides[0], 0, dk.strides[2], s.nk, s.l, s.d, s.hq, 1),
                       s.b, stream);
}

// dV_lat[b] = sum_h dV_h[b, h] W_vup[h]^T, a sum over k = (h, dv).
void fold_latent_v_grad(const PreparedKernel& gemm, const LatentShape& s, const void* dv_h, const TensorView& wv,
                        const TensorView& dv, Stream stream) {
    const long long hv = s.nk * s.dv;  // one head of dV_h
    launch_latent_gemm(gemm,
                       latent_gemm_args(latent_operand(dv_h, s.hq * hv, 0, hv, 1, s.dv, true),
                                        latent_operand(wv.data, 0, 0, wv.strides[0], 1, wv.strides[1], true), dv.data,
                                        dv.strides[0], 0, dv.strides[2], s.nk, s.l, s.dv, s.hq, 1),
                       s.b, stream);
}

// dW_qlat[h] = sum_b dK_h[b, h]^T K_lat[b], a sum over k = (b, key).
void w_qlat_grad(const PreparedKernel& gemm, const LatentShape& s, const void* dk_h, const TensorView& k_lat,
                 const TensorView& dw, Stream stream) {
    const long long hk = s.nk * s.d;
    launch_latent_gemm(gemm,
                       latent_gemm_args(latent_operand(dk_h, 0, hk, s.hq * hk, s.d, 1, false),
                                        latent_operand(k_lat.data, 0, 0, k_lat.strides[0], k_lat.strides[2], 1, false),
                                        dw.data, 0, dw.strides[0], dw.strides[1], s.d, s.l, s.nk, s.b, s.hq),
                       1, stream);
}

// dW_vup[h] = sum_b V_lat[b]^T dV_h[b, h], a sum over k = (b, key).
void w_vup_grad(const PreparedKernel& gemm, const LatentShape& s, const void* dv_h, const TensorView& v_lat,
                const TensorView& dw, Stream stream) {
    const long long hv = s.nk * s.dv;
    launch_latent_gemm(gemm,
                       latent_gemm_args(latent_operand(v_lat.data, 0, 0, v_lat.strides[0], v_lat.strides[2], 1, false),
                                        latent_operand(dv_h, 0, hv, s.hq * hv, s.dv, 1, false), dw.data, 0,
                                        dw.strides[0], dw.strides[1], s.l, s.dv, s.nk, s.b, s.hq),
                       1, stream);
}

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

    const TensorView& wq = fwd.tensors.at(spec_.latent_w_qlat());
    const TensorView& wv = fwd.tensors.at(spec_.latent_w_vup());
    fold_latent_k_grad(gemm_, s, h.dk_h, wq, grads.dk, stream);
    fold_latent_v_grad(gemm_, s, h.dv_h, wv, grads.dv, stream);
    if (auto g = grads.grads.find(spec_.latent_w_qlat()); g != grads.grads.end())
        w_qlat_grad(gemm_, s, h.dk_h, fwd.k, g->second, stream);
    if (auto g = grads.grads.find(spec_.latent_w_vup()); g != grads.grads.end())
        w_vup_grad(gemm_, s, h.dv_h, fwd.v, g->second, stream);
}

}  // namespace attnjit::api
