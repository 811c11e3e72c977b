// The score convolution of Multi-Token Attention (SEMANTICS.md section 3) inside the sm80
// fused backward, as a feature of sm80::BackwardFused (kConv). With C = conv(S0) and
// Z = C where j <= i, the backward of one (query tile [m0, m0 + BM), key tile [n0, n0 + BN))
// step needs, for the tile's dS0 = conv^T(dC):
//   dC on rows [m0, m0 + BM + c_q - 1), keys [n0 - p_k, n0 + BN + p_k): P and dP there, so
//   C there, so S0 on rows [m0 - c_q + 1, m0 + BM + c_q - 1), keys [n0 - 2 p_k, ...).
// The CTA recomputes those halos in whole mma fragments (16 rows, 8 keys a side per level):
//   1. S0 = Q K^T over queries [m0 - 16, m0 + BM + 16) x keys [n0 - 16, n0 + BN + 16),
//      kept where 0 <= j <= i (in range), as f16 in shared memory (s0_products);
//   2. C = conv(S0) and dP = dO V^T over queries [m0, m0 + BM + 16) x keys
//      [n0 - 8, n0 + BN + 8); P and dC = P (dP - Delta) d_score by BackwardScores::element
//      with the causal keep rule; dC as f16 in shared memory, P of the core tile into the
//      fused loop's P tile (dc_products);
//   3. dS = conv^T(dC) on the core tile, masked by j <= i (transposed_products), in the
//      fused loop's fragment layout, which stores it as its dS tile: dV, dK and dQ follow
//      as without a convolution;
//   4. dtheta[a][b] += sum over the core tile of dC[i][j] S0[i - c_q + 1 + a][j - p_k + b]
//      (accumulate_dtheta): per tap row a, the band of G_a = dC^T S0_a (keys x keys) on the
//      tensor cores, held in registers across the query tiles of a head; flush_dtheta
//      adds each diagonal (one tap b) in a fixed order, once per (CTA, head), into
//      BackwardArgs::score_conv_partials, which backward_dq_convert sums (deterministic).
// Steps 2 and 3 use sm80/score_conv.cuh's Toeplitz products; conv^T is the convolution
// with the kernel flipped both ways, reading dC rows i + (c_q - 1 - a). Nothing of size
// N x N is written to global memory.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/backward_scores.cuh"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm80/score_conv.cuh"
#include "attnjit/sm80/swizzle.cuh"

namespace attnjit {
namespace sm80 {

template <class E, int BM, int BN, int W, int CQ, int CK, int DQK, int DV>
struct ScoreConvBackward {
    static constexpr int kThreads = W * 32;
    static constexpr int kPk = (CK - 1) / 2;
    static constexpr int kCprQ = DQK / 8, kCprV = DV / 8, kCprP = BN / 8;
    // Operand rows in shared memory, and the offset of the core tile's first row in them.
    static constexpr int kQRows = BM + 32, kQCore = 16;  // queries [m0 - 16, m0 + BM + 16)
    static constexpr int kDoRows = BM + 16;               // dO, LSE2, Delta: [m0, m0 + BM + 16)
    static constexpr int kKRows = BN + 32, kKCore = 16;  // keys [n0 - 16, n0 + BN + 16)
    static constexpr int kVRows = BN + 16, kVCore = 8;   // keys [n0 - 8, n0 + BN + 8)
    // S0 [kQRows x (BN + 32)] and dC [kDoRows x (BN + 16)], f16, with row strides of an
    // odd number of 16-byte chunks (conflict-free ldmatrix); the Toeplitz fragments of
    // conv (theta) and conv^T (theta flipped).
    static constexpr int kS0Stride = BN + 40, kDcStride = BN + 24;
    static constexpr int kS0Bytes = kQRows * kS0Stride * 2, kDcBytes = kDoRows * kDcStride * 2;
    static constexpr int kFragWords = 8 * 3 * 32;
    // Under the spec's mask (Variant::kScoreConvMask): its bits over S0 and dtheta's
    // corrections (correct_dtheta), after the fragments.
    static constexpr int kMaskWords = (kKRows + 31) / 32 + 1;  // a word past the keys
    static constexpr int kMaskOff = kS0Bytes + kDcBytes + 2 * kScoreConvFragmentBytes;
    static constexpr int kCorrOff = kMaskOff + kQRows * kMaskWords * 4;
    static constexpr int kBytes = kMaskOff + score_conv_backward_mask_bytes(BM, BN);
    static_assert(kCorrOff + kScoreConvMaxTaps * 4 == kBytes, "mask bits and corrections as score_conv_backward_mask_bytes");
    static_assert((kS0Stride / 8) % 2 == 1 && (kDcStride / 8) % 2 == 1, "odd chunks per row");
    static_assert(CQ >= 1 && CQ <= 8 && CK >= 1 && CK <= 15 && CK % 2 == 1, "c_q in [1, 8], c_k odd in [1, 15]");

    // dtheta: warp w holds key fragment w % 4 (16 keys) for the tap rows a = w / 4 + 2 i.
    static constexpr int kKeyFrags = BN / 16, kTapGroups = W / kKeyFrags;
    static constexpr int kTapRows = (CQ + kTapGroups - 1) / kTapGroups;
    using ThetaAcc = float[kTapRows][4][4];

    // The Toeplitz fragments of head h: conv reads S0 keys [8 x, 8 x + 24) for output n8
    // tile x (key j: window key 8 + j - 8 x + tap - p_k), conv^T reads dC the same way
    // with the tap mirrored and tap row c_q - 1 - a. Warp 0 writes them; readers wait for a
    // block_sync.
    template <class Variant, class Params>
    __device__ __forceinline__ static void build_fragments(const Params& p, int h, unsigned* frags) {
        static_assert(BM % 32 == 0 && BN == 64 && W == 8, "the convolution's backward: 8 warps, block_n 64");
        build_toeplitz<CQ, CK>(
            frags, [](int key, int n) { return key - n - 8 + kPk; },
            [&](int a, int b) { return Variant::score_conv_weight(p, h, a, b); });
        build_toeplitz<CQ, CK>(
            frags + kFragWords, [](int key, int n) { return n + 8 + kPk - key; },
            [&](int a, int b) { return Variant::score_conv_weight(p, h, CQ - 1 - a, b); });
    }

    // Step 1: S0 (see the top). Units of 16 queries x 16 keys, round robin over the warps;
    // units with every key above every query (or out of range) store zeros unmultiplied.
    __device__ __forceinline__ static void s0_products(unsigned q_s, unsigned k_s, unsigned* s0, int m0, int n0,
                                                       int nq, int nk) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
        const LaneChunks la = LaneRows::a_chunks(lane), lb = LaneRows::b_chunks(lane);
        constexpr int kRowUnits = kQRows / 16, kKeyUnits = kKRows / 16;
        for (int u = warp; u < kRowUnits * kKeyUnits; u += W) {
            const int ru = u / kKeyUnits, ku = u - ru * kKeyUnits;
            const int i_lo = m0 - kQCore + 16 * ru, j_lo = n0 - kKCore + 16 * ku;
            float x[1][2][4] = {};
            if (j_lo <= i_lo + 15 && i_lo + 15 >= 0 && i_lo < nq && j_lo + 15 >= 0 && j_lo < nk)
                gemm_nt<E, 1, 2, DQK / 16, kCprQ, kCprQ>(x, q_s + (16 * ru + LaneRows::a_row(lane)) * kCprQ * 16,
                                                         k_s + (16 * ku + LaneRows::b_row(lane)) * kCprQ * 16, la, lb);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int row = 16 * ru + g + 8 * hf, col = 16 * ku + 8 * nt + 2 * t4;
                    const int i = i_lo + g + 8 * hf, j = j_lo + 8 * nt + 2 * t4;
                    auto kept = [&](int jj) { return i >= 0 && i < nq && jj >= 0 && jj < nk && jj <= i; };
                    s0[(row * kS0Stride + col) / 2] = FromFloat<half_t>::pack2(kept(j) ? x[0][nt][2 * hf] : 0.f,
                                                                                kept(j + 1) ? x[0][nt][2 * hf + 1] : 0.f);
                }
        }
    }

    // Step 1 under the spec's mask: its bits over S0 and S0 under it (conv_mask_pass);
    // whether the mask keeps the whole S0 region (the taps need no gates then).
    template <class Variant, class Params>
    __device__ __forceinline__ static bool mask_s0(const Params& p, const typename Variant::Head& hd, unsigned* s0,
                                                   unsigned* bits, int m0, int n0, int nq, int nk) {
        return conv_mask_pass<Variant, Params, kQRows, kKRows, kMaskWords, kS0Stride, W>(p, hd, s0, bits, m0 - kQCore,
                                                                                       n0 - kKCore, nq, nk);
    }

    // Step 2: C, dP, P, dC (see the top). stats: LSE2 [kDoRows] | Delta [kDoRows] of the
    // step; p_s: the fused loop's swizzled P tile [BM x BN] of E.
    template <class Variant, class Params>
    __device__ __forceinline__ static void dc_products(const BackwardScores<Variant, Params>& scores,
                                                       const typename Variant::Head& hd, unsigned s0_s,
                                                       const unsigned* frags, unsigned do_s, unsigned v_s,
                                                       const float* stats, unsigned* dc, unsigned p_s, int m0, int n0,
                                                       int nq, int nk, const unsigned* s0, const unsigned* bits,
                                                       bool taps_kept) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
        const ConvMaskBits<kMaskWords> m{bits};  // when !taps_kept (the spec's mask)
        const unsigned short* const s0h = reinterpret_cast<const unsigned short*>(s0);  // S0, generic
        const LaneChunks la = LaneRows::a_chunks(lane), lb = LaneRows::b_chunks(lane);
        constexpr int kRowUnits = kDoRows / 16, kKeyUnits = kVRows / 16;
        for (int u = warp; u < kRowUnits * kKeyUnits; u += W) {
            const int ru = u / kKeyUnits, ku = u - ru * kKeyUnits;
            const int i_lo = m0 + 16 * ru, j_lo = n0 - kVCore + 16 * ku;
            float c[1][2][4] = {}, dp[1][2][4] = {};
            if (j_lo <= i_lo + 15 && i_lo < nq && j_lo + 15 >= 0 && j_lo < nk) {
                gemm_nt<E, 1, 2, DV / 16, kCprV, kCprV>(dp, do_s + (16 * ru + LaneRows::a_row(lane)) * kCprV * 16,
                                                        v_s + (16 * ku + LaneRows::b_row(lane)) * kCprV * 16, la, lb);
                // Output row r reads S0 row r - (c_q - 1) + a: S0's row kQCore + that.
                toeplitz_products<kS0Stride, CQ>(c, s0_s, kQCore + 16 * ru - (CQ - 1), frags, 2 * ku);
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = 16 * ru + g + 8 * hf, i = m0 + r;
                    const bool i_ok = i < nq;
                    const int qc = i_ok ? i : nq - 1;
                    const typename Variant::Row row = Variant::make_row(scores.p, hd, qc);
                    const float lse2 = stats[r], delta = stats[kDoRows + r];
#pragma unroll
                    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int j = j_lo + 8 * nt + 2 * t4 + e;
                            bool keep = i_ok && j >= 0 && j < nk && j <= i;
                            if (!taps_kept) {  // the spec's mask: keep, and C's taps gated
                                const int rs = kQCore + r, cs = j - n0 + kKCore, r0 = rs - (CQ - 1);
                                keep = keep && m.at(rs, cs);
                                if (keep && !(m.col_all(r0, cs, CQ) && m.row_all(rs, cs - kPk, CK)))
                                    c[0][nt][2 * hf + e] = gated_tap_sum<CQ, CK, kS0Stride>(
                                        s0h, r0, cs - kPk,
                                        [&](int a, int b) { return Variant::score_conv_weight(scores.p, hd.h, a, b); },
                                        [&](int a, int b) { return m.at(r0 + a, cs) && m.at(rs, cs - kPk + b); });
                            }
                            scores.element(row, qc, j < 0 ? 0 : j < nk ? j : nk - 1, keep, lse2, delta,
                                           c[0][nt][2 * hf + e], dp[0][nt][2 * hf + e]);
                        }
                }
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int row = 16 * ru + g + 8 * hf, col = 16 * ku + 8 * nt + 2 * t4;
                    dc[(row * kDcStride + col) / 2] = FromFloat<half_t>::pack2(dp[0][nt][2 * hf], dp[0][nt][2 * hf + 1]);
                    const int chunk = 2 * ku + nt - kVCore / 8;  // of the core keys
                    if (row < BM && chunk >= 0 && chunk < kCprP)  // warp-uniform but for row
                        ptx::st_shared_b32(p_s + row * kCprP * 16 + swz_chunk<kCprP>(chunk, row & 7) * 16 + 4 * t4,
                                           FromFloat<E>::pack2(c[0][nt][2 * hf], c[0][nt][2 * hf + 1]));
                }
        }
    }

    // Step 3: dS of the core tile, in the fused loop's S layout (kMF fragments of rows from
    // row0, kNT n8 tiles from core key chunk x0): conv^T(dC), kept where j <= i in range.
    // Under the spec's mask (bits, when !taps_kept): dS also 0 where mask(i, j) is false,
    // and where a tap's gate is clear, dS0 again tap by tap from dC in shared memory: dC
    // rows i .. i + c_q - 1, keys j - p_k .. j + p_k, the kernel flipped both ways.
    template <class Variant, class Params, int kMF, int kNT>
    __device__ __forceinline__ static void transposed_products(float (&ds)[kMF][kNT][4], unsigned dc_s,
                                                               const unsigned* frags, int row0, int x0, int m0, int n0,
                                                               int nq, int nk, const Params& p, int h,
                                                               const unsigned* dc, const unsigned* bits,
                                                               bool taps_kept) {
        const int lane = threadIdx.x & 31;
        const ConvMaskBits<kMaskWords> m{bits};
        const unsigned short* const dch = reinterpret_cast<const unsigned short*>(dc);  // dC, generic
        // Output row r reads dC row r + (c_q - 1 - a): tap row a' = c_q - 1 - a of the
        // flipped fragments. Output key chunk x reads dC key chunks x .. x + 2.
        toeplitz_products<kDcStride, CQ>(ds, dc_s, row0, frags + kFragWords, x0);
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int i = m0 + row0 + 16 * mf + (lane >> 2) + 8 * hf;
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int j = n0 + 8 * (x0 + nt) + 2 * (lane & 3) + e;
                        bool keep = i < nq && j < nk && j <= i;
                        if (!taps_kept) {
                            const int rs = kQCore + i - m0, cs = kKCore + j - n0;  // S0 (and bits)
                            const int rd = i - m0, cd = kVCore + j - n0;            // dC
                            keep = keep && m.at(rs, cs);
                            if (keep && !(m.col_all(rs, cs, CQ) && m.row_all(rs, cs - kPk, CK)))
                                ds[mf][nt][2 * hf + e] = gated_tap_sum<CQ, CK, kDcStride>(
                                    dch, rd, cd - kPk,
                                    [&](int a, int b) { return Variant::score_conv_weight(p, h, CQ - 1 - a, CK - 1 - b); },
                                    [&](int a, int b) { return m.at(rs + a, cs) && m.at(rs, cs - kPk + b); });
                        }
                        if (!keep) ds[mf][nt][2 * hf + e] = 0.f;
                    }
            }
    }

    // Step 4 (see the top), for this warp's key fragment and tap rows: G_a[j][j'] +=
    // sum over the tile's BM rows i of dC[i][j] S0[i - c_q + 1 + a][j'], for the 16 keys j
    // of the fragment and the 32 keys j' in [j_lo - 8, j_lo + 24) around them (every tap).
    __device__ __forceinline__ static void accumulate_dtheta(ThetaAcc& acc, unsigned dc_s, unsigned s0_s) {
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        const int kf = warp % kKeyFrags, group = warp / kKeyFrags;
        // dC column of core key 16 kf: 16 kf + 8; S0 column of core key 16 kf - 8: 16 kf + 8.
        const unsigned a_ld = dc_s + ((lane & 7) * kDcStride + 16 * kf + 8 + 8 * ((lane >> 3) & 1)) * 2;
        const unsigned b_ld = s0_s + (((lane & 7) + kQCore - (CQ - 1)) * kS0Stride + 16 * kf + 8 + 8 * (lane >> 3)) * 2;
#pragma unroll
        for (int ks = 0; ks < BM / 8; ++ks) {
            unsigned a0, a1;  // dC^T: rows are keys, k the 8 query rows 8 ks ..
            ptx::ldmatrix_x2_trans(a_ld + 8 * ks * kDcStride * 2, a0, a1);
#pragma unroll
            for (int t = 0; t < kTapRows; ++t) {
                const int a = group + kTapGroups * t;
                if (a < CQ) {
                    unsigned b[4];
                    ptx::ldmatrix_x4_trans(b_ld + (8 * ks + a) * kS0Stride * 2, b[0], b[1], b[2], b[3]);
#pragma unroll
                    for (int n = 0; n < 4; ++n) ptx::mma_16808_f16(acc[t][n], a0, a1, b[n]);
                }
            }
        }
    }

    // Under the spec's mask (when !taps_kept): accumulate_dtheta took every tap; thread
    // a c_k + b takes back, into corr[a c_k + b], dC[i][j] S0[i - c_q + 1 + a][j - p_k + b]
    // over the core tile's (i, j) whose tap (a, b) has a clear gate (mask(i, j - p_k + b)
    // and mask(i - c_q + 1 + a, j)), rows and keys in order (deterministic). Reads dC, S0
    // and the bits; writes only corr.
    __device__ __forceinline__ static void correct_dtheta(float* corr, const unsigned* dc, const unsigned* s0,
                                                          const unsigned* bits) {
        const int t = threadIdx.x;
        if (t >= CQ * CK) return;
        const int a = t / CK, b = t - a * CK;
        const ConvMaskBits<kMaskWords> m{bits};
        const unsigned short* const dch = reinterpret_cast<const unsigned short*>(dc);
        const unsigned short* const s0h = reinterpret_cast<const unsigned short*>(s0);
        float sum = 0.f;
        for (int r = 0; r < BM; ++r) {
            const int rs = kQCore + r, ra = rs - (CQ - 1) + a;  // S0 rows of i and of the tap
#pragma unroll
            for (int w = 0; w < BN / 32; ++w) {
                const int cs = kKCore + 32 * w;  // S0 column of the word's first key
                unsigned clear = m.window(rs, cs) & ~(m.window(rs, cs - kPk + b) & m.window(ra, cs));
                while (clear) {
                    const int x = __ffs(clear) - 1;
                    clear &= clear - 1;
                    half_t d, z;
                    d.bits = dch[r * kDcStride + kVCore + 32 * w + x];
                    z.bits = s0h[ra * kS0Stride + cs + x - kPk + b];
                    sum += to_float(d) * to_float(z);
                }
            }
        }
        corr[t] -= sum;
    }

    // The diagonals of the G_a: dtheta[a][b] = sum_j G_a[j][j - p_k + b], added in key order
    // through `scratch` (BN x 33 floats of free shared memory), into out[a * CK + b]; then
    // acc is cleared. Every thread calls it (block_syncs inside).
    // corr (the spec's mask: correct_dtheta's sums, then cleared) is added to each, when given.
    __device__ __forceinline__ static void flush_dtheta(ThetaAcc& acc, float* scratch, float* out, float* corr) {
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int kf = warp % kKeyFrags, group = warp / kKeyFrags;
#pragma unroll
        for (int t = 0; t < kTapRows; ++t)
            for (int a0 = 0; a0 < kTapGroups; ++a0) {
                const int a = a0 + kTapGroups * t;
                if (a >= CQ) break;
                if (group == a0) {
                    // Element (j = 16 kf + m, j' = 16 kf - 8 + w): scratch[j][w].
#pragma unroll
                    for (int n = 0; n < 4; ++n)
#pragma unroll
                        for (int e = 0; e < 4; ++e)
                            scratch[(16 * kf + (lane >> 2) + 8 * (e >> 1)) * 33 + 8 * n + 2 * (lane & 3) + (e & 1)] =
                                acc[t][n][e];
                }
                block_sync();
                if (tid < CK) {
                    // j' - j = tap - p_k: w = m + 8 + tap - p_k.
                    float s = 0.f;
                    for (int j = 0; j < BN; ++j) s += scratch[j * 33 + (j & 15) + 8 + tid - kPk];
                    if (corr) {
                        s += corr[a * CK + tid];
                        corr[a * CK + tid] = 0.f;
                    }
                    out[a * CK + tid] = s;
                }
                block_sync();
            }
#pragma unroll
        for (int t = 0; t < kTapRows; ++t)
#pragma unroll
            for (int n = 0; n < 4; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[t][n][e] = 0.f;
    }
};

}  // namespace sm80
}  // namespace attnjit
