// The forward epilogue shared by every main loop: O = acc / l in the element type (after
// Variant::transform_output when kHasOutputTransform), LSE = natural log of the row sum;
// rows q >= Nq are not written; rows with no kept key give O = 0 and LSE = -inf.
//
// The accumulator's layout says where its elements go:
//   layout.row(r)                        row offset of slot r in the CTA's query tile
//   layout.lane_col()                    this lane's first column
//   layout.store_row<E>(lane_row, acc, r, f) writes f(acc element, d) for each column d
//                                        of the thread's share of row slot r, lane_row
//                                        being the row's pointer + lane_col()
//   layout.row_leader()                  the one lane per row that writes LSE
#pragma once

#include "attnjit/common/types.cuh"
#include "attnjit/forward/args.h"

namespace attnjit {

// acc * inv: the normalisation alone.
struct NormalizeOutput {
    float inv;
    __device__ __forceinline__ float operator()(float v, int /*d*/) const { return v * inv; }
};

// acc * inv, then Variant::transform_output(p, hd, row, o, q, d).
template <class Variant, class Params>
struct TransformOutput {
    const Params& p;
    const typename Variant::Head& hd;
    const typename Variant::Row& row;
    float inv;
    int q;
    __device__ __forceinline__ float operator()(float v, int d) const {
        return Variant::transform_output(p, hd, row, v * inv, q, d);
    }
};

template <class E, class Variant, class Params, class Softmax, class Hooks, class Layout, class Frag>
__device__ __forceinline__ void store_forward_output(const Params& p, const typename Variant::Head& hd,
                                                     const Hooks& hooks, const Softmax& softmax, const Layout& layout,
                                                     Frag& acc, int b, int h, int m0) {
    const ForwardArgs& a = p.args;
    const int nq = a.q_len;  // read once: the stores below may alias the parameters for the compiler
    // The lane's column offset goes into the base once, so each store is base + constant.
    E* og = static_cast<E*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1] + layout.lane_col();
#pragma unroll
    for (int r = 0; r < Layout::kRows; ++r) {
        const float l = softmax.row_sum(r);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int q = m0 + layout.row(r);
        if (q < nq) {
            E* orow = og + q * a.o_stride[2];
            if constexpr (Variant::kHasOutputTransform) {
                const TransformOutput<Variant, Params> f{p, hd, hooks.rw[r], inv, q};
                layout.template store_row<E>(orow, acc, r, f);
            } else {
                const NormalizeOutput f{inv};
                layout.template store_row<E>(orow, acc, r, f);
            }
            if (a.lse != nullptr && layout.row_leader())
                a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + q * a.lse_stride[2]] = softmax.lse(r, l);
        }
    }
}

}  // namespace attnjit
