// grad_reduction: how the gradient of one captured-tensor read (an autodiff site,
// codegen/autodiff.h) is summed, decided at codegen time from the read's index expressions.
// The backward gives each score element (b, h, i, j) a contribution dT_ij * d t / d read to
// the element the read names; elements read by many score elements need a sum, and the
// sum must not depend on scheduling (deterministic). The shape of the indices says where
// the contributions of one element meet, and so which fixed-order sum fits:
//
//   kind         indices (i = q_idx, j = kv_idx)        where one element's contributions meet
//   Elementwise  i and j each alone in its own dim       one score element per (b, h): a store
//                (bias[b][h][i][j])
//   PerKey       j alone, no i (kv_bias[h][j])           a column of the score matrix: the
//                                                        backward_dkdv CTA that owns key j
//   PerQuery     i alone, no j (q_bias[b][i])            a row: the backward_dq CTA of row i
//   Diagonal     i and j only as j - i or i - j          a diagonal: per-tile partials per
//                (table[h][clamp(j - i, -m, m) + m])     offset, then a fixed-order sum
//   Uniform      neither i nor j (slopes[h], temp[0])    the whole score matrix of (b, h):
//                                                        one partial per CTA, then a sum
//   Gather       anything else (table[doc[j]], t[i+j])   per-tile partials and a second pass
//
// "Alone" allows a launch constant added or subtracted (t[j + 1], t[i - offset]). Batch and
// head indices must be alone too (else Gather); a batch or head the read does not index is
// summed over (a [H, N, N] bias collects every batch's contribution), across CTAs.
// The plan sees the expression only: a launch that passes the tensor with stride 0 in a
// dimension (a broadcast, which the forward accepts) makes distinct indices one element, so
// the launch must turn a store into a sum for such a dimension.
#pragma once

#include <ostream>

#include "dsl/ir.h"

namespace attnjit::codegen {

enum class GradReduction { Elementwise, PerKey, PerQuery, Diagonal, Uniform, Gather };

// Which heads meet at one element: none (the read indexes the query head), the query heads
// of a kv group (it indexes kv_head only), or all heads (it indexes neither).
enum class HeadSum { None, Group, All };

struct GradReductionPlan {
    GradReduction kind = GradReduction::Gather;
    bool sums_batch = false;        // no index reads the batch: every batch adds to an element
    HeadSum sums_heads = HeadSum::All;
};

// The plan for a read (a TensorLoad node).
GradReductionPlan plan_grad_reduction(const dsl::Expr& read);

const char* grad_reduction_name(GradReduction kind);
std::ostream& operator<<(std::ostream& os, const GradReductionPlan& plan);

}  // namespace attnjit::codegen
