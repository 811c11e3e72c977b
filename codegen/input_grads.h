// input_grads: which gradients of captured tensors and runtime scalars the backward
// computes, and how (issue 8 item 4): backward_dq every site but the per-key ones,
// backward_dkdv the per-key sites (lower() splits them). From score_mod_gradients (autodiff.h: every
// read site of a wanted input with its partial d t / d read) and each read's
// GradReductionPlan (grad_reduction.h), the sum each site's contributions need:
//
//   store     an Elementwise read (bias[b][h][i][j], bias[0][h][i][j], bias3[h][i][j]): one
//             element per score element of a (b, h); the thread that owns (i, j) stores
//             dT * partial, directly into the gradient when each element is read exactly
//             once (decided at launch: the read's bare indices cover the tensor, no sum over
//             the batch or heads, no broadcast), else into fp32 planes per summed (b, h)
//             that backward_dkdv sums in plane order (backward/grad_args.h)
//   per CTA   a Uniform read (slopes[h], temp[0], a runtime scalar: no q_idx, no kv_idx):
//             summed over the CTA's elements in a fixed order, one partial per CTA, and the
//             partials summed in a fixed order by the CTA that finishes last
//   table     a Diagonal or Gather read with one varying index (table[h][clamp(j - i, -m,
//             m) + m], t[h][doc[j]], t[j % 8]: one index reads q_idx, kv_idx or a tensor,
//             the others b, h, kv_head or constants): each thread sums its own elements'
//             contributions per element of that index in its own workspace row, in its
//             order; the CTA sums its threads' rows in thread order into one partial per
//             element; the last CTA sums every element's partials in CTA order
//             (backward/grad_args.h GradWork). One table tensor per backward, read once.
//             The workspace is CTAs x threads x the index's extent x 4 bytes: for tables,
//             not for reads whose extent is a sequence length.
//   per query a PerQuery read (q_bias[b][h][i], t[h][i + c]: q_idx, no kv_idx): each
//             backward_dq thread sums its elements of a query row in registers across
//             the key tiles; the threads sharing the row combine in a fixed order and one
//             stores the row's sum per (b, h, i), like a store site (direct or planes)
//   per key   a PerKey read (kv_bias[h][j], t[j], t[kv_head][j]: kv_idx, no q_idx): the
//             same in backward_dkdv per key row, one query head at a time; direct or
//             planes, the planes summed by the last backward_dkdv CTA
//
// Everything else is a UserError naming the tensor and its read (not computed yet, never
// a wrong answer): a second table tensor, a read with more than one varying index, and a
// tensor stored elementwise, per query, per key or read as a table that score_mod also
// reads elsewhere.
#pragma once

#include <set>
#include <string>

#include "codegen/kernel_plan.h"
#include "dsl/attention_spec.h"

namespace attnjit::codegen {

struct InputGradPlan {
    std::vector<InputGradOutput> outputs;  // those with per-CTA sites first, then by name
    std::vector<InputGradSite> sites;      // partials simplified, not yet CSE'd
};

// UserError for a name the spec does not declare, an int tensor or scalar, or a read whose
// sum is not implemented (see above). An empty `grads` gives an empty plan.
InputGradPlan plan_input_grads(const dsl::AttentionSpec& spec, const std::set<std::string>& grads);

}  // namespace attnjit::codegen
