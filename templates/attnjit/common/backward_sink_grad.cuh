// backward_sink_grad: the gradient of the attention sinks (Variant::kHasSink),
//   d sink_h = -sum_{b, i} exp(sink_h - LSE_i) * Delta_i,   Delta_i = rowsum(dO_i * O_i),
// in two launches of one kernel (backward/sink_grad_args.h): phase 0 sums chunks of
// kSinkGradChunkRows query rows of one (batch, head) per CTA into a workspace, phase 1
// adds each head's chunk sums in order. It reads LSE, O and dO directly (not the
// backward's statistics workspace, which only some main loops write), so it runs after
// either backward sequence and needs nothing from it.
//
// Deterministic: in a phase-0 CTA, warp w takes rows i0 + w*kRows.., stepping by
// W*kRows, and sums its contributions in that order (every lane holds the same sum, the
// row dots being butterfly reductions); thread 0 adds the warps' sums in warp order. The
// chunking depends on the shapes only. The result, in the sinks tensor's element type,
// goes to SinkGradArgs::d_sinks[h * d_sinks_stride]. A sink of -inf (no sink) gets 0.
#pragma once

#include "attnjit/backward/sink_grad_args.h"
#include "attnjit/common/backward_rows.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

template <class E, int DQK, int DV, int W>
struct BackwardSinkGrad {
    static constexpr int kThreads = W * 32;
    static constexpr int kSmemBytes = 0;  // the warps' sums live in static shared memory
    static constexpr int kRows = 4;       // rows a warp reads at once (their loads in flight together)

    static constexpr const char* kName = "backward sink grad";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;

    template <class Variant, class Params>
    __device__ __forceinline__ static void run_sink_grad(const Params& p, unsigned char*) {
        static_assert(Variant::kHasSink, "backward_sink_grad is generated only for a spec with attention sinks");
        const SinkGradArgs& a = p.args;
        if (a.phase == 0) {
            chunk_sum<Variant>(p, a);
        } else if (threadIdx.x == 0) {
            const int h = blockIdx.x;
            const float* part = a.partials + (long long)h * a.chunks;
            float total = 0.f;
            for (int c = 0; c < a.chunks; ++c) total += part[c];
            using S = typename Variant::SinkElement;
            static_cast<S*>(a.d_sinks)[h * a.d_sinks_stride] = FromFloat<S>::cvt(0.f - total);  // +0 with no rows
        }
    }

private:
    // Phase 0: CTA (c, h) writes sum over its rows of exp(sink_h - LSE_i) * Delta_i.
    template <class Variant, class Params>
    __device__ __forceinline__ static void chunk_sum(const Params& p, const SinkGradArgs& a) {
        const int c = blockIdx.x, h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        const int b = c / a.chunks_per_batch;
        const int i0 = (c - b * a.chunks_per_batch) * kSinkGradChunkRows;
        const int end = a.q_len - i0 < kSinkGradChunkRows ? a.q_len : i0 + kSinkGradChunkRows;
        const float sink = Variant::sink(p, h);
        float acc = 0.f;
        if (sink != neg_inf()) {
            const E* o = static_cast<const E*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1];
            const E* d_o = static_cast<const E*>(a.d_o) + b * a.do_stride[0] + h * a.do_stride[1];
            const float* lse = a.lse + b * a.lse_stride[0] + h * a.lse_stride[1];
            for (int r0 = i0 + warp * kRows; r0 < end; r0 += W * kRows) {
                float delta[kRows];
                warp_row_dots<E, DV, kRows>(delta, o, a.o_stride[2], d_o, a.do_stride[2], r0, end, lane);
#pragma unroll
                for (int i = 0; i < kRows; ++i) {
                    const int q = r0 + i;
                    if (q < end) acc += expf(sink - lse[q * a.lse_stride[2]]) * delta[i];
                }
            }
        }
        __shared__ float warp_sums[W];
        if (lane == 0) warp_sums[warp] = acc;
        block_sync();
        if (threadIdx.x == 0) {
            float total = 0.f;
#pragma unroll
            for (int w = 0; w < W; ++w) total += warp_sums[w];
            a.partials[(long long)h * a.chunks + c] = total;
        }
    }
};

}  // namespace attnjit
