// The latent projection of the fp64 references (MLA, SEMANTICS.md section 4). Per query head
// h, Q_lat = Q_h w_qlat[h] before the scores and O_h = O_lat w_vup[h] after the softmax; the
// attention between them is the plain one at width L (K and V are the latent tensors). Both
// projections are the same per-head product, computed in double from the stored values and
// never rounded, and the backward is its two transposes.
#pragma once

#include "dsl/attention_spec.h"
#include "reference/attention_reference.h"
#include "reference/host_tensor.h"

namespace attnjit::reference {

// UserError (starting with `who`) unless k and v are the latent [B, 1, Nk, L] (checked before
// the heads are compared, which would blame a second KV head less clearly).
void check_latent_kv(const char* who, const dsl::AttentionSpec& spec, const ForwardInputs& in);
// UserError unless the spec's w_qlat and w_vup are [Hq, Dqk, L] and [Hq, L, Dv], Dv the spec's
// head_dim_v (the output's); their presence, dtype and rank are checked with every captured
// tensor's, before.
void check_latent_weights(const char* who, const dsl::AttentionSpec& spec, const ForwardInputs& in);

// y[b, h] = x[b, h] w[h]: x [B, Hq, N, Din], w [Hq, Din, Dout], y [B, Hq, N, Dout].
// Q_lat = project(Q, w_qlat); O = project(O_lat, w_vup).
DoubleTensor project(const DoubleTensor& x, const HostTensor& w, int threads = 0);

// The backward of project: returns dx[b, h] = dy[b, h] w[h]^T and, when dw is given, adds
// sum_b x[b, h]^T dy[b, h] to (*dw)[h] (dw in w's shape). The sums run in a fixed order
// whatever the thread count.
DoubleTensor project_backward(const DoubleTensor& x, const HostTensor& w, const DoubleTensor& dy, DoubleTensor* dw,
                              int threads = 0);

}  // namespace attnjit::reference
