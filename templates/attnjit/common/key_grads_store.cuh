// The end of a backward_dkdv kernel, whatever its main loop: dK (times the softmax scale) and
// dV of the CTA's keys n0 + row, from accumulators in a C layout (sm80::MmaCLayout's
// row / lane_col / store_row); keys >= nk (Nk, as the caller read it) are not written.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/types.cuh"

namespace attnjit {

template <class E, class KLayout, class VLayout, class DkFrag, class DvFrag>
__device__ __forceinline__ void store_key_grads(const BackwardArgs& a, const KLayout& kl, const VLayout& vl, DkFrag& dk,
                                                DvFrag& dv, int b, int kvh, int n0, int nk) {
    E* dkg = static_cast<E*>(a.dk) + b * a.dk_stride[0] + kvh * a.dk_stride[1];
    E* dvg = static_cast<E*>(a.dv) + b * a.dv_stride[0] + kvh * a.dv_stride[1];
    const float scale = a.scale;
#pragma unroll
    for (int r = 0; r < KLayout::kRows; ++r) {
        const int k = n0 + kl.row(r);
        if (k < nk) {
            kl.store_row(dkg + k * a.dk_stride[2] + kl.lane_col(), dk, r, [scale](float x, int) { return x * scale; });
            vl.store_row(dvg + k * a.dv_stride[2] + vl.lane_col(), dv, r, [](float x, int) { return x; });
        }
    }
}

}  // namespace attnjit
