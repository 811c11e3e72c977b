// Which (query head, query tile) steps a backward_dkdv CTA visits, in order: every query
// tile of every query head of its kv head's group (GQA), minus the tiles
// Variant::classify says are kSkip against the CTA's keys. Every thread calls advance()
// uniformly (classify may be block-collective), one step ahead of the step being
// computed, so the main loop can prefetch it. Tiles go in order from tile `first` of each
// head, wrapping around: the fast backward starts CTAs at different tiles so that their
// atomic dQ additions do not all meet on the same rows at once.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

struct QueryStep {
    int h;   // query head, -1 when there is none left
    int m0;  // first query row of the tile
    TileClass cls;
};

template <class Variant, class Params, int kBlockM>
struct QueryCursor {
    int b, kvh, h, h_end, step, ntiles, nq, first;
    int k0, k1;  // the CTA's keys, clipped to Nk - 1

    __device__ __forceinline__ QueryCursor(const BackwardArgs& a, int b_, int kvh_, int k0_, int k1_, int first_ = 0)
        : b(b_), kvh(kvh_), h(kvh_ * a.group), h_end((kvh_ + 1) * a.group), step(0), nq(a.q_len), k0(k0_), k1(k1_) {
        ntiles = (nq + kBlockM - 1) / kBlockM;
        first = ntiles > 0 ? first_ % ntiles : 0;
    }

    __device__ __forceinline__ QueryStep advance(const Params& p, BlockCtx& ctx) {
        while (h < h_end) {
            if (step >= ntiles) {
                ++h;
                step = 0;
                continue;
            }
            const int t = first + step++;
            const int m0 = (t < ntiles ? t : t - ntiles) * kBlockM;
            if constexpr (!Variant::kCanClassify) {
                return QueryStep{h, m0, Variant::kHasMask ? TileClass::kPartial : TileClass::kFull};
            } else {
                const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
                const int m1 = (m0 + kBlockM < nq ? m0 + kBlockM : nq) - 1;
                const TileClass c = Variant::classify(p, hd, m0, m1, k0, k1, ctx);
                if (c != TileClass::kSkip) return QueryStep{h, m0, c};
            }
        }
        return QueryStep{-1, 0, TileClass::kSkip};
    }
};

}  // namespace attnjit
