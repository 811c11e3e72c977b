// The element pass of the backward: turns the two raw products of one (query tile, KV
// tile) step, S = <q, k> (unscaled) and dP = <dO, v>, into P and dS in place, with the
// Variant's mask, score_mod and d_score (d score_mod / d s) at each element's (q, k):
//
//   keep = k < Nk && q < Nq && mask(q, k)      (mask on kPartial tiles only)
//   x = scale * S,  t = score_mod(x),  P = keep ? exp2(t log2(e) - LSE_q log2(e)) : 0
//   dS = P (dP - Delta_q) d_score(x)           (0 wherever P is 0)
//
// LSE2 = LSE log2(e) per query, +inf where LSE = -inf (a row with nothing kept: every P
// is then 0, never NaN). Two orientations of the sm80 fragments (MmaCLayout):
//   queries_are_rows  backward_dq: rows are queries (per-row LSE2, Delta, Row held in
//                     registers), columns keys from k0;
//   keys_are_rows     backward_dkdv: rows are keys from k0, columns queries from q0 (LSE2,
//                     Delta read from shared memory per column, Row built per column).
// Hooks never see a clamped-away coordinate: q >= Nq and k >= Nk are clamped to the last
// one and their elements dropped by keep.
#pragma once

#include "attnjit/common/bias_tile.cuh"
#include "attnjit/common/math_constants.h"
#include "attnjit/common/types.cuh"

namespace attnjit {

// LSE2 of one query row from the forward's natural-log LSE.
__device__ __forceinline__ float backward_lse2(float lse) { return lse == neg_inf() ? -neg_inf() : lse * kLog2e; }

template <class Variant, class Params>
struct BackwardScores {
    using Head = typename Variant::Head;
    using Row = typename Variant::Row;

    const Params& p;
    const Head& hd;
    float scale;       // softmax scale applied to <q, k>
    float scale_log2;  // scale * log2(e), for variants without score_mod
    bool need_mask;    // a kPartial tile of a masked variant

    // One element: s (in: <q, k>, out: P), dp (in: <dO, v>, out: dS).
    // kGrads 2 (backward_dkdv with per-key sites): also the per-key sites at (q, k) when
    // in_range (q < Nq and k < Nk, unclamped), from dT = P (dP - Delta)
    // (Variant::input_grads_key, common/input_grads.cuh). backward_dq's gradients:
    // element_dt, then the hooks (queries_are_rows_grads).
    template <int kGrads = 0, class Acc = int>
    __device__ __forceinline__ void element(const Row& row, int q, int k, bool keep, float lse2, float delta,
                                            float& s, float& dp, bool in_range = false, Acc* acc = nullptr) const {
        const float x = s * scale;
        const float pr = probability(row, q, k, keep, lse2, s, x);
        float ds = pr * (dp - delta);
        if constexpr (kGrads == 2) {
            if (in_range) Variant::input_grads_key(p, hd, row, x, q, k, pr == 0.f ? 0.f : ds, *acc);
        }
        if constexpr (Variant::kHasScoreGrad) ds *= Variant::d_score(p, hd, row, x, q, k);
        s = pr;
        dp = pr == 0.f ? 0.f : ds;
    }

    // The element pass of backward_dq with gradients of captured tensors, first half: as
    // element, but s becomes x = scale * <q, k> (backward_dq needs no P afterwards) and
    // dt = P (dP - Delta) (0 wherever P is 0) is kept for the hooks, which run in a second
    // pass: the captured-tensor loads of score_mod then issue together, not one element at
    // a time behind the hooks' branches.
    // kDtInDp: dp ends as dt (no dS: the batch-sum launch needs none). kBiasGiven: score_mod's
    // bias tile value at (q, k) is tile_bias (read once by the caller), not gathered here.
    template <bool kDtInDp = false, bool kBiasGiven = false>
    __device__ __forceinline__ void element_dt(const Row& row, int q, int k, bool keep, float lse2, float delta,
                                               float& s, float& dp, float& dt, float tile_bias = 0.f) const {
        const float x = s * scale;
        const float pr = probability<kBiasGiven>(row, q, k, keep, lse2, s, x, tile_bias);
        float ds = pr * (dp - delta);
        s = x;
        if constexpr (kDtInDp) {
            dp = pr == 0.f ? 0.f : ds;
        } else {
            dt = pr == 0.f ? 0.f : ds;
            if constexpr (Variant::kHasScoreGrad) ds *= Variant::d_score(p, hd, row, x, q, k);
            dp = pr == 0.f ? 0.f : ds;
        }
    }

    // P of one element from s = <q, k> and x = scale * s: the mask (kPartial tiles),
    // score_mod (its bias tile value tile_bias when kBiasGiven, else gathered), exp2
    // against LSE2; 0 where not kept.
    template <bool kBiasGiven = false>
    __device__ __forceinline__ float probability(const Row& row, int q, int k, bool keep, float lse2, float s,
                                                 float x, float tile_bias = 0.f) const {
        if constexpr (Variant::kHasMask) {
            if (keep && need_mask) keep = Variant::mask(p, hd, row, q, k);
        }
        float pr;
        if constexpr (Variant::kHasScoreMod && Variant::kHasBiasTile && kBiasGiven) {
            pr = fast_exp2(Variant::score_mod(p, hd, row, x, q, k, tile_bias) * kLog2e - lse2);
        } else if constexpr (Variant::kHasScoreMod) {
            pr = fast_exp2(score_mod_at<Variant>(p, hd, row, x, q, k) * kLog2e - lse2);
        } else {
            pr = fast_exp2(s * scale_log2 - lse2);
        }
        return keep ? pr : 0.f;
    }

    // backward_dq: rows are queries. qc, rw, lse2, delta per row slot (queries clamped to
    // Nq - 1; padding rows have lse2 = +inf); keys k0 + col, kEdge when the tile passes Nk.
    template <bool kEdge, class Layout, class Frag, int kRows>
    __device__ __forceinline__ void queries_are_rows(const Layout& layout, Frag& s, Frag& dp, const int (&qc)[kRows],
                                                     const Row (&rw)[kRows], const float (&lse2)[kRows],
                                                     const float (&delta)[kRows], int k0, int nk) const {
        ElementOp<kEdge, kRows> op{*this, qc, rw, lse2, delta, k0, nk};
        layout.for_each2(s, dp, op);
    }

    // queries_are_rows with the gradients of captured tensors and scalars (kInputGrads):
    // q_ok per row slot (the row is < Nq), acc the thread's per-CTA sums. s ends as x
    // (element_dt), not P.
    template <bool kEdge, class Layout, class Frag, int kRows, class Acc>
    __device__ __forceinline__ void queries_are_rows_grads(const Layout& layout, Frag& s, Frag& dp,
                                                           const int (&qc)[kRows], const bool (&q_ok)[kRows],
                                                           const Row (&rw)[kRows], const float (&lse2)[kRows],
                                                           const float (&delta)[kRows], int k0, int nk,
                                                           Acc& acc) const {
        Frag dt;
        DtOp<kEdge, kRows> first{*this, qc, rw, lse2, delta, k0, nk};
        layout.for_each3(s, dp, dt, first);
        auto hooks = [&](float& x, float&, float& d, int r, int col) {
            const int k = k0 + col;
            if ((!kEdge || k < nk) && q_ok[r]) {
                acc.slot = r;  // per-query sites add to the row slot's sum
                Variant::input_grads(p, hd, rw[r], x, qc[r], k, d, acc);
            }
        };
        layout.for_each3(s, dp, dt, hooks);
    }

    // queries_are_rows_grads for the batch-sum launch (Variant::kInputGradBatchSum): the one
    // stored site's contribution at each in-range element added into sum (same layout).
    // kBiasGiven: `bias` holds score_mod's bias tile in the layout of s (a tile every batch
    // row reads: the caller reads it once); otherwise it is not read and the tile is gathered.
    template <bool kEdge, bool kBiasGiven, class Layout, class Frag, int kRows>
    __device__ __forceinline__ void queries_are_rows_batch_sum(const Layout& layout, Frag& s, Frag& dp, Frag& sum,
                                                               const int (&qc)[kRows], const bool (&q_ok)[kRows],
                                                               const Row (&rw)[kRows], const float (&lse2)[kRows],
                                                               const float (&delta)[kRows], int k0, int nk,
                                                               Frag& bias) const {
        DtOp<kEdge, kRows, true, kBiasGiven> first{*this, qc, rw, lse2, delta, k0, nk};
        layout.for_each3(s, dp, kBiasGiven ? bias : dp, first);  // dp ends as dt
        auto hooks = [&](float& x, float& d, float& z, int r, int col) {
            const int k = k0 + col;
            if ((!kEdge || k < nk) && q_ok[r]) z += Variant::input_grad_batch_value(p, hd, rw[r], x, qc[r], k, d);
        };
        layout.for_each3(s, dp, sum, hooks);
    }

    // backward_dkdv: rows are keys k0 + layout.row(r) (all < Nk unless kEdge), columns
    // queries q0 + col; lse2_s / delta_s: the tile's per-query values in shared memory.
    // kKeyGrads: also the per-key sites (Variant::input_grads_key) into acc's row slot of
    // each element's key row.
    template <bool kEdge, class Layout, class Frag, bool kKeyGrads = false, class Acc = int>
    __device__ __forceinline__ void keys_are_rows(const Layout& layout, Frag& s, Frag& dp, const float* lse2_s,
                                                  const float* delta_s, int q0, int nq, int k0, int nk,
                                                  Acc* acc = nullptr) const {
        keys_are_rows_pass<kEdge, false, kKeyGrads>(layout, s, dp, lse2_s, delta_s, q0, nq, k0, nk, acc);
    }

    // keys_are_rows in two passes, for a loop that overlaps them with its products (the sm90
    // backward: P while dP's product runs, dS while dV's does); variants without
    // Variant::kHasScoreGrad only (dS then needs P alone, not the score).
    //   keys_are_rows_p   s: <q, k> in, P out
    //   keys_are_rows_ds  dp: <dO, v> in, dS = P (dP - Delta) out (0 wherever P is 0)
    template <bool kEdge, class Layout, class Frag>
    __device__ __forceinline__ void keys_are_rows_p(const Layout& layout, Frag& s, const float* lse2_s, int q0, int nq,
                                                    int k0, int nk) const {
        keys_are_rows_pass<kEdge, true, false>(layout, s, s, lse2_s, nullptr, q0, nq, k0, nk, static_cast<int*>(nullptr));
    }
    template <class Layout, class Frag>
    __device__ __forceinline__ void keys_are_rows_ds(const Layout& layout, const Frag& pr, Frag& dp,
                                                     const float* delta_s) const {
        static_assert(!Variant::kHasScoreGrad, "keys_are_rows_ds: dS of a score_mod needs the score (keys_are_rows)");
        constexpr int kMF = Layout::kMF, kNT = Layout::kNT;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const float dl = delta_s[layout.col(nt, c)];
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                    for (int hi = 0; hi < 2; ++hi) {
                        const float P = pr[mf][nt][2 * hi + c];
                        float& d = dp[mf][nt][2 * hi + c];
                        d = P == 0.f ? 0.f : P * (d - dl);
                    }
            }
    }

private:
    // keys_are_rows' element pass; kPOnly: P alone into s (dp and delta_s unused).
    template <bool kEdge, bool kPOnly, bool kKeyGrads, class Layout, class Frag, class Acc>
    __device__ __forceinline__ void keys_are_rows_pass(const Layout& layout, Frag& s, Frag& dp, const float* lse2_s,
                                                       const float* delta_s, int q0, int nq, int k0, int nk,
                                                       Acc* acc) const {
        constexpr int kMF = Layout::kMF, kNT = Layout::kNT;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int col = layout.col(nt, c);
                const int q = q0 + col;
                const bool q_ok = q < nq;
                const int qcl = q_ok ? q : nq - 1;
                const Row row = Variant::make_row(p, hd, qcl);
                const float l2 = lse2_s[col], dl = kPOnly ? 0.f : delta_s[col];
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                    for (int hi = 0; hi < 2; ++hi) {
                        const int k = k0 + layout.row(2 * mf + hi);
                        const bool keep = q_ok && (!kEdge || k < nk);
                        const int kcl = !kEdge || k < nk ? k : nk - 1;
                        float& x = s[mf][nt][2 * hi + c];
                        if constexpr (kPOnly) {
                            x = probability(row, qcl, kcl, keep, l2, x, x * scale);
                        } else if constexpr (kKeyGrads) {
                            acc->slot = 2 * mf + hi;
                            element<2>(row, qcl, kcl, keep, l2, dl, x, dp[mf][nt][2 * hi + c], keep, acc);
                        } else {
                            element(row, qcl, kcl, keep, l2, dl, x, dp[mf][nt][2 * hi + c]);
                        }
                    }
            }
    }

    // kBiasGiven (with kDtInDp, where element_dt leaves dt alone): the third fragment holds
    // the bias tile's values.
    template <bool kEdge, int kRows, bool kDtInDp = false, bool kBiasGiven = false>
    struct DtOp {
        const BackwardScores& bs;
        const int (&qc)[kRows];
        const Row (&rw)[kRows];
        const float (&lse2)[kRows];
        const float (&delta)[kRows];
        int k0, nk;
        __device__ __forceinline__ void operator()(float& s, float& dp, float& third, int r, int col) const {
            static_assert(!kBiasGiven || kDtInDp, "a given bias tile takes the place of dt");
            const int k = k0 + col;
            const bool keep = !kEdge || k < nk;
            bs.template element_dt<kDtInDp, kBiasGiven>(rw[r], qc[r], keep ? k : nk - 1, keep, lse2[r], delta[r], s,
                                                        dp, third, kBiasGiven ? third : 0.f);
        }
    };

    template <bool kEdge, int kRows>
    struct ElementOp {
        const BackwardScores& bs;
        const int (&qc)[kRows];
        const Row (&rw)[kRows];
        const float (&lse2)[kRows];
        const float (&delta)[kRows];
        int k0, nk;
        __device__ __forceinline__ void operator()(float& s, float& dp, int r, int col) const {
            const int k = k0 + col;
            const bool keep = !kEdge || k < nk;
            bs.element(rw[r], qc[r], keep ? k : nk - 1, keep, lse2[r], delta[r], s, dp);
        }
    };
};

}  // namespace attnjit
