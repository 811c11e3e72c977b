// The score convolution of Multi-Token Attention (SEMANTICS.md section 3) inside the sm80
// forward, as a feature of sm80::Mainloop (kConv). Per KV tile the CTA
//   1. multiplies the extended tile: query rows [m0 - 16, m0 + BM) by keys
//      [n0 - 8, n0 + BN + 8) (16 halo rows, 8 halo keys a side: whole mma fragments for
//      c_q - 1 <= 7 and p_k <= 7), recomputing the halo instead of exchanging it;
//   2. stores S0 = that tile where j' <= i' and (i', j') is in range, else 0, as f16 in
//      shared memory (unscaled <q, k>: the convolution is linear, so the hooks scale C as
//      they scale S; f16 keeps 11 bits of every score, bf16 would keep 8);
//   3. convolves on the tensor cores: C = sum_a S0[rows shifted by a] T_a, where T_a is
//      the banded Toeplitz matrix of theta[h][a][.]. An n8 output tile reads 32 extended
//      keys (two k16 steps), and T_a restricted to them is the same for every tile, so
//      its B fragments are built once per CTA (write_fragments). Each A fragment (16 rows
//      x 16 keys of S0, one ldmatrix) serves output tile c (first k step) and c - 2
//      (second).
// C then goes through the hooks (score_mod, the causal mask) and the online softmax like
// any score tile. No N x N buffer is ever written to global memory.
#pragma once

#include "attnjit/common/ptx.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {
namespace sm80 {

template <class E, int BM, int BN, int W, int CQ, int CK>
struct ScoreConv {
    static constexpr int kHaloRows = 16;      // query rows above the tile
    static constexpr int kHaloKeys = 8;       // keys on each side
    static constexpr int kPk = (CK - 1) / 2;  // key taps on each side of the key
    static constexpr int kMF = BM / (16 * W);
    static constexpr int kNT = BN / 8;        // n8 output tiles
    static constexpr int kNX = kNT + 2;       // n8 tiles of the extended score tile
    static constexpr int kStride = BN + 24;   // halfs per S0 row: BN + 16 keys, 8 zeros
    static constexpr int kS0Bytes = (BM + kHaloRows) * kStride * 2;
    static_assert(CQ >= 1 && CQ <= 8, "score convolution: c_q must be in [1, 8]");
    static_assert(CK >= 1 && CK <= 15 && CK % 2 == 1, "score convolution: c_k must be odd, in [1, 15]");
    static_assert((kStride / 8) % 2 == 1, "an odd number of 16-byte chunks per S0 row: conflict-free ldmatrix");

    // The Toeplitz B fragments (one uint2 per (a, k step, lane)) and the zero columns of
    // S0; before the first block_sync of the main loop.
    template <class Variant, class Params>
    __device__ __forceinline__ static void prepare(const Params& p, int h, uint2* frags, unsigned* s0) {
        const int tid = threadIdx.x;
        if (tid < 32) {
            const int g = tid >> 2, t4 = tid & 3;
#pragma unroll
            for (int a = 0; a < CQ; ++a)
#pragma unroll
                for (int kk = 0; kk < 2; ++kk) {
                    // B[k][n] = theta[h][a][b] for the key tap b that extended key 16 kk + k
                    // is for output key n of an n8 tile (0 outside the kernel).
                    auto w = [&](int k) {
                        const int b = 16 * kk + k - g - kHaloKeys + kPk;
                        return b >= 0 && b < CK ? Variant::score_conv_weight(p, h, a, b) : 0.f;
                    };
                    frags[(2 * a + kk) * 32 + tid] =
                        uint2{FromFloat<half_t>::pack2(w(2 * t4), w(2 * t4 + 1)),
                              FromFloat<half_t>::pack2(w(2 * t4 + 8), w(2 * t4 + 9))};
                }
        }
        for (int r = tid; r < BM + kHaloRows; r += W * 32) {
            unsigned* z = s0 + (r * kStride + BN + 2 * kHaloKeys) / 2;
#pragma unroll
            for (int i = 0; i < 4; ++i) z[i] = 0u;
        }
    }

    // Stores an extended-score fragment (rows from ext row `row0`, n8 tiles from extended
    // key `col0`) as S0: <q_i', k_j'> where 0 <= j' <= i' and j' < nk, else 0. i0, j0: the
    // query and key of extended row / key 0 (m0 - 16, n0 - 8).
    // interior: every extended key is in [0, nk) and at or below every extended row's
    // diagonal (j0 >= 0, j0 + BN + 16 <= nk, j0 + BN + 15 <= i0): no test per element.
    template <int M, int N>
    __device__ __forceinline__ static void store_s0(unsigned* s0, const float (&x)[M][N][4], int row0, int col0, int i0,
                                                    int j0, int nk, bool interior) {
        const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
        if (interior) {
#pragma unroll
            for (int mf = 0; mf < M; ++mf)
#pragma unroll
                for (int nt = 0; nt < N; ++nt)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf)
                        s0[((row0 + 16 * mf + g + 8 * hf) * kStride + col0 + 8 * nt + 2 * t4) / 2] =
                            FromFloat<half_t>::pack2(x[mf][nt][2 * hf], x[mf][nt][2 * hf + 1]);
            return;
        }
#pragma unroll
        for (int mf = 0; mf < M; ++mf)
#pragma unroll
            for (int nt = 0; nt < N; ++nt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int row = row0 + 16 * mf + g + 8 * hf, col = col0 + 8 * nt + 2 * t4;
                    const int i = i0 + row, j = j0 + col;
                    auto kept = [&](int jj) { return jj >= 0 && jj < nk && jj <= i; };
                    s0[(row * kStride + col) / 2] = FromFloat<half_t>::pack2(kept(j) ? x[mf][nt][2 * hf] : 0.f,
                                                                              kept(j + 1) ? x[mf][nt][2 * hf + 1] : 0.f);
                }
    }

    // C = sum_a S0[rows shifted by a] T_a for this warp's rows (unscaled, like S = Q K^T).
    __device__ __forceinline__ static void convolve(float (&c)[kMF][kNT][4], unsigned s0_s, const uint2* frags) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, hi = lane >> 4;
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int a = 0; a < CQ; ++a) {
                const uint2 f0 = frags[(2 * a) * 32 + lane], f1 = frags[(2 * a + 1) * 32 + lane];
                // Output row i reads S0 row i - (c_q - 1) + a: extended row 16 + that.
                const int row = kHaloRows + warp * 16 * kMF + 16 * mf - (CQ - 1) + a + a_row;
                const unsigned base = s0_s + (row * kStride + 8 * hi) * 2;
#pragma unroll
                for (int x = 0; x < kNX; ++x) {
                    unsigned af[4];
                    ptx::ldmatrix_x4(base + x * 16, af[0], af[1], af[2], af[3]);
                    if (x < kNT) ptx::Mma16816<half_t>::run(c[mf][x], af, f0.x, f0.y);
                    if (x >= 2) ptx::Mma16816<half_t>::run(c[mf][x - 2], af, f1.x, f1.y);
                }
            }
    }
};

}  // namespace sm80
}  // namespace attnjit
