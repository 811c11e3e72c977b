// Online softmax over the KV tiles of one CTA (FlashAttention-2): per row a running max m
// and a running sum l, exp2 with log2(e) (and, without a score_mod, the softmax scale)
// folded into `scl`, the accumulator rescaled by alpha = exp2(scl * (m_old - m_new)).
//
// Parameterised by how a main loop lays out its rows:
//   kRows   row slots this thread holds (a fragment layout's kRows);
//   Reduce  the cross-lane row reduction (row_reduce.cuh): QuadRowReduce for mma C
//           fragments, WarpRowReduce for the simt loop.
// Score and accumulator fragments are visited through their layout's
// for_each_in_row(frag, r, op), which hands `op` the row's elements in the groups the
// thread holds them (op(v) or op(v0, v1)).
//
// l is the thread's partial sum; the reduction across lanes happens once, in row_sum().
// With no score_mod the running max is taken over raw <q, k> (scale > 0 required).
//
// Attention sinks (kSink, Variant::kHasSink): set_sink(sink) starts every row's running
// max at the sink logit (in the units of m: sink * log2(e) / scl) instead of -inf. The
// sink's own term, exp2(scl * (m_sink - m)), is the product of every later alpha, so it
// is added once after the lanes' reduction (row_sum), which keeps it independent of how
// a layout spreads a row over lanes. Then O = acc / row_sum and LSE = m + log(row_sum)
// include the sink with no change to the epilogue, and a row with no kept key gets
// O = 0, LSE = sink. A sink of -inf is no sink (its term is 0, also for an empty row).
#pragma once

#include "attnjit/common/math_constants.h"
#include "attnjit/common/types.cuh"

namespace attnjit {

// The sink logit in the units of m; only a kSink OnlineSoftmax has the member (an unused
// one still changed the machine code of kernels without sinks).
template <bool kSink>
struct SinkLogit {
    float m_sink;
};
template <>
struct SinkLogit<false> {};

template <int kRows, class Reduce, bool kSink = false>
struct OnlineSoftmax : SinkLogit<kSink> {
    float m[kRows];  // running max (of the unscaled scores), -inf (or the sink) before the first key
    float l[kRows];  // this thread's share of the running sum of exp2(scl * (s - m))
    float scl;       // log2(e), times the softmax scale when there is no score_mod

    __device__ __forceinline__ explicit OnlineSoftmax(float scl_) : scl(scl_) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            m[r] = neg_inf();
            l[r] = 0.f;
        }
        if constexpr (kSink) this->m_sink = neg_inf();
    }

    // kSink: the row's sink logit (natural log), before the first update.
    __device__ __forceinline__ void set_sink(float sink) {
        static_assert(kSink, "set_sink on an OnlineSoftmax without kSink");
        this->m_sink = sink * kLog2e / scl;
#pragma unroll
        for (int r = 0; r < kRows; ++r) m[r] = this->m_sink;
    }

    struct MaxOp {
        float mx;
        __device__ __forceinline__ void operator()(float& v) { mx = fmax_(mx, v); }
        __device__ __forceinline__ void operator()(float& v0, float& v1) { mx = fmax_(mx, fmax_(v0, v1)); }
    };
    struct ExpOp {
        float scl, ms, sum;
        __device__ __forceinline__ void operator()(float& v) {
            v = fast_exp2(v * scl - ms);
            sum += v;
        }
        __device__ __forceinline__ void operator()(float& v0, float& v1) {
            (*this)(v0);
            (*this)(v1);
        }
    };
    struct ScaleOp {
        float alpha;
        __device__ __forceinline__ void operator()(float& v) { v *= alpha; }
        __device__ __forceinline__ void operator()(float& v0, float& v1) {
            v0 *= alpha;
            v1 *= alpha;
        }
    };

    // Row slot r of a new score tile: updates m and l, turns the row's scores into
    // probabilities exp2(scl * (s - m_new)) in place, returns alpha for the accumulator.
    template <class Layout, class Frag>
    __device__ __forceinline__ float update_row(const Layout& layout, Frag& s, int r) {
        MaxOp mo{m[r]};
        layout.for_each_in_row(s, r, mo);
        const float mx = Reduce::max(mo.mx);
        const float ms = mx == neg_inf() ? 0.f : mx * scl;
        const float alpha = fast_exp2(m[r] * scl - ms);
        m[r] = mx;
        ExpOp eo{scl, ms, 0.f};
        layout.for_each_in_row(s, r, eo);
        l[r] = l[r] * alpha + eo.sum;
        return alpha;
    }

    // Row slot r of the accumulator times alpha.
    template <class Layout, class Frag>
    __device__ __forceinline__ static void rescale_row(const Layout& layout, Frag& o, int r, float alpha) {
        ScaleOp so{alpha};
        layout.for_each_in_row(o, r, so);
    }

    // Every row of a score tile, each followed by the rescale of its accumulator row.
    template <class SLayout, class SFrag, class OLayout, class OFrag>
    __device__ __forceinline__ void update(const SLayout& sl, SFrag& s, const OLayout& ol, OFrag& o) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) rescale_row(ol, o, r, update_row(sl, s, r));
    }

    // The row's whole sum (across lanes, and the sink's term); call once, after the last tile.
    __device__ __forceinline__ float row_sum(int r) const {
        if constexpr (kSink) {
            const float ms = m[r] == neg_inf() ? 0.f : m[r] * scl;  // m = -inf only for a -inf sink
            return Reduce::sum(l[r]) + fast_exp2(this->m_sink * scl - ms);
        } else {
            return Reduce::sum(l[r]);
        }
    }
    // Natural-log LSE of row r given its row_sum; -inf for a row with no kept key.
    __device__ __forceinline__ float lse(int r, float sum) const {
        return sum > 0.f ? (m[r] * scl + fast_log2(sum)) * kLn2 : neg_inf();
    }
};

}  // namespace attnjit
