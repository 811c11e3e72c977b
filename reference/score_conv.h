// The score convolution of the fp64 reference (SEMANTICS.md section 3, with the mask rule
// of docs/score_convolution.md): one query row's convolved scores.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "codegen/autodiff.h"
#include "dsl/attention_spec.h"
#include "dsl/interpreter.h"
#include "reference/attention_backward.h"
#include "reference/attention_reference.h"
#include "reference/host_tensor.h"

namespace attnjit::reference {

// Row i of head (b, h) (env holds b, h, kv_head): with s = scale * <q, k>,
//   keep0(i', j') = j' <= i' && mask(i', j')       (mask: true without one)
//   S0[i', j']    = s[i', j'] where keep0, else 0 (and 0 outside [0, Nq) x [0, Nk))
//   c[j]          = sum_{a, b} theta[h][a][b] * S0[i', j'] * [mask(i, j') && mask(i', j)],
//                   i' = i - (c_q - 1) + a, j' = j - p_k + b
//   kept[j]       = keep0(i, j);  t[j] = score_mod(c[j]) (c[j] without one), for kept j.
// qb: the head's query rows (Nq x Dqk), kb its keys (Nk x Dqk). Vectors are resized to nk.
void conv_row_scores(const dsl::AttentionSpec& spec, dsl::Env& env, const HostTensor& theta, const double* qb,
                     int64_t i, const double* kb, int64_t nq, int64_t nk, int64_t dqk, std::vector<char>& kept,
                     std::vector<double>& c, std::vector<double>& t);

// The score convolution's backward (conv_row_scores' C, then SEMANTICS.md section 3's
// transposed convolution), for a forward `fwd` of O ungated and its LSE:
//   dT = P (dP - Delta), dC = dT * d score_mod / d s (at C),
//   dS0[i', j'] = sum over the taps (i, j) that read (i', j') of theta[h][a][b] dC[i, j]
//                 * [mask(i, j') && mask(i', j)],
//   dS = dS0 where keep0, dq = scale dS K, dk = scale dS^T Q (summed over a GQA group),
//   dv = P^T dO, d theta[h][a][b] = sum over b, i, j of dC[i, j] S0[i', j'] * (the same [.]),
//   d tensor / d scalar read by score_mod: dT[i, j] * partial at (i, j, score C[i, j]),
//   d sink_h = -sum exp(sink_h - LSE_i) Delta_i.
// d_o: dO of the ungated output, [B, Hq, Nq, Dv]. Fills out.delta, dq, dk, dv and
// out.dtensors / dscalars for the names in `wanted` (the gate's own term is the caller's).
// Workers own (b, kv head) groups; the partial sums are added in worker order.
void conv_backward(const dsl::AttentionSpec& spec, const ForwardInputs& in, const ForwardResult& fwd,
                   const DoubleTensor& d_o, const codegen::ScoreModGradients& grads,
                   const std::set<std::string>& wanted, int threads, BackwardResult& out);

}  // namespace attnjit::reference
