// The score convolution of Multi-Token Attention (SEMANTICS.md section 3) inside the sm80
// forward, as a feature of sm80::Mainloop (kConv). Per KV tile the CTA
//   1. multiplies the extended tile: query rows [m0 - 16, m0 + BM) by keys
//      [n0 - 8, n0 + BN + 8) (16 halo rows, 8 halo keys a side: whole mma fragments for
//      c_q - 1 <= 7 and p_k <= 7), recomputing the halo instead of exchanging it;
//   2. stores S0 = that tile where j' <= i' and (i', j') is in range, else 0, as f16 in
//      shared memory (unscaled <q, k>: the convolution is linear, so the hooks scale C as
//      they scale S; f16 keeps 11 bits of every score, bf16 would keep 8);
//   3. convolves on the tensor cores: C = sum_a S0[rows shifted by a] T_a, where T_a is
//      the banded Toeplitz matrix of theta[h][a][.]. An n8 output tile reads 24 extended
//      keys (three k8 steps of mma m16n8k8), and T_a restricted to them is the same for
//      every tile, so its B fragments are built once per CTA (prepare). Each A fragment
//      (16 rows x 8 keys of S0, one ldmatrix.x2) serves three output tiles.
// C then goes through the hooks (score_mod, the causal mask) and the online softmax like
// any score tile. No N x N buffer is ever written to global memory.
#pragma once

#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/tile_class.h"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/gemm.cuh"

namespace attnjit {
namespace sm80 {

// The banded Toeplitz B fragments of a convolution along the keys, one register per
// (query tap a, k8 step kb, lane): an n8 output tile reads a 24-key window of the
// convolved tile (three k8 steps), and B[k][n] = weight(a, tap) for the key tap that
// window key 8 kb + k is for output key n (weight 0 where the tap is outside [0, c_k)).
// tap_of(window_key, n) gives that tap. Built by warp 0.
template <int CQ, int CK, class TapOf, class Weight>
__device__ __forceinline__ void build_toeplitz(unsigned* frags, TapOf tap_of, Weight weight) {
    const int tid = threadIdx.x;
    if (tid < 32) {
        const int g = tid >> 2, t4 = tid & 3;
#pragma unroll
        for (int a = 0; a < CQ; ++a)
#pragma unroll
            for (int kb = 0; kb < 3; ++kb) {
                auto w = [&](int k) {
                    const int b = tap_of(8 * kb + k, g);
                    return b >= 0 && b < CK ? weight(a, b) : 0.f;
                };
                frags[(3 * a + kb) * 32 + tid] = FromFloat<half_t>::pack2(w(2 * t4), w(2 * t4 + 1));
            }
    }
}

// c[mf][t] += sum_a A_a T_a on the tensor cores (mma m16n8k8, f16): A_a is the f16 tile in
// shared memory (kStride halfs a row, unswizzled: an odd number of 16-byte chunks a row
// keeps ldmatrix conflict-free) at rows row0 + a + 16 mf .. + 15, T_a the Toeplitz
// fragments frags[3 a + kb] (build_toeplitz). Output n8 tile x0 + t reads the tile's key
// chunks x0 + t .. x0 + t + 2, so the A fragment of one chunk (one ldmatrix.x2) serves
// three output tiles.
template <int kStride, int CQ, int MF, int NT>
__device__ __forceinline__ void toeplitz_products(float (&c)[MF][NT][4], unsigned tile_s, int row0,
                                                  const unsigned* frags, int x0) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int a = 0; a < CQ; ++a) {
            const unsigned f[3] = {frags[(3 * a) * 32 + lane], frags[(3 * a + 1) * 32 + lane],
                                   frags[(3 * a + 2) * 32 + lane]};
            const unsigned base = tile_s + (row0 + 16 * mf + a + (lane & 15)) * kStride * 2 + x0 * 16;
#pragma unroll
            for (int x = 0; x < NT + 2; ++x) {
                unsigned a0, a1;
                ptx::ldmatrix_x2(base + x * 16, a0, a1);
#pragma unroll
                for (int kb = 0; kb < 3; ++kb)
                    if (x - kb >= 0 && x - kb < NT) ptx::mma_16808_f16(c[mf][x - kb], a0, a1, f[kb]);
            }
        }
}

// The spec's mask over a staged S0 region (Variant::kScoreConvMask): one bit an element,
// kMW 32-bit words a row (at least one word past the region's keys, so that a 64-bit
// window read never leaves the row), 1 outside the sequences (S0 is 0 there anyway).
template <int kMW>
struct ConvMaskBits {
    const unsigned* bits;
    __device__ __forceinline__ bool at(int r, int c) const { return ((bits[r * kMW + (c >> 5)] >> (c & 31)) & 1u) != 0; }
    // The 32 bits of row r from column c.
    __device__ __forceinline__ unsigned window(int r, int c) const {
        const unsigned long long x =
            bits[r * kMW + (c >> 5)] | static_cast<unsigned long long>(bits[r * kMW + (c >> 5) + 1]) << 32;
        return static_cast<unsigned>(x >> (c & 31));
    }
    // Every bit of row r in columns [c, c + n), n <= 32.
    __device__ __forceinline__ bool row_all(int r, int c, int n) const {
        const unsigned want = n == 32 ? ~0u : (1u << n) - 1u;
        return (window(r, c) & want) == want;
    }
    // Every bit of column c in rows [r, r + n).
    __device__ __forceinline__ bool col_all(int r, int c, int n) const {
        bool all = true;
#pragma unroll 1
        for (int i = 0; i < n; ++i) all = all && at(r + i, c);
        return all;
    }
};

// After every warp has stored S0 (kRows x kKeys of f16, kStride halfs a row; query i0 + r,
// key j0 + c at (r, c)) and a block_sync: unless the interval analysis of the spec's mask
// (Variant::score_conv_mask_classify, `bits` its scratch) keeps the region whole, the
// mask's bits into `bits` and S0 zeroed where the mask drops an element. Returns whether
// every bit is set (then `bits` is not written): the block-wide AND of the barrier that
// publishes both. Block-collective; a row a warp, its Row once.
template <class Variant, class Params, int kRows, int kKeys, int kMW, int kStride, int W>
__device__ __forceinline__ bool conv_mask_pass(const Params& p, const typename Variant::Head& hd, unsigned* s0,
                                               unsigned* bits, int i0, int j0, int nq, int nk) {
    static_assert(kMW * 32 >= kKeys + 32, "a word past the keys");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    BlockCtx ctx{reinterpret_cast<long long*>(bits), static_cast<int>(threadIdx.x), W * 32};
    const int q0 = i0 > 0 ? i0 : 0, q1 = i0 + kRows - 1 < nq ? i0 + kRows - 1 : nq - 1;
    const int k0 = j0 > 0 ? j0 : 0, k1 = j0 + kKeys - 1 < nk ? j0 + kKeys - 1 : nk - 1;
    if (Variant::score_conv_mask_classify(p, hd, q0, q1, k0, k1, ctx) == TileClass::kFull) return true;
    block_sync();  // every thread is past its reads of the scratch
    unsigned short* const s0h = reinterpret_cast<unsigned short*>(s0);
    bool all = true;
    for (int r = warp; r < kRows; r += W) {
        const int i = i0 + r;
        const bool row_in = i >= 0 && i < nq;
        const typename Variant::Row row = Variant::make_row(p, hd, row_in ? i : 0);
#pragma unroll
        for (int w = 0; w < kMW; ++w) {
            const int c = 32 * w + lane, j = j0 + c;
            const bool inside = row_in && c < kKeys && j >= 0 && j < nk;
            const bool m = !inside || Variant::score_conv_mask(p, hd, row, i, j);
            const unsigned word = __ballot_sync(0xffffffffu, m);
            if (lane == 0) bits[r * kMW + w] = word;
            if (!m) s0h[r * kStride + c] = 0;
            all = all && m;
        }
    }
    return __syncthreads_and(all) != 0;
}

// sum over the taps (a, b) of weight(a, b) x[r0 + a][c0 + b] where gate(a, b): one output of a
// convolution under a mask, tap by tap (x f16 in shared memory, kStride halfs a row).
template <int CQ, int CK, int kStride, class Weight, class Gate>
__device__ __forceinline__ float gated_tap_sum(const unsigned short* x, int r0, int c0, Weight weight, Gate gate) {
    float sum = 0.f;
#pragma unroll 1
    for (int a = 0; a < CQ; ++a)
#pragma unroll 1
        for (int b = 0; b < CK; ++b) {
            if (!gate(a, b)) continue;
            half_t y;
            y.bits = x[(r0 + a) * kStride + c0 + b];
            sum += weight(a, b) * to_float(y);
        }
    return sum;
}

template <class E, int BM, int BN, int W, int CQ, int CK>
struct ScoreConv {
    static constexpr int kThreads = W * 32;
    static constexpr int kHaloRows = 16;      // query rows above the tile
    static constexpr int kHaloKeys = 8;       // keys on each side
    static constexpr int kPk = (CK - 1) / 2;  // key taps on each side of the key
    static constexpr int kMF = BM / (16 * W);
    static constexpr int kNT = BN / 8;        // n8 output tiles
    static constexpr int kStride = BN + 24;   // halfs per S0 row: BN + 16 keys, 8 zeros
    static_assert(CQ >= 1 && CQ <= 8, "score convolution: c_q must be in [1, 8]");
    static_assert(CK >= 1 && CK <= 15 && CK % 2 == 1, "score convolution: c_k must be odd, in [1, 15]");
    static_assert((kStride / 8) % 2 == 1, "an odd number of 16-byte chunks per S0 row: conflict-free ldmatrix");

    // The Toeplitz B fragments (one register per (a, k8 step, lane)) and the zero columns
    // of S0; before the first block_sync of the main loop.
    template <class Variant, class Params>
    __device__ __forceinline__ static void prepare(const Params& p, int h, unsigned* frags, unsigned* s0) {
        // B[k][n] = theta[h][a][b] for the key tap b that extended key 8 kb + k (from the
        // output tile's first extended key) is for output key n.
        build_toeplitz<CQ, CK>(
            frags, [](int key, int n) { return key - n - kHaloKeys + kPk; },
            [&](int a, int b) { return Variant::score_conv_weight(p, h, a, b); });
        const int tid = threadIdx.x;
        for (int r = tid; r < BM + kHaloRows; r += kThreads) {
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

    // Consecutive KV tiles share 16 extended keys: tile t's keys [BN, BN + 16) are tile
    // t + 1's [0, 16). take_carry reads them into registers after the convolution (S0 is not
    // written again before the next tile's first block_sync), put_carry writes them back
    // as the next tile's first keys (which no warp reads before the next block_sync), so
    // the next tile multiplies only its BN new keys.
    static constexpr int kCarryChunks = (BM + kHaloRows) * 2;  // 16-byte chunks: 2 a row
    static constexpr int kCarry = (kCarryChunks + kThreads - 1) / kThreads;
    __device__ __forceinline__ static void take_carry(const unsigned* s0, uint4 (&carry)[kCarry]) {
#pragma unroll
        for (int i = 0; i < kCarry; ++i) {
            const int c = threadIdx.x + i * kThreads;
            if (kCarryChunks % kThreads == 0 || c < kCarryChunks)
                carry[i] = *reinterpret_cast<const uint4*>(s0 + ((c >> 1) * kStride + BN + 8 * (c & 1)) / 2);
        }
    }
    __device__ __forceinline__ static void put_carry(unsigned* s0, const uint4 (&carry)[kCarry]) {
#pragma unroll
        for (int i = 0; i < kCarry; ++i) {
            const int c = threadIdx.x + i * kThreads;
            if (kCarryChunks % kThreads == 0 || c < kCarryChunks)
                *reinterpret_cast<uint4*>(s0 + ((c >> 1) * kStride + 8 * (c & 1)) / 2) = carry[i];
        }
    }

    // The spec's mask with the convolution (Variant::kScoreConvMask, docs/score_convolution.md):
    // S0 is also 0 where mask(i', j') is false, and tap (i', j') adds to C[i, j] only where
    // mask(i, j') and mask(i', j) hold (for a document mask: the convolution of each
    // document alone, zero-padded at its edges). The mask's bits over the extended tile
    // live in shared memory, kMaskWords 32-bit words a row, 1 outside the sequences (S0 is
    // 0 there anyway).
    static constexpr int kMaskWords = (BN + 2 * kHaloKeys + 31) / 32 + 1;  // a word past the keys
    static_assert((BM + kHaloRows) * kMaskWords * 4 == score_conv_mask_bytes(BM, BN),
                  "the mask bits' layout disagrees with score_conv_mask_bytes in common/kernel_config.h");

    // After every warp's S0 is stored (and a block_sync): the mask's bits and S0 under the
    // mask (conv_mask_pass); whether the mask keeps the whole extended tile.
    template <class Variant, class Params>
    __device__ __forceinline__ static bool mask_s0(const Params& p, const typename Variant::Head& hd, unsigned* s0,
                                                   unsigned* bits, int i0, int j0, int nq, int nk) {
        return conv_mask_pass<Variant, Params, BM + kHaloRows, BN + 2 * kHaloKeys, kMaskWords, kStride, W>(
            p, hd, s0, bits, i0, j0, nq, nk);
    }

    // Where the mask does not keep every tap of an output (i, j) (only on tiles where
    // mask_s0 found a clear bit): C[i, j] again, tap by tap, from S0 in shared memory. The
    // Toeplitz products (convolve) took every tap. Which outputs: per row and 32 keys, one
    // word of bits, from the mask's words (the kept outputs whose key window in row i or
    // query window in column j has a clear bit).
    template <class Variant, class Params>
    __device__ __forceinline__ static void mask_taps(const Params& p, int h, float (&c)[kMF][kNT][4],
                                                     const unsigned* s0, const unsigned* bits) {
        static_assert(BN % 32 == 0 && kMaskWords > BN / 32, "whole words of output keys, and one more of halo");
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
        const unsigned short* const s0h = reinterpret_cast<const unsigned short*>(s0);
        const ConvMaskBits<kMaskWords> m{bits};  // mask(i', j) and mask(i, j') gate a tap
        // Extended keys [32 w, 32 w + 64) of extended row r.
        auto pair = [&](int r, int w) {
            return bits[r * kMaskWords + w] | static_cast<unsigned long long>(bits[r * kMaskWords + w + 1]) << 32;
        };
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                // Extended row of the output row; the taps' rows r0 .. r0 + c_q - 1.
                const int r = kHaloRows + warp * 16 * kMF + 16 * mf + g + 8 * hf, r0 = r - (CQ - 1);
                unsigned exact[BN / 32];  // bit x of word w: output key 32 w + x needs the exact sum
#pragma unroll
                for (int w = 0; w < BN / 32; ++w) {
                    const unsigned long long row = pair(r, w);
                    unsigned long long column = ~0ull;  // mask(i', j) for every tap row
#pragma unroll 1
                    for (int a = 0; a < CQ; ++a) column &= pair(r0 + a, w);
                    unsigned keys = ~0u;  // mask(i, j') for every key tap
#pragma unroll
                    for (int b = 0; b < CK; ++b) keys &= static_cast<unsigned>(row >> (kHaloKeys - kPk + b));
                    const unsigned kept = static_cast<unsigned>(row >> kHaloKeys);
                    exact[w] = kept & ~(keys & static_cast<unsigned>(column >> kHaloKeys));
                }
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int x = 8 * nt + 2 * t4 + e, col = kHaloKeys + x;  // output key, its extended key
                        if (!((exact[nt / 4] >> (x & 31)) & 1u)) continue;
                        c[mf][nt][2 * hf + e] = gated_tap_sum<CQ, CK, kStride>(
                            s0h, r0, col - kPk, [&](int a, int b) { return Variant::score_conv_weight(p, h, a, b); },
                            [&](int a, int b) { return m.at(r0 + a, col) && m.at(r, col - kPk + b); });
                    }
            }
    }

    // Where a CTA keeps S0, the Toeplitz fragments and the mask bits (shared memory).
    struct Smem {
        unsigned* s0;
        unsigned s0_s;  // S0's shared-window address
        const unsigned* frags;
        unsigned* bits;
    };

    // One score tile C of the query tile at m0 and the key tile at n0, from the extended
    // Q (BM + 16 rows, q_halo_ld at extended row 0, q_ld at this warp's first row) and K
    // (BN + 16 keys from n0 - 8, k_ld) tiles in shared memory: the extended products staged
    // as S0 (with `carried`, its first 16 keys were put back by put_carry: only the rest is
    // multiplied), a block_sync, the spec's mask over S0, the convolution. Block-collective;
    // the caller syncs before S0 is written again. Used by the forward and by backward_dq.
    template <class Variant, class Params, int kKQ, int kCprQ>
    __device__ __forceinline__ static void tile_scores(const Params& p, const typename Variant::Head& hd, int h,
                                                       float (&c)[kMF][kNT][4], const Smem& sm, unsigned q_ld,
                                                       unsigned q_halo_ld, unsigned k_ld, const LaneChunks& la,
                                                       const LaneChunks& lb, int m0, int n0, int nq, int nk,
                                                       bool carried) {
        const int warp = threadIdx.x >> 5;
        const int i0 = m0 - kHaloRows, j0 = n0 - kHaloKeys;
        const bool interior = j0 >= 0 && j0 + BN + 2 * kHaloKeys <= nk && j0 + BN + 2 * kHaloKeys - 1 <= i0;
        if (carried) {
            float x[kMF][kNT][4] = {};
            gemm_nt<E, kMF, kNT, kKQ, kCprQ, kCprQ>(x, q_ld, k_ld + 16 * kCprQ * 16, la, lb);
            store_s0(sm.s0, x, kHaloRows + warp * 16 * kMF, 16, i0, j0, nk, interior);
        } else {
            float x[kMF][kNT + 2][4] = {};
            gemm_nt<E, kMF, kNT + 2, kKQ, kCprQ, kCprQ>(x, q_ld, k_ld, la, lb);
            store_s0(sm.s0, x, kHaloRows + warp * 16 * kMF, 0, i0, j0, nk, interior);
        }
        // The halo rows' n8 pairs, shared among the warps.
        for (int np = warp + (carried ? 1 : 0); np < (kNT + 2) / 2; np += W) {
            float x[1][2][4] = {};
            gemm_nt<E, 1, 2, kKQ, kCprQ, kCprQ>(x, q_halo_ld, k_ld + np * 16 * kCprQ * 16, la, lb);
            store_s0(sm.s0, x, 0, 16 * np, i0, j0, nk, interior);
        }
        block_sync();  // every warp's S0 rows (and the halo) are stored
        bool taps_kept = true;  // the spec's mask keeps every tap of the tile
        if constexpr (Variant::kScoreConvMask) taps_kept = mask_s0<Variant>(p, hd, sm.s0, sm.bits, i0, j0, nq, nk);
        convolve(c, sm.s0_s, sm.frags);
        if constexpr (Variant::kScoreConvMask) {
            if (!taps_kept) mask_taps<Variant>(p, h, c, sm.s0, sm.bits);
        }
    }

    // C = sum_a S0[rows shifted by a] T_a for this warp's rows (unscaled, like S = Q K^T).
    // An n8 output tile nb reads extended keys [8 nb, 8 nb + 24) (p_k <= 7): three k8 steps,
    // so the A fragment of keys [8 x, 8 x + 8) (one ldmatrix.x2) serves tiles x, x - 1 and
    // x - 2.
    __device__ __forceinline__ static void convolve(float (&c)[kMF][kNT][4], unsigned s0_s, const unsigned* frags) {
        // Output row i reads S0 row i - (c_q - 1) + a: extended row 16 + that.
        const int warp = threadIdx.x >> 5;
        toeplitz_products<kStride, CQ>(c, s0_s, kHaloRows + warp * 16 * kMF - (CQ - 1), frags, 0);
    }
};

}  // namespace sm80
}  // namespace attnjit
