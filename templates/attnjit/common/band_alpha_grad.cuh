// d alpha_h of the reciprocal band (BackwardArgs::d_alpha, SEMANTICS.md section 4):
// scale * sum over the batch and the rows of <k_i, U_i>. Each CTA of a grid (tiles, Hq, B)
// hands in its threads' parts v; their sum (a fixed tree: warps, then the warps in order)
// goes to band_alpha_partials [Hq, B, tiles], and the last CTA of head h (band_tickets [Hq],
// zeroed) adds the head's partials in order and stores. backward_dq (the two-pass backward)
// and backward_dq_convert (after backward_fused) call it.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/input_grads.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

// scratch: (4 + W) words of shared memory that no warp still reads (the ticket's flag, then
// the warp sums).
template <int W>
__device__ __forceinline__ void store_band_alpha_sum(const BackwardArgs& a, unsigned char* scratch, float v, int b,
                                                     int h) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += shfl_xor(v, o);
    float* warp_sums = reinterpret_cast<float*>(scratch) + 4;  // after last_to_arrive's flag
    block_sync();  // every warp is past its last use of the scratch
    if (lane == 0) warp_sums[warp] = v;
    block_sync();
    const int per_head = a.batch * static_cast<int>(gridDim.x);
    float* part = a.band_alpha_partials + (long long)h * per_head;
    if (tid == 0) {
        float total = 0.f;
        for (int w = 0; w < W; ++w) total += warp_sums[w];
        part[b * gridDim.x + blockIdx.x] = total;
    }
    grad_detail::fence_gpu();
    block_sync();
    if (!grad_detail::last_to_arrive(a.band_tickets + h, static_cast<unsigned>(per_head),
                                     reinterpret_cast<unsigned*>(scratch)))
        return;
    if (tid == 0) {
        float total = 0.f;
        for (int n = 0; n < per_head; ++n) total += __ldcg(part + n);
        a.d_alpha[h * a.d_alpha_stride] = total * a.scale;
    }
}

}  // namespace attnjit
