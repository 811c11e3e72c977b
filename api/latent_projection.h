// The latent projection (MLA) in Q's space, shared by the latent backward (api/latent_backward.h)
// and the forward that cannot run fused (RA + MLA over L 256, api/attention.cpp): the spec
// without latent() that runs over K and V projected per head, and latent_gemm's launches
// (templates/attnjit/sm80/latent_gemm.cuh).
#pragma once

#include <cstdint>

#include "api/attention.h"
#include "api/prepared_kernel.h"
#include "attnjit/backward/latent_gemm_args.h"

namespace attnjit::api {

// The sizes of one latent call: q [B, Hq, Nq, D], k [B, 1, Nk, L], o [B, Hq, Nq, Dv].
struct LatentShape {
    int64_t b, hq, nk, d, dv, l;
    explicit LatentShape(const LaunchArgs& fwd)
        : b(fwd.q.shape[0]), hq(fwd.q.shape[1]), nk(fwd.k.shape[2]), d(fwd.q.shape[3]), dv(fwd.o.shape[3]),
          l(fwd.k.shape[3]) {}
    int64_t k_elems() const { return b * hq * nk * d; }   // K_h [B, Hq, Nk, D]
    int64_t v_elems() const { return b * hq * nk * dv; }  // V_h [B, Hq, Nk, Dv]
};

// The spec over projected K and V: no latent projection, the latent spec's scale made
// explicit (its default is 1/sqrt(L), not 1/sqrt(D)), one KV head per query head.
AttentionSpec latent_head_spec(const AttentionSpec& latent);

// What latent_gemm is generated from: the latent spec's dtype and head dims (the kernel
// depends on nothing else), and the kernel for it.
AttentionSpec latent_gemm_spec(const AttentionSpec& latent);
PreparedKernel prepare_latent_gemm(const AttentionSpec& latent, const Target& target);

// One latent_gemm launch: grid (ceil(N / block_n), ceil(M / block_m), z_hi_count * z_lo_count);
// nothing when it is empty.
void launch_latent_gemm(const PreparedKernel& gemm, const LatentGemmArgs& args, int64_t z_hi_count, Stream stream);

// fwd's arguments over k_h, v_h (contiguous [B, Hq, Nk, D] and [B, Hq, Nk, Dv] of the spec's
// dtype) for latent_head_spec: the projections' tensors left out.
LaunchArgs latent_head_args(const AttentionSpec& latent, const LaunchArgs& fwd, void* k_h, void* v_h);

// K_h[b, h] = K_lat[b] W_qlat[h]^T and V_h[b, h] = V_lat[b] W_vup[h] into k_h and v_h.
void project_latent_kv(const PreparedKernel& gemm, const AttentionSpec& latent, const LaunchArgs& fwd, void* k_h,
                       void* v_h, Stream stream);

LatentGemmOperand latent_operand(const void* data, long long z_hi, long long z_lo, long long k_hi, long long k_lo,
                                 long long row, bool k_contiguous);
LatentGemmArgs latent_gemm_args(const LatentGemmOperand& a, const LatentGemmOperand& b, void* c, long long c_z_hi,
                                long long c_z_lo, long long c_row, int64_t m, int64_t n, int64_t k_lo, int64_t k_hi,
                                int64_t z_lo);

}  // namespace attnjit::api
