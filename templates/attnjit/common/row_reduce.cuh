// Row reductions across the lanes that share one row of a fragment: the policy a
// fragment layout names as its RowReduce, used by the online softmax (row max every KV
// step, row sum once in the epilogue).
//   QuadRowReduce: the 4 lanes of a quad hold a row (mma.sync C fragments).
//   WarpRowReduce: the 32 lanes of a warp hold a row (the simt loop).
// Butterfly shuffles, so every lane of the group ends with the result.
#pragma once

#include "attnjit/common/types.cuh"

namespace attnjit {

template <int kLanes>
struct ButterflyRowReduce {
    static_assert(kLanes == 1 || kLanes == 2 || kLanes == 4 || kLanes == 8 || kLanes == 16 || kLanes == 32,
                  "a row must be spread over a power-of-two number of lanes, at most 32");
    // Order: offsets 1, 2, ... up to kLanes / 2 for quads (low bits first), as the mma
    // loop always did; the warp reduction goes 16, 8, ... 1. Both are exact for max and
    // differ only in rounding for sum, so each keeps its historical order.
    __device__ __forceinline__ static float max(float v) {
        if constexpr (kLanes == 32) {
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) v = fmax_(v, shfl_xor(v, off));
        } else {
#pragma unroll
            for (int off = 1; off < kLanes; off <<= 1) v = fmax_(v, shfl_xor(v, off));
        }
        return v;
    }
    __device__ __forceinline__ static float sum(float v) {
        if constexpr (kLanes == 32) {
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) v += shfl_xor(v, off);
        } else {
#pragma unroll
            for (int off = 1; off < kLanes; off <<= 1) v += shfl_xor(v, off);
        }
        return v;
    }
};

using QuadRowReduce = ButterflyRowReduce<4>;
using WarpRowReduce = ButterflyRowReduce<32>;

}  // namespace attnjit
