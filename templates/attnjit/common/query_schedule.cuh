// Which (query head, query tile) steps a backward_dkdv CTA visits, in order: every query
// tile of every query head of its kv head's group (GQA), minus the tiles
// Variant::classify says are kSkip against the CTA's keys. Every thread calls advance()
// uniformly (classify may be block-collective), one step ahead of the step being
// computed, so the main loop can prefetch it. Tiles go in order from tile `first`,
// wrapping around (the fast backward starts CTAs at different tiles so that their atomic dQ
// additions do not all meet on the same rows at once), head by head, or with kTileMajor each
// tile for every head of the group before the next tile (see the rotated order below; the
// sm80 kernels keep per-head sums that want the heads one after another).
//
// Ordered dQ accumulation (the deterministic backward_fused): the CTAs that add to a query
// tile take turns in a fixed order, each at a position; a tile's turn counter holds the
// position after the last addition. order_by_key_tiles() makes advance() also give each
// step its own position and the counter value to wait for (that of the nearest earlier
// position whose CTA classify does not skip for the tile; 0: none). Masks whose classify
// reads memory classify 32 steps (or candidates) at a time, one a lane.
//   Descending: positions count the key tiles down from the last (kt = Nkt - 1 first).
//   Rotated by d (a.dq_rotate = d >= 1, d * Nkt <= query tiles): CTA kt starts at query
//     tile d * kt and a tile's position is the step at which the CTA visits it, so the CTA
//     before it in a turn visited the tile d steps earlier: once the CTAs are under way none
//     waits, as long as one addition is published within d - 1 steps of compute (d = 1 left
//     none: the turns' latency then set the pace, at head dim 64 most). The CTA before one
//     may be dispatched after it, so this needs every CTA of a kv head resident at once (the
//     host asks for it only when Nkt <= the SM count). A kv head's CTAs that start as the
//     previous kv head's leave (causal: one every 2 x group steps, the light ones first) each
//     wait on one dispatched later; visiting the group's heads tile by tile (kTileMajor) puts
//     the CTA before in a turn d x group steps ahead, which covers that stagger (head by head
//     it is d steps ahead: GQA + causal at N 16384 ran at 0.74x the unrotated order).
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/skipped_runs.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

struct QueryStep {
    int h;   // query head, -1 when there is none left
    int m0;  // first query row of the tile
    TileClass cls;
    int wait_for;  // ordered: the turn counter value to wait for (0: none)
    int position;  // ordered: this CTA's position in the tile's turns
};

// The CTA is (key tile, kv head blockIdx.y, batch blockIdx.z). What the launch fixes is
// read from the parameters and blockIdx where used, not held: these kernels sit at 255
// registers.
template <class Variant, class Params, int kBlockM, int kBlockN = 0, bool kTileMajor = false>
struct QueryCursor {
    int step, first;     // batched classes: a flat index over tiles x group, head_of(s), row_of(s)
    int ti = 0, hi = 0;  // otherwise: the next step's tile (from first) and head (in the group)
    int k0, k1;          // the CTA's keys, clipped to Nk - 1
    int key_tile = -1;   // order_by_key_tiles
    // Variant::kClassifyReadsMemory (document masks): the classes of 32 steps at a time, a
    // step a lane, in every warp alike (no shared memory, no barrier): bit l of kept_bits /
    // full_bits is step chunk + l. A run of skipped steps then costs one pass, not one
    // block-wide range reduction each.
    int chunk = -64;  // none yet
    unsigned kept_bits = 0, full_bits = 0;

    __device__ __forceinline__ QueryCursor(const BackwardArgs& a, int k0_, int k1_, int first_ = 0)
        : step(0), k0(k0_), k1(k1_) {
        const int n = tiles(a);
        first = n > 0 ? first_ % n : 0;
        if (n == 0) hi = a.group;  // Nq == 0 (dK, dV are zeros): the walk over the heads is over
    }

    // This CTA is key tile `kt` (of ceil(Nk / kBlockN)): give each step its
    // position in the order of turns (rotated by a.dq_rotate when it is not 0).
    __device__ __forceinline__ void order_by_key_tiles(const BackwardArgs& a, int kt) {
        static_assert(kBlockN > 0, "QueryCursor: ordered turns need the key tile size");
        key_tile = kt;
        if (a.dq_rotate) first = (kt * a.dq_rotate) % tiles(a);
    }

    __device__ __forceinline__ QueryStep advance(const Params& p, BlockCtx& ctx) {
        QueryStep st = next_tile(p, ctx);
        if (st.h >= 0 && key_tile >= 0) {
            const int n = tiles(p.args), t = st.m0 / kBlockM;
            st.position = p.args.dq_rotate ? (t - first + n) % n : key_tiles(p.args) - 1 - key_tile;
            st.wait_for = wait_value(p, ctx, st);
        }
        return st;
    }

private:
    __device__ __forceinline__ static int tiles(const BackwardArgs& a) { return (a.q_len + kBlockM - 1) / kBlockM; }
    // Not gridDim.x: backward_fused may run several CTAs a key tile (fused_column_split).
    __device__ __forceinline__ static int key_tiles(const BackwardArgs& a) { return (a.kv_len + kBlockN - 1) / kBlockN; }

    // Data-dependent masks: classes a chunk of steps at a time, one a lane (ThreadCtx).
    static constexpr bool kBatched = Variant::kCanClassify && Variant::kClassifyReadsMemory;

    // The counter value after the nearest earlier position's addition to st's tile.
    // Descending: the CTA at position - j is key tile key_tile + j. Rotated by d: the CTA at
    // position p of tile t is key tile c with d * c = (t - p) mod n, if c < Nkt (none else).
    __device__ __forceinline__ static int cta_at(const BackwardArgs& a, int key_tile, int t, int position, int j) {
        if (!a.dq_rotate) return key_tile + j;
        const int n = tiles(a), x = ((t - (position - j)) % n + n) % n;
        return x % a.dq_rotate == 0 ? x / a.dq_rotate : key_tiles(a);
    }
    __device__ __forceinline__ int wait_value(const Params& p, BlockCtx& ctx, const QueryStep& st) {
        const BackwardArgs& a = p.args;
        const int key_tiles = this->key_tiles(a);
        typename Variant::Head hd{};
        if constexpr (Variant::kCanClassify) hd = Variant::make_head(p, blockIdx.z, st.h, blockIdx.y);
        const int m1 = (st.m0 + kBlockM < a.q_len ? st.m0 + kBlockM : a.q_len) - 1;
        if constexpr (kBatched) {
            // 32 candidates at a time, one a lane (ThreadCtx), the nearest kept by a ballot.
            const int lane = threadIdx.x & 31;
            for (int base = 1; base <= st.position; base += 32) {
                const int j = base + lane;
                const int c = j <= st.position ? cta_at(a, key_tile, st.m0 / kBlockM, st.position, j) : key_tiles;
                bool kept = false;
                if (j <= st.position && c < key_tiles) {
                    const int t0 = c * kBlockN, t1 = (t0 + kBlockN < a.kv_len ? t0 + kBlockN : a.kv_len) - 1;
                    ThreadCtx tctx;
                    kept = Variant::classify(p, hd, st.m0, m1, t0, t1, tctx) != TileClass::kSkip;
                }
                const unsigned found = __ballot_sync(0xffffffffu, kept);
                if (found) return st.position - (base + __ffs(found) - 1) + 1;
            }
            return 0;
        } else if (!a.dq_rotate) {  // the CTAs before this one: key tiles key_tile + 1, + 2, ...
            const int c = first_kept_key_tile(p, hd, st.m0, m1, key_tile + 1, key_tiles - 1, ctx);
            return c < 0 ? 0 : key_tiles - c;  // position Nkt - 1 - c, + 1
        } else {
            // Rotated by d (first = d * key_tile < n): key tile c sits at position (t - d c) mod n.
            // Earlier than this one's, nearest first: key tiles key_tile + 1, + 2, ... (positions
            // position - d, - 2d, ...), then past the wrap key tiles 0, 1, ... (positions
            // position + d (key_tile - c) - n), every one of those below the first kind's.
            const int d = a.dq_rotate, n = tiles(a), pos = st.position;
            const int last_before = key_tile + pos / d < key_tiles - 1 ? key_tile + pos / d : key_tiles - 1;
            int c = first_kept_key_tile(p, hd, st.m0, m1, key_tile + 1, last_before, ctx);
            if (c >= 0) return pos - d * (c - key_tile) + 1;
            c = first_kept_key_tile(p, hd, st.m0, m1, 0, key_tile - (n - pos + d - 1) / d, ctx);
            return c < 0 ? 0 : pos + d * (key_tile - c) - n + 1;
        }
    }

    // The first key tile c in [lo, last] whose keys classify does not skip against query rows
    // [m0, m1], -1 if none: a kept tile is the common answer (one classify); a run of skipped
    // ones is passed in growing boxes (skipped_runs.cuh).
    __device__ __forceinline__ int first_kept_key_tile(const Params& p, const typename Variant::Head& hd, int m0,
                                                       int m1, int lo, int last, BlockCtx& ctx) const {
        const int count = last - lo + 1;
        if constexpr (!Variant::kCanClassify) {
            return count > 0 ? lo : -1;
        } else {
            const int nk = p.args.kv_len;
            const int c = first_unskipped(count, [&](int from, int len) {
                const int end = (lo + from + len) * kBlockN;
                return Variant::classify(p, hd, m0, m1, (lo + from) * kBlockN, (end < nk ? end : nk) - 1, ctx) ==
                       TileClass::kSkip;
            });
            return c < count ? lo + c : -1;
        }
    }

    // Step s's query head and first query row (n query tiles).
    __device__ __forceinline__ static int head_of(const BackwardArgs& a, int s, int n) {
        return blockIdx.y * a.group + (kTileMajor ? s % a.group : s / n);
    }
    __device__ __forceinline__ int row_of(const BackwardArgs& a, int s, int n) const {
        const int t = first + (kTileMajor ? s / a.group : s % n);
        return (t < n ? t : t - n) * kBlockM;
    }

    // The counters past one step. Counters, not a flat index divided by the group at every
    // step: a cursor passes over many skipped steps (a sliding window's CTA over most of its
    // query tiles), and the divisions made each of those cost twice as much.
    __device__ __forceinline__ void count_step(int n, int g) {
        if constexpr (kTileMajor) {
            if (++hi == g) {
                hi = 0;
                ++ti;
            }
        } else if (++ti == n) {
            ti = 0;
            ++hi;
        }
    }

    // Step (ti, hi) is kSkip, or (known = 0) may not be: how many query tiles from ti on are
    // kSkip for the heads [h0, h0 + heads), at least `known`, up to where the walk wraps (tile
    // n - 1, or first - 1 after it), in growing boxes (skipped_runs.cuh): a sliding window's CTA
    // skips most of its query tiles.
    __device__ __forceinline__ int skipped_run(const Params& p, BlockCtx& ctx, int h0, int heads, int known, int n) const {
        const BackwardArgs& a = p.args;
        const int t = first + ti < n ? first + ti : first + ti - n;
        const int limit = first + ti < n ? n - t : first - t;  // tiles before the walk wraps
        auto skipped = [&](int from, int len) {  // tiles [t + from, t + from + len)
            const int m0 = (t + from) * kBlockM;
            const int m1 = ((t + from + len) * kBlockM < a.q_len ? (t + from + len) * kBlockM : a.q_len) - 1;
            bool all = true;
            for (int h = h0; h < h0 + heads; ++h) {
                const typename Variant::Head hd = Variant::make_head(p, blockIdx.z, h, blockIdx.y);
                all = all && Variant::classify(p, hd, m0, m1, k0, k1, ctx) == TileClass::kSkip;
            }
            return all;
        };
        if (known == 0 && !skipped(0, 1)) return 0;
        return grow_skipped_run(known > 0 ? known : 1, limit, skipped);
    }

    __device__ __forceinline__ QueryStep next_tile(const Params& p, BlockCtx& ctx) {
        const BackwardArgs& a = p.args;
        const int n = tiles(a), g = a.group;
        if constexpr (!kBatched) {
            while (kTileMajor ? ti < n : hi < g) {
                const int h = blockIdx.y * g + hi, t = first + ti, m0 = (t < n ? t : t - n) * kBlockM;
                if constexpr (!Variant::kCanClassify) {
                    count_step(n, g);
                    return QueryStep{h, m0, Variant::kHasMask ? TileClass::kPartial : TileClass::kFull, 0, 0};
                } else {
                    const typename Variant::Head hd = Variant::make_head(p, blockIdx.z, h, blockIdx.y);
                    const int m1 = (m0 + kBlockM < a.q_len ? m0 + kBlockM : a.q_len) - 1;
                    const TileClass c = Variant::classify(p, hd, m0, m1, k0, k1, ctx);
                    if (c != TileClass::kSkip) {
                        count_step(n, g);
                        return QueryStep{h, m0, c, 0, 0};
                    }
                    if constexpr (kTileMajor) {  // past tiles every head of the group skips
                        const int run = hi == 0 ? skipped_run(p, ctx, h, g, g == 1 ? 1 : 0, n) : 0;
                        if (run > 0) {
                            ti += run;
                            continue;
                        }
                        count_step(n, g);
                    } else {  // past the tiles this head skips
                        ti += skipped_run(p, ctx, h, 1, 1, n);
                        if (ti == n) {
                            ti = 0;
                            ++hi;
                        }
                    }
                }
            }
        } else {
            const int steps = n * g;
            while (step < steps) {
                if (step >= chunk + 32) refill(p, n, steps);
                const unsigned rest = kept_bits >> (step - chunk);
                if (rest == 0) {
                    step = chunk + 32;
                    continue;
                }
                const int s = step + __ffs(rest) - 1;
                step = s + 1;
                const TileClass c = (full_bits >> (s - chunk)) & 1u ? TileClass::kFull : TileClass::kPartial;
                return QueryStep{head_of(a, s, n), row_of(a, s, n), c, 0, 0};
            }
        }
        return QueryStep{-1, 0, TileClass::kSkip, 0, 0};
    }

    // Batched classes (kClassifyReadsMemory): steps [step, step + 32), one a lane.
    __device__ __forceinline__ void refill(const Params& p, int n, int steps) {
        const BackwardArgs& a = p.args;
        chunk = step;
        const int s = step + (threadIdx.x & 31);
        TileClass c = TileClass::kSkip;
        if (s < steps) {
            const int m0 = row_of(a, s, n), m1 = (m0 + kBlockM < a.q_len ? m0 + kBlockM : a.q_len) - 1;
            const typename Variant::Head hd = Variant::make_head(p, blockIdx.z, head_of(a, s, n), blockIdx.y);
            ThreadCtx tctx;
            c = Variant::classify(p, hd, m0, m1, k0, k1, tctx);
        }
        kept_bits = __ballot_sync(0xffffffffu, c != TileClass::kSkip);
        full_bits = __ballot_sync(0xffffffffu, c == TileClass::kFull);
    }
};

}  // namespace attnjit
