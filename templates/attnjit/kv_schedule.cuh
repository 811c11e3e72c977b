// Which KV tiles a CTA visits, in order, and how: the tile cursor shared by every main
// loop. It walks tiles 0, 1, ... of the key sequence, asks Variant::classify (only when
// Variant::kCanClassify) and hands out the next tile that is not kSkip, so the main
// loops can prefetch the next non-skipped tile. Every thread of the CTA calls advance()
// uniformly (classify may be block-collective).
#pragma once

#include "attnjit/forward_args.h"
#include "attnjit/intervals.cuh"
#include "attnjit/types.cuh"

namespace attnjit {

template <class Variant, class Params, int kBlockN>
struct KvCursor {
    int q0, q1;  // query rows of this CTA, clipped to Nq - 1
    int next;    // next tile to look at
    int ntiles;
    int nk;

    __device__ __forceinline__ KvCursor(int nk_, int q0_, int q1_) : q0(q0_), q1(q1_), next(0), nk(nk_) {
        ntiles = (nk + kBlockN - 1) / kBlockN;
    }

    // The next tile index that is not kSkip (and its class), or -1 when none is left.
    // Without kCanClassify every tile is kPartial when the variant has a mask, else kFull.
    __device__ __forceinline__ int advance(const Params& p, const typename Variant::Head& hd, BlockCtx& ctx,
                                           TileClass& cls) {
        while (next < ntiles) {
            const int j = next++;
            if constexpr (!Variant::kCanClassify) {
                cls = Variant::kHasMask ? TileClass::kPartial : TileClass::kFull;
                return j;
            } else {
                const int k0 = j * kBlockN;
                const int k1 = (k0 + kBlockN < nk ? k0 + kBlockN : nk) - 1;
                const TileClass c = Variant::classify(p, hd, q0, q1, k0, k1, ctx);
                if (c != TileClass::kSkip) {
                    cls = c;
                    return j;
                }
            }
        }
        cls = TileClass::kSkip;
        return -1;
    }
};

}  // namespace attnjit
