// The reciprocal band (RA, SEMANTICS.md section 4) in the sm80 kernels:
//   T_ij = s_ij + alpha_h [band(i, j)] s_ji,   s_ji = <q_j, k_i>   (scaled with s_ij, later)
// band: 0 <= i - j <= W (causal) or |i - j| <= W. For a query tile [i0, i0 + BM) and a key
// tile [j0, j0 + BN) that meet the band, the transposed scores are one more tensor-core
// product in the score tile's own layout, so no transpose is needed:
//   queries as rows (forward, backward_dq): R = K[i0 ..) Q[j0 ..)^T    R[i, j] = <k_i, q_j>
//   keys as rows (backward_dkdv):           R^T = Q[j0 ..) K[i0 ..)^T  R^T[j, i] = <q_j, k_i>
// The kernels keep K at the query tile's rows and Q at the key tile's rows in shared memory
// beside their pipelines. R is computed 16 columns at a time (8 kMF registers, not a
// second score tile) and only where a warp's rows meet the band.
//
// Backward (dS the score gradient after score_mod's derivative, at T):
//   dQ_j += alpha_h sum_i band dS_ij k_i,  dK_i += alpha_h sum_j band dS_ij q_j
//   d alpha_h = sum_ij band dS_ij <q_j, k_i> = sum_i <k_i, U_i>,  U_i = sum_j band dS_ij q_j
// (all times scale). backward_dq forms U (its rows are queries i), backward_dkdv the dQ term
// (its rows are keys j): band_products hands out (band o dS) times a tile in shared memory,
// 16 columns at a time, for the caller to add where it keeps the sums.
#pragma once

#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"

namespace attnjit {
namespace sm80 {

// kWarpsN: warps across the score tile's columns (MmaCLayout's; b_ld then starts at the
// warp's first column).
template <class E, int kMF, int kNT, int kKQ, int kCprQ, int kWidth, bool kCausal, bool kKeysAreRows = false,
          int kWarpsN = 1>
struct RecipBand {
    static_assert(kNT % 2 == 0, "RecipBand: the score tile's columns go in 16-column chunks");
    static constexpr int kLow = kCausal ? 0 : -kWidth;  // the band: kLow <= i - j <= kWidth
    using Pair = MmaCLayout<kMF, 2>;                    // a band product: 16 columns of the warp's rows

    // Whether queries [i0, i1] and keys [j0, j1] have a pair in the band.
    __device__ __forceinline__ static bool meets(int i0, int i1, int j0, int j1) {
        return i1 - j0 >= kLow && i0 - j1 <= kWidth;
    }
    // The same for rows [r0, r1] and columns [c0, c1] of the score tile.
    __device__ __forceinline__ static bool meets_tile(int r0, int r1, int c0, int c1) {
        return kKeysAreRows ? meets(c0, c1, r0, r1) : meets(r0, r1, c0, c1);
    }
    __device__ __forceinline__ static bool in_band(int row, int col) {
        const int d = kKeysAreRows ? col - row : row - col;
        return d >= kLow && d <= kWidth;
    }

    // s += alpha * [band] * R for the warp's rows of the tile whose rows start at r0 and
    // columns at c0 (positions). a_ld: the lane's ldmatrix row address of the tile's A operand
    // (K at the query rows; keys as rows: Q at the key rows), b_ld: of its B operand (Q at the
    // key columns; keys as rows: K at the query columns).
    template <class SLayout>
    __device__ __forceinline__ static void add(float (&s)[kMF][kNT][4], const SLayout& sl, unsigned a_ld, unsigned b_ld,
                                               const LaneChunks& la, const LaneChunks& lb, float alpha, int r0, int c0) {
        const int warp = threadIdx.x >> 5;
        const int warp_row0 = r0 + warp / kWarpsN * 16 * kMF, warp_col0 = c0 + warp % kWarpsN * 8 * kNT;
#pragma unroll
        for (int c = 0; c < kNT / 2; ++c) {
            if (!meets_tile(warp_row0, warp_row0 + 16 * kMF - 1, warp_col0 + 16 * c, warp_col0 + 16 * c + 15))
                continue;  // warp-uniform
            float r[kMF][2][4];
            Pair::clear(r);
            gemm_nt<E, kMF, 2, kKQ, kCprQ, kCprQ>(r, a_ld, b_ld + c * 16 * kCprQ * 16, la, lb);
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        if (in_band(r0 + sl.row(2 * mf + (e >> 1)), c0 + sl.col(2 * c + nt, e)))
                            s[mf][2 * c + nt][e] += alpha * r[mf][nt][e];
        }
    }

    // ds = [band] ds (the elements outside the band take no part in the band's gradients).
    template <class SLayout>
    __device__ __forceinline__ static void mask(float (&ds)[kMF][kNT][4], const SLayout& sl, int r0, int c0) {
        auto op = [&](float& v, int r, int col) {
            if (!in_band(r0 + sl.row(r), c0 + col)) v = 0.f;
        };
        sl.for_each(ds, op);
    }

    // fn(mf, nt, e, row, col) for each element of a band product u [kMF][2][4] of the column
    // pair `pair` (band_products): its row and column in the tile.
    template <class SLayout, class Fn>
    __device__ __forceinline__ static void for_each_product(const SLayout& sl, int pair, Fn&& fn) {
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) fn(mf, nt, e, sl.row(2 * mf + (e >> 1)), 16 * pair + 8 * nt + sl.col(0, e));
    }

    // out(u, pair) for each pair of 16 columns of the [16 kMF x DQK] product of the packed
    // band-masked dS (a, k steps of 16 over the tile's columns) with the tile B [BN x DQK] in
    // shared memory, read transposed (b_t: the lane's row address, as gemm_rn takes it):
    // u[mf][nt][e] is at the warp's row slot 2 mf + (e >> 1) and column 16 pair + 8 nt +
    // (col0 + (e & 1)) of MmaCLayout<kMF, 2>.
    template <int kDqk, int kPair = 0, class Out>
    __device__ __forceinline__ static void band_products(const unsigned (&a)[kMF][kNT / 2][4], unsigned b_t,
                                                         const LaneChunks& la, Out& out) {
        if constexpr (kPair < kDqk / 16) {
            float u[kMF][2][4];
            Pair::clear(u);
            gemm_rn<E, kMF, 2, kNT / 2, kCprQ, kPair>(u, a, b_t, la);
            out(u, kPair);
            band_products<kDqk, kPair + 1>(a, b_t, la, out);
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
