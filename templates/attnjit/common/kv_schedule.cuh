// Which KV tiles a CTA visits, in order, and how: the tile cursor shared by every main
// loop. It walks tiles 0, 1, ... of the key sequence, asks Variant::classify (only when
// Variant::kCanClassify) and hands out the next tile that is not kSkip, so the main
// loops can prefetch the next non-skipped tile. Every thread of the classify context (the
// CTA, or the sm90 loop's producer warp: BlockCtx::nthreads) calls advance() uniformly
// (classify may be collective over them, and refills below are).
//
// Two ways to classify:
//  - one tile per advance(), every thread with the same arguments (BlockCtx): masks whose
//    classify is arithmetic (causal, windows) cost a few instructions a tile, and a run of
//    skipped tiles a few classifies of growing boxes (skipped_runs.cuh);
//  - Variant::kClassifyReadsMemory (document masks and other data-dependent masks): a
//    chunk of kThreads tiles at once, one tile per thread (ThreadCtx), the classes kept
//    as two warp ballots per warp (kept-any, kept-all) in the shared scratch. A skipped
//    tile then costs a bit scan instead of a load round trip and two barriers.
#pragma once

#include "attnjit/forward/args.h"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/skipped_runs.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

template <class Variant, class Params, int kBlockN>
struct KvCursor {
    int q0, q1;  // query rows of this CTA, clipped to Nq - 1
    int next;    // next tile to look at
    int ntiles;
    int nk;
    int chunk_begin, chunk_end;  // batched mode: tiles whose classes are in the scratch

    __device__ __forceinline__ KvCursor(int nk_, int q0_, int q1_) : q0(q0_), q1(q1_), next(0), nk(nk_) {
        ntiles = (nk + kBlockN - 1) / kBlockN;
        chunk_begin = chunk_end = 0;
    }

    // The next tile index that is not kSkip (and its class), or -1 when none is left.
    // Without kCanClassify every tile is kPartial when the variant has a mask, else kFull.
    __device__ __forceinline__ int advance(const Params& p, const typename Variant::Head& hd, BlockCtx& ctx,
                                           TileClass& cls) {
        if constexpr (Variant::kCanClassify && Variant::kClassifyReadsMemory) {
            return advance_batched(p, hd, ctx, cls);
        } else {
            while (next < ntiles) {
                const int j = next++;
                if constexpr (!Variant::kCanClassify) {
                    cls = Variant::kHasMask ? TileClass::kPartial : TileClass::kFull;
                    return j;
                } else {
                    const TileClass c = Variant::classify(p, hd, q0, q1, j * kBlockN, last_key(j), ctx);
                    if (c != TileClass::kSkip) {
                        cls = c;
                        return j;
                    }
                    next = j + skipped_run(p, hd, ctx, j);
                }
            }
            cls = TileClass::kSkip;
            return -1;
        }
    }

private:
    __device__ __forceinline__ int last_key(int j) const {
        const int k0 = j * kBlockN;
        return (k0 + kBlockN < nk ? k0 + kBlockN : nk) - 1;
    }

    // Tile j is kSkip: how many tiles from j on are (skipped_runs.cuh).
    __device__ __forceinline__ int skipped_run(const Params& p, const typename Variant::Head& hd, BlockCtx& ctx,
                                               int j) const {
        return grow_skipped_run(1, ntiles - j, [&](int from, int len) {
            return Variant::classify(p, hd, q0, q1, (j + from) * kBlockN, last_key(j + from + len - 1), ctx) ==
                   TileClass::kSkip;
        });
    }

    // Scratch layout in batched mode: per warp w, words 2w (tiles kept at all) and 2w + 1
    // (tiles kept entirely); bit l of warp w's words is tile chunk_begin + 32 w + l.
    __device__ __forceinline__ int advance_batched(const Params& p, const typename Variant::Head& hd,
                                                   BlockCtx& ctx, TileClass& cls) {
        unsigned* words = reinterpret_cast<unsigned*>(ctx.scratch);
        while (next < ntiles) {
            if (next >= chunk_end) refill(p, hd, ctx, words);
            const int rel = next - chunk_begin;
            const unsigned kept = words[2 * (rel >> 5)] >> (rel & 31);
            if (kept == 0) {  // nothing kept in the rest of this warp's 32 tiles
                next += 32 - (rel & 31);
                continue;
            }
            const int skip = __ffs(kept) - 1;
            const int j = next + skip;
            next = j + 1;
            const bool full = (words[2 * (rel >> 5) + 1] >> ((rel & 31) + skip)) & 1u;
            cls = full ? TileClass::kFull : TileClass::kPartial;
            return j;
        }
        cls = TileClass::kSkip;
        return -1;
    }

    // Collective: classifies tiles [chunk_end, chunk_end + nthreads), one per thread.
    __device__ __forceinline__ void refill(const Params& p, const typename Variant::Head& hd, BlockCtx& ctx,
                                           unsigned* words) {
        ctx.sync();  // every thread is done reading the previous chunk's words
        chunk_begin = next;
        chunk_end = next + ctx.nthreads;
        const int j = chunk_begin + ctx.tid;
        TileClass c = TileClass::kSkip;
        if (j < ntiles) {
            ThreadCtx tctx;
            c = Variant::classify(p, hd, q0, q1, j * kBlockN, last_key(j), tctx);
        }
        const unsigned kept = __ballot_sync(0xffffffffu, c != TileClass::kSkip);
        const unsigned all = __ballot_sync(0xffffffffu, c == TileClass::kFull);
        if ((ctx.tid & 31) == 0) {
            words[2 * (ctx.tid >> 5)] = kept;
            words[2 * (ctx.tid >> 5) + 1] = all;
        }
        ctx.sync();
    }
};

}  // namespace attnjit
