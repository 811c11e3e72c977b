// The fp64 CPU reference of the backward (SEMANTICS.md section 2): what every backward
// kernel is compared with. Recomputes the forward per row exactly, then
//
//   Delta_i = sum_d dO_id O_id
//   dP_ij   = <dO_i, v_j>,   dT_ij = P_ij (dP_ij - Delta_i)       (kept j with finite t_ij)
//   dS_ij   = dT_ij * d score_mod / d s (s_ij)
//   dV_j   += P_ij dO_i,     dQ_i += scale dS_ij k_j,   dK_j += scale dS_ij q_i
//   d tensor[e] += dT_ij * d score_mod / d read, for every read of element e
//   d scalar    += dT_ij * d score_mod / d scalar
//   d sink_h    -= exp(sink_h - LSE_i) Delta_i   (attention sinks, when the sinks tensor is wanted;
//                                                 its score_mod reads, if any, add as above)
//
// with the derivatives from codegen/autodiff.h (itself checked against finite
// differences), evaluated by the interpreter. An output gate (reference/gate.h) turns dO
// into dO * sigmoid(gate) for the ungated O, with d gate = dO O sigmoid (1 - sigmoid)
// (summed over a broadcast dimension of extent 1). A score convolution (spec.score_conv)
// runs reference/score_conv.h's conv_backward instead: dS0 is the transposed convolution
// of dC = dT * d score_mod / d s (at C), d theta the taps' sum of dC * S0, and score_mod's
// captured tensors and scalars take dT at C's position, as above. dK and dV sum over the
// query heads of a group (GQA). A reciprocal band (T_ij = s_ij + alpha_h band(i, j) s_ji)
// adds dQ_j += scale alpha_h dS_ij k_i, dK_i += scale alpha_h dS_ij q_j and d alpha_h +=
// dS_ij s_ji over the band. A latent projection (spec.latent(L, w_qlat, w_vup),
// reference/latent.h; W_q = tensors[w_qlat], W_v = tensors[w_vup]) wraps all of the above at
// width L, on Q_lat = q W_q[h] and O_lat: with dO of the ungated output (after the gate's
// backward), dO_lat = dO W_v[h]^T and d W_v[h] += O_lat^T dO go in, and its dQ_lat gives
// dq = dQ_lat W_q[h]^T and d W_q[h] += q^T dQ_lat; dk and dv are the latent K's and V's,
// [B, 1, Nk, L] (Delta is the same either side of W_v). A row with no kept key has zero
// gradients. Accumulation is in a fixed order for a given thread count (per-worker partials
// summed in worker order).
//
//   reference::BackwardResult g = reference::backward(spec, in, d_o, {"bias", "cap"});
//   g.dq, g.dk, g.dv, g.dtensors.at("bias"), g.dscalars.at("cap")
#pragma once

#include <map>
#include <set>
#include <string>

#include "reference/attention_reference.h"

namespace attnjit::reference {

struct BackwardResult {
    ForwardResult forward;  // o and lse, as reference::forward gives them
    DoubleTensor delta;     // [B, Hq, Nq]
    DoubleTensor dq;        // [B, Hq, Nq, Dqk]
    DoubleTensor dk;        // [B, Hkv, Nk, Dqk] (k's shape: [B, 1, Nk, L] with a latent projection)
    DoubleTensor dv;        // [B, Hkv, Nk, Dv]  (v's shape)
    // Per captured tensor asked for: its gradient in the tensor's logical shape, where a
    // broadcast dimension (extent 1, stride 0) holds the sum over every index read through it.
    std::map<std::string, DoubleTensor> dtensors;
    std::map<std::string, double> dscalars;  // per runtime scalar asked for
};

// d_o: [B, Hq, Nq, Dv] of the spec's dtype. `wanted`: captured tensors and runtime
// scalars that need a gradient (UserError for one that has none, codegen/autodiff.h).
// Input errors as reference::forward's.
BackwardResult backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const HostTensor& d_o,
                        const std::set<std::string>& wanted = {}, int threads = 0);

}  // namespace attnjit::reference
