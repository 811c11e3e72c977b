// The Variant's element hooks over a score tile: the one place that turns a fragment
// element into (q, k) and calls score_mod / mask on it. Main loops only say how their
// fragments are laid out (a fragment layout: sm80/fragment.cuh, simt/fragment.cuh):
//
//   layout.kRows                  row slots this thread holds
//   layout.row(r)                 row offset of slot r inside the CTA's query tile
//   layout.for_each(frag, op)     op(float& s, int r, int col) for every element, col the
//                                 key offset inside the KV tile
//
// ScoreHooks keeps, per row slot, the clamped query index and the Variant's Row (hoisted
// terms), built once per CTA, and runs the passes of one KV tile in this order:
//   1. Variant::transform_score_tile (only with kHasScoreTileTransform);
//   2. score_mod on every element, s = scale * <q, k> (only with kHasScoreMod), with its
//      bias tile from the main loop's BiasSource (common/bias_tile.cuh); on edge
//      tiles padding keys k >= Nk are clamped to Nk - 1 and their value is overwritten by
//      step 3. Interior tiles take a copy of the pass without the clamp: one compare and
//      select less per element, 5% on softcap, and alibi level with b1e0cf9 again;
//   3. mask: -inf for padding keys (edge tiles) and, on kPartial tiles, where
//      Variant::mask says so. kFull tiles in the interior run no per-element code.
// Hooks never see q >= Nq (clamped to Nq - 1; those rows are not written) or k >= Nk.
#pragma once

#include "attnjit/common/bias_tile.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

// What Variant::transform_score_tile receives: this thread's fragment of the score tile
// S = Q K^T (unscaled) of query rows [m0, m0 + block_m) and keys [k0, k0 + block_n),
// with the layout that gives each element's coordinates.
template <class Layout, class Frag>
struct ScoreTileView {
    const Layout& layout;
    Frag& frag;
    int m0, k0;  // first query row and first key of the tile
    int nq, nk;  // sequence lengths (rows >= nq and keys >= nk are padding)
    // op(float& s, int q, int k) for every element of this thread (padding included).
    template <class Op>
    __device__ __forceinline__ void for_each(Op& op) const {
        CoordOp<Op> c{op, layout, m0, k0};
        layout.for_each(frag, c);
    }

private:
    template <class Op>
    struct CoordOp {
        Op& op;
        const Layout& layout;
        int m0, k0;
        __device__ __forceinline__ void operator()(float& s, int r, int col) { op(s, m0 + layout.row(r), k0 + col); }
    };
};

template <class Variant, class Params, int kRows>
struct ScoreHooks {
    using Head = typename Variant::Head;
    using Row = typename Variant::Row;

    int qc[kRows];  // query index of each row slot, clamped to Nq - 1
    Row rw[kRows];  // Variant::make_row of qc
    int m0;         // first query row of the CTA's tile
    int nq, nk;     // sequence lengths
    float scale;    // softmax scale (score_mod sees scale * <q, k>)

    template <class Layout>
    __device__ __forceinline__ ScoreHooks(const Params& p, const Head& hd, const Layout& layout, int m0_, int nq_,
                                          int nk_, float scale_)
        : m0(m0_), nq(nq_), nk(nk_), scale(scale_) {
        static_assert(Layout::kRows == kRows, "ScoreHooks: row slots disagree with the fragment layout");
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            const int q = m0 + layout.row(r);
            qc[r] = q < nq ? q : nq - 1;
            rw[r] = Variant::make_row(p, hd, qc[r]);
        }
    }

    // kEdge: the tile reaches past Nk, so keys are clamped (their scores are masked later).
    template <bool kEdge, class Layout, class Bias>
    struct ScoreModOp {
        const Params& p;
        const Head& hd;
        const ScoreHooks& rows;
        const Layout& layout;
        const Bias& bias;
        float scale;
        int k0, nk;
        __device__ __forceinline__ void operator()(float& s, int r, int col) {
            const int k = k0 + col;
            const int kc = !kEdge || k < nk ? k : nk - 1;
            s = call_score_mod<Variant>(p, hd, rows.rw[r], s * scale, rows.qc[r], kc, bias, layout.row(r), col);
        }
    };
    struct MaskOp {
        const Params& p;
        const Head& hd;
        const ScoreHooks& rows;
        int k0, nk;
        bool need_mask;
        __device__ __forceinline__ void operator()(float& s, int r, int col) {
            const int k = k0 + col;
            bool keep = k < nk;
            if constexpr (Variant::kHasMask) {
                if (keep && need_mask) keep = Variant::mask(p, hd, rows.rw[r], rows.qc[r], k);
            }
            if (!keep) s = neg_inf();
        }
    };

    // The passes of one KV tile (keys [k0, k0 + kBlockN)) of class cls over `frag`; the
    // bias tile (if any) read from global memory.
    template <int kBlockN, class Layout, class Frag>
    __device__ __forceinline__ void apply(const Params& p, const Head& hd, const Layout& layout, Frag& frag, int k0,
                                          TileClass cls) const {
        apply<kBlockN>(p, hd, layout, frag, k0, cls, GatheredBiasOf<Variant>::make(p, hd));
    }
    // The same with the bias tile from `bias` (a BiasSource, common/bias_tile.cuh).
    template <int kBlockN, class Layout, class Frag, class Bias>
    __device__ __forceinline__ void apply(const Params& p, const Head& hd, const Layout& layout, Frag& frag, int k0,
                                          TileClass cls, const Bias& bias) const {
        if constexpr (Variant::kHasScoreTileTransform) {
            ScoreTileView<Layout, Frag> view{layout, frag, m0, k0, nq, nk};
            Variant::transform_score_tile(p, hd, view);
        }
        const bool edge = k0 + kBlockN > nk;
        if constexpr (Variant::kHasScoreMod) {
            if (edge) {
                ScoreModOp<true, Layout, Bias> op{p, hd, *this, layout, bias, scale, k0, nk};
                layout.for_each(frag, op);
            } else {
                ScoreModOp<false, Layout, Bias> op{p, hd, *this, layout, bias, scale, k0, nk};
                layout.for_each(frag, op);
            }
        }
        const bool need_mask = Variant::kHasMask && cls == TileClass::kPartial;
        if (edge || need_mask) {
            MaskOp op{p, hd, *this, k0, nk, need_mask};
            layout.for_each(frag, op);
        }
    }
};

}  // namespace attnjit
