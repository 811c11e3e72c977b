// The reciprocal band of the fp64 reference (RA, SEMANTICS.md section 4): one query row's
// scores with the transposed score added inside the band.
#pragma once

#include <cstdint>
#include <vector>

#include "dsl/attention_spec.h"
#include "dsl/interpreter.h"

namespace attnjit::reference {

// Whether (i, j) is inside the band of spec.reciprocal_band(W, alpha, causal):
// 0 <= i - j <= W (causal) or |i - j| <= W.
bool in_reciprocal_band(const dsl::AttentionSpec& spec, int64_t i, int64_t j);

// Row i of head (b, h) (env holds b, h, kv_head), Nq == Nk, with s_ij = scale * <q_i, k_j>:
//   kept[j] = mask(i, j) && (j <= i when the band is causal)
//   r[j]    = s_ij + alpha * [band(i, j)] * s_ji    (s_ji = scale * <q_j, k_i>)
//   t[j]    = score_mod(r[j]) (r[j] without one), for kept j.
// qb: the head's query rows (Nq x Dqk), kb its keys (Nk x Dqk). Vectors are resized to n.
void band_row_scores(const dsl::AttentionSpec& spec, dsl::Env& env, double alpha, const double* qb, int64_t i,
                     const double* kb, int64_t n, int64_t dqk, std::vector<char>& kept, std::vector<double>& r,
                     std::vector<double>& t);

}  // namespace attnjit::reference
