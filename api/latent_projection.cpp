#include "api/latent_projection.h"

#include "runtime/params_packer.h"
#include "support/error.h"

namespace attnjit::api {

AttentionSpec latent_head_spec(const AttentionSpec& latent) {
    AttentionSpec s = latent;
    s.no_latent().scale(latent.scale_or_default()).heads(latent.q_heads(), latent.q_heads());
    return s;
}

AttentionSpec latent_gemm_spec(const AttentionSpec& latent) {
    return AttentionSpec().dtype(latent.dtype()).head_dims(latent.head_dim_qk(), latent.head_dim_v());
}

PreparedKernel prepare_latent_gemm(const AttentionSpec& latent, const Target& target) {
    const AttentionSpec s = latent_gemm_spec(latent);
    return prepare_kernel(s, spec_inputs(s), KernelKind::latent_gemm, target, std::nullopt);
}

void launch_latent_gemm(const PreparedKernel& gemm, const LatentGemmArgs& a, int64_t z_hi_count, Stream stream) {
    const TileConfig& t = gemm.config.tile;
    const int64_t gx = (a.n + t.block_n - 1) / t.block_n, gy = (a.m + t.block_m - 1) / t.block_m,
                  gz = z_hi_count * a.z_lo_count;
    if (gx == 0 || gy == 0 || gz == 0) return;
    internal_check(gy <= 65535 && gz <= 65535) << "latent_gemm grid (" << gx << ", " << gy << ", " << gz
                                               << ") over the CUDA limits";
    gemm.launch(runtime::Dim3{static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)},
                runtime::pack_params(gemm.layout, &a, sizeof a, {}, {}), stream);
}

LaunchArgs latent_head_args(const AttentionSpec& latent, const LaunchArgs& fwd, void* k_h, void* v_h) {
    const LatentShape s(fwd);
    LaunchArgs h = fwd;
    h.k = TensorView::contiguous(k_h, latent.dtype(), {s.b, s.hq, s.nk, s.d});
    h.v = TensorView::contiguous(v_h, latent.dtype(), {s.b, s.hq, s.nk, s.dv});
    h.tensors.erase(latent.latent_w_qlat());
    h.tensors.erase(latent.latent_w_vup());
    return h;
}

void project_latent_kv(const PreparedKernel& gemm, const AttentionSpec& latent, const LaunchArgs& fwd, void* k_h,
                       void* v_h, Stream stream) {
    const LatentShape s(fwd);
    const auto &ks = fwd.k.strides, &vs = fwd.v.strides;
    const TensorView& wq = fwd.tensors.at(latent.latent_w_qlat());
    const TensorView& wv = fwd.tensors.at(latent.latent_w_vup());
    const long long hk = s.nk * s.d, hv = s.nk * s.dv;  // one head of K_h, V_h
    // z = (b, h): K_lat[b] [Nk x L] times W_qlat[h]^T (k-contiguous), V_lat[b] times W_vup[h].
    launch_latent_gemm(gemm,
                       latent_gemm_args(latent_operand(fwd.k.data, ks[0], 0, 0, 1, ks[2], true),
                                        latent_operand(wq.data, 0, wq.strides[0], 0, 1, wq.strides[1], true), k_h,
                                        s.hq * hk, hk, s.d, s.nk, s.d, s.l, 1, s.hq),
                       s.b, stream);
    launch_latent_gemm(gemm,
                       latent_gemm_args(latent_operand(fwd.v.data, vs[0], 0, 0, 1, vs[2], true),
                                        latent_operand(wv.data, 0, wv.strides[0], 0, wv.strides[1], 1, false), v_h,
                                        s.hq * hv, hv, s.dv, s.nk, s.dv, s.l, 1, s.hq),
                       s.b, stream);
}

LatentGemmOperand latent_operand(const void* data, long long z_hi, long long z_lo, long long k_hi, long long k_lo,
                                 long long row, bool k_contiguous) {
    return LatentGemmOperand{data, z_hi, z_lo, k_hi, k_lo, row, k_contiguous ? 1 : 0};
}

LatentGemmArgs latent_gemm_args(const LatentGemmOperand& a, const LatentGemmOperand& b, void* c, long long c_z_hi,
                                long long c_z_lo, long long c_row, int64_t m, int64_t n, int64_t k_lo, int64_t k_hi,
                                int64_t z_lo) {
    return LatentGemmArgs{a,   b, c, c_z_hi, c_z_lo, c_row, static_cast<int>(m), static_cast<int>(n),
                          static_cast<int>(k_lo), static_cast<int>(k_hi), static_cast<int>(z_lo)};
}

}  // namespace attnjit::api
