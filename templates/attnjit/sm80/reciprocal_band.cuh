// The reciprocal band (RA, SEMANTICS.md section 4) in the sm80 forward:
//   T_ij = s_ij + alpha_h [band(i, j)] s_ji,   s_ji = <q_j, k_i>   (scaled with s_ij, later)
// band: 0 <= i - j <= W (causal) or |i - j| <= W. For a query tile [m0, m0 + BM) and a key
// tile [n0, n0 + BN) that meet the band, the transposed scores are one more tensor-core
// product in the S tile's own layout: R = K[m0 .. m0 + BM) Q[n0 .. n0 + BN)^T (row i, column
// j), so no transpose is needed. The main loop keeps K at the query tile's rows in shared
// memory (loaded with Q) and copies Q at the key tile's rows beside each K tile that meets
// the band (the same cp.async group, a ring of its own). R is computed 16 columns at a time
// (8 kMF registers, not a second S tile) and only where a warp's rows meet the band.
#pragma once

#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"

namespace attnjit {
namespace sm80 {

template <class E, int kMF, int kNT, int kKQ, int kCprQ, int kWidth, bool kCausal>
struct RecipBand {
    static_assert(kNT % 2 == 0, "RecipBand: the S tile's columns go in 16-column chunks");
    static constexpr int kLow = kCausal ? 0 : -kWidth;  // the band: kLow <= i - j <= kWidth

    // Whether rows [i0, i1] and columns [j0, j1] have a pair in the band.
    __device__ __forceinline__ static bool meets(int i0, int i1, int j0, int j1) {
        return i1 - j0 >= kLow && i0 - j1 <= kWidth;
    }

    // s += alpha * [band] * R for the warp's rows of the tile at (m0, n0). kr_ld: the lane's
    // ldmatrix row address of the K rows at the tile's queries (as an A operand, like Q);
    // qr_ld: that of the Q rows at the tile's keys (as a B operand, like K).
    template <class SLayout>
    __device__ __forceinline__ static void add(float (&s)[kMF][kNT][4], const SLayout& sl, unsigned kr_ld,
                                               unsigned qr_ld, const LaneChunks& la, const LaneChunks& lb,
                                               float alpha, int m0, int n0) {
        const int warp_row0 = m0 + (threadIdx.x >> 5) * 16 * kMF;
#pragma unroll
        for (int c = 0; c < kNT / 2; ++c) {
            if (!meets(warp_row0, warp_row0 + 16 * kMF - 1, n0 + 16 * c, n0 + 16 * c + 15)) continue;  // warp-uniform
            float r[kMF][2][4];
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) r[mf][nt][e] = 0.f;
            gemm_nt<E, kMF, 2, kKQ, kCprQ, kCprQ>(r, kr_ld, qr_ld + c * 16 * kCprQ * 16, la, lb);
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int d = (m0 + sl.row(2 * mf + (e >> 1))) - (n0 + sl.col(2 * c + nt, e));
                        if (d >= kLow && d <= kWidth) s[mf][2 * c + nt][e] += alpha * r[mf][nt][e];
                    }
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
