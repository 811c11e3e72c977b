// Where the gradient of a site written once per element goes (an elementwise read, or the
// row sums of a per-query or per-key read; codegen/input_grads.h): stored directly when
// every element is written exactly once (the read's indices are the bare coordinates b, h
// (or kv_head with Hq = Hkv), q_idx, kv_idx with the tensor's sizes B, Hq, Nq, Nk, and no
// broadcast), else into fp32 planes (backward/grad_args.h) over the batch when no
// non-broadcast dimension is indexed by b, over the query heads likewise for h, summed in
// plane order by backward_dkdv. Memory: planes x elements x 4 bytes. Decided at launch:
// it depends on the gradient's shape and strides.
#pragma once

#include <string>

#include "api/backward_launch.h"
#include "codegen/kernel_plan.h"

namespace attnjit::api {

// elems == 0: direct stores. UserError for a tensor broadcast (stride 0, size > 1) along
// q_idx or kv_idx (its gradient would be a sum over queries or keys).
GradPlanes plan_grad_planes(const codegen::InputGradSite& site, const TensorView& t, const LaunchArgs& fwd,
                            const std::string& name);

// Whether backward_dq's batch-sum launch (sm80/backward_dq.cuh run_batch_sum) can take a
// site that plan_grad_planes sends through planes over the batch only (pl): every
// dimension of the gradient t either broadcasts (stride 0) or is indexed by q, k, a
// constant or the bare query head, so its element is the same for every b and the launch's
// CTA of head h owns it alone. The caller also needs a Variant with kInputGradBatchSum.
bool batch_sum_fits(const codegen::InputGradSite& site, const TensorView& t, const GradPlanes& pl);

}  // namespace attnjit::api
