// The backward of a latent projection (MLA, SEMANTICS.md section 4; AttentionBackward runs
// it for a spec with latent()). The forward attends in the latent space (Q_lat = Q W_qlat[h]
// against the shared K_lat); the backward works per head in Q's and O's space instead, where
// the score matrix's products cost D / L of the latent ones (a quarter at D 128, L 512):
//
//   K_h = K_lat W_qlat[h]^T, V_h = V_lat W_vup[h]      (latent_gemm; S = scale Q K_h^T, O = P V_h)
//   dQ, dK_h, dV_h                                      (the backward of the spec without latent(), MHA)
//   dK_lat = sum_h dK_h W_qlat[h]      dW_qlat[h] = sum_b dK_h^T K_lat     (latent_gemm)
//   dV_lat = sum_h dV_h W_vup[h]^T     dW_vup[h]  = sum_b V_lat^T dV_h
//
// Each gradient element is one CTA's fp32 sum in a fixed order: deterministic. K_h, V_h,
// dK_h and dV_h ([B, Hq, Nk, D or Dv], the element type: 2 B Hq Nk (D + Dv) elements) live
// in a stream-ordered workspace for the duration of the call; nothing of size [B, Hq, N, L]
// is formed. K_h is rounded to the element type, as the forward rounds
// Q_lat: the recomputed scores differ from the forward's by that rounding.
//
// The weights' gradients are written when GradArgs::grads has them (by the weights' names;
// naming them in CompileOptions.grads makes them required); dq, dk (= dK_lat, [B, 1, Nk, L])
// and dv always.
#pragma once

#include <memory>
#include <vector>

#include "api/attention_backward.h"
#include "api/prepared_kernel.h"

namespace attnjit::api {

class LatentBackward {
public:
    // spec: validated, with latent() and return_lse(). options as AttentionBackward's.
    LatentBackward(const AttentionSpec& spec, const CompileOptions& options, const Target& target);

    void check(const LaunchArgs& fwd, const GradArgs& grads) const;  // UserError, nothing launched
    void run(const LaunchArgs& fwd, const GradArgs& grads, Stream stream) const;

    // The per-head backward (the spec without latent(), Hkv = Hq) and latent_gemm.
    const AttentionBackward& heads() const { return *heads_; }
    const PreparedKernel& gemm() const { return gemm_; }
    // The workspace a call allocates, in bytes (q: [B, Hq, Nq, D], k: [B, 1, Nk, L]).
    static size_t workspace_bytes(const AttentionSpec& spec, const LaunchArgs& fwd);

private:
    AttentionSpec spec_;  // the latent spec
    std::unique_ptr<AttentionBackward> heads_;
    PreparedKernel gemm_;
    bool w_qlat_asked_ = false, w_vup_asked_ = false;  // CompileOptions.grads names them

    struct Heads;  // the per-head backward's arguments over a workspace
    Heads head_args(const LaunchArgs& fwd, const GradArgs& grads, void* workspace) const;
};

}  // namespace attnjit::api
