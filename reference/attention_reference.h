// The fp64 CPU reference of SEMANTICS.md section 1: what every forward kernel is
// compared with. Slow and obviously right: scores in double from the dtype-rounded
// inputs, score_mod and mask through the DSL interpreter, an exact two-pass softmax.
//
//   reference::ForwardInputs in{q, k, v};      // HostTensors [B,Hq,Nq,D] [B,Hkv,Nk,D] ...
//   in.tensors.emplace("bias", bias);  in.scalars["cap"] = 30;
//   auto ref = reference::forward(spec, in);   // ref.o [B,Hq,Nq,Dv], ref.lse [B,Hq,Nq]
//   auto cmp = reference::compare(o_from_gpu, ref.o, reference::output_tolerance(dtype));
//   EXPECT_TRUE(cmp.ok) << cmp.report;
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/attention_spec.h"
#include "reference/host_tensor.h"
#include "reference/tolerance.h"

namespace attnjit::reference {

// A contiguous double tensor (reference outputs).
struct DoubleTensor {
    std::vector<int64_t> shape;
    std::vector<double> data;

    DoubleTensor() = default;
    explicit DoubleTensor(std::vector<int64_t> s);
    int64_t numel() const { return static_cast<int64_t>(data.size()); }
    int64_t offset_of(const int64_t* index) const;
    double& at(std::initializer_list<int64_t> index) { return data[offset_of(index.begin())]; }
    double at(std::initializer_list<int64_t> index) const { return data[offset_of(index.begin())]; }
};

struct ForwardInputs {
    HostTensor q;  // [B, Hq, Nq, Dqk]
    HostTensor k;  // [B, Hkv, Nk, Dqk]; [B, 1, Nk, L] with a latent projection
    HostTensor v;  // [B, Hkv, Nk, Dv];  [B, 1, Nk, L] with a latent projection
    std::map<std::string, HostTensor> tensors;  // captured tensors, by name
    std::map<std::string, double> scalars;      // runtime scalars, by name
};

struct ForwardResult {
    DoubleTensor o;    // [B, Hq, Nq, Dv]
    DoubleTensor lse;  // [B, Hq, Nq], natural log; -inf for a row with no kept key
};

// Validates the spec and the inputs (UserError naming the argument on a mismatch: dtype,
// rank, head dims, heads, K/V lengths, a missing or extra captured tensor or scalar, a
// captured tensor of the wrong dtype or rank, an index out of its bounds).
//
// Definition (SEMANTICS.md section 1), per (b, h, i), kv_head = h / (Hq / Hkv):
//   keep_j = mask(b, h, i, j)                    (true without a mask)
//   s_j    = scale * <q_i, k_j>                   (only for kept j)
//   t_j    = score_mod(s_j, b, h, i, j)           (s_j without a score_mod)
//   kept j with t_j = -inf contribute nothing; if nothing is left (no kept key, or all
//   kept t_j = -inf) then O_i = 0 and LSE_i = -inf;
//   else LSE_i = m + log(sum_j exp(t_j - m)) with m = max t_j, O_i = sum_j exp(t_j - LSE_i) v_j.
// With attention sinks (spec.sinks(name)), sink = tensors[name][h] joins the denominator:
//   m = max(sink, max t_j), LSE_i = m + log(exp(sink - m) + sum_j exp(t_j - m)), O_i as above;
//   a row with nothing left gets O_i = 0 and LSE_i = sink. A sink of -inf is no sink; NaN
//   or +inf gives NaN.
// With an output gate (spec.gate(name), reference/gate.h): O_i is multiplied elementwise by
//   sigmoid(tensors[name][b][h][i][d]); LSE is the ungated softmax's. The gate is
//   [B, Hq, Nq, Dv]; a dimension of extent 1 and stride 0 broadcasts.
// With a score convolution (spec.score_conv(name, c_q, c_k), reference/score_conv.h),
//   theta = tensors[name] [Hq, c_q, c_k], p_k = (c_k - 1) / 2, per (b, h), on absolute
//   positions (top-left causal, Nq != Nk allowed):
//     keep0(i, j) = j <= i && mask(i, j)
//     S0[i', j']  = s_i'j' where keep0, else 0 (and 0 outside [0, Nq) x [0, Nk))
//     C[i, j]     = sum_{a < c_q, b < c_k} theta[h][a][b] S0[i', j'] [mask(i, j') && mask(i', j)],
//                   i' = i - (c_q - 1) + a, j' = j - p_k + b
//   and the row is the one above with keep_j = keep0(i, j) and t_j = score_mod(C[i, j]).
//   The [.] keeps every tap inside the mask (a document mask: per document, zero padding).
// With a reciprocal band (spec.reciprocal_band(W, alpha, causal), reference/reciprocal_band.h),
//   Nq == Nk, alpha_h = tensors[alpha][h]: s_ij is replaced by
//   s_ij + alpha_h [band(i, j)] scale <q_j, k_i> before score_mod, band 0 <= i - j <= W and
//   keep_j &= j <= i (causal), or |i - j| <= W (non-causal).
// With a latent projection (spec.latent(L, w_qlat, w_vup), MLA, reference/latent.h), k and
//   v are the latent [B, 1, Nk, L], W_q = tensors[w_qlat] [Hq, Dqk, L], W_v = tensors[w_vup]
//   [Hq, L, Dv], and per (b, h) the row above runs on Q_lat = q W_q[h] (in double, never
//   rounded) in place of q, at width L (scale defaults to 1/sqrt(L); a reciprocal band's s_ji
//   is scale <Q_lat_j, k_i>), giving O_lat; then O_i = O_lat_i W_v[h] before the gate. LSE is
//   the softmax's.
// A score_mod giving +inf or NaN yields NaN (a kernel would too).
// Rows are split over `threads` threads (0: std::thread::hardware_concurrency()).
ForwardResult forward(const dsl::AttentionSpec& spec, const ForwardInputs& in, int threads = 0);

// ---- comparison ----------------------------------------------------------------------

struct Comparison {
    bool ok = true;
    double max_abs_error = 0;  // over finite pairs
    double max_rel_error = 0;  // |a - e| / max(|e|, kRelativeErrorFloor)
    int64_t checked = 0;
    int64_t failures = 0;      // elements outside atol + rtol * |e|, or mismatched infinities
    int64_t nans = 0;          // NaN in actual (excluding poison) or in expected
    int64_t poisoned = 0;      // elements never written (still the poison pattern)
    std::string report;        // empty when ok; else counts and the first failing elements
};

// actual: what a kernel wrote (any strides); expected: the reference. Shapes must match.
Comparison compare(const HostTensor& actual, const DoubleTensor& expected, Tolerance tol);
// Both in double (e.g. two references).
Comparison compare(const DoubleTensor& actual, const DoubleTensor& expected, Tolerance tol);

// Largest |a - e| over elements where both are finite (infinities must agree exactly,
// else the result is +inf); NaN anywhere gives NaN.
double max_abs_error(const DoubleTensor& actual, const DoubleTensor& expected);
double max_rel_error(const DoubleTensor& actual, const DoubleTensor& expected,
                     double floor = kRelativeErrorFloor);
// A HostTensor's values as a contiguous DoubleTensor.
DoubleTensor to_double(const HostTensor& t);

}  // namespace attnjit::reference
