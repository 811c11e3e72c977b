// The score convolution of the fp64 reference (SEMANTICS.md section 3, with the mask rule
// of docs/score_convolution.md): one query row's convolved scores.
#pragma once

#include <cstdint>
#include <vector>

#include "dsl/attention_spec.h"
#include "dsl/interpreter.h"
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

}  // namespace attnjit::reference
