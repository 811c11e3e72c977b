// The latent projection (MLA, SEMANTICS.md section 4) in the sm80 forward:
//   prologue   Q_lat = Q W_qlat[h]   [BM x Dqk] x [Dqk x L], into the Q tile the main loop reads
//   main loop  attention at head dim L over the latent K, V (one KV head, shared by every head)
//   epilogue   O = O_lat W_vup[h]    [BM x L] x [L x Dv], before the usual normalisation
// Both products' operands are staged in the K/V region, free before the first K/V copy and
// after the last step (smem_bytes in common/kernel_config.h sizes it for all three uses).
// Q_lat is rounded to the element type, being an mma operand like any Q; O_lat goes into the
// up-projection unnormalised and rounded likewise (the product is linear, so the epilogue's
// 1 / l applies after it). Nothing of size [N x L] leaves the CTA.
#pragma once

#include "attnjit/common/ptx.cuh"
#include "attnjit/common/variant.cuh"
#include "attnjit/sm80/copy.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"

namespace attnjit {
namespace sm80 {

// kMF: 16-row fragments per warp; KS: warps a row group (latent_col_split: warp w owns rows
// [16 kMF (w / KS), + 16 kMF) and, of every split product, columns half w % KS);
// DL: the main loop's head dim (tile_head_dim(L)); kLReal, kDqReal, kDvReal: L, Q's and O's
// real head dims; kBand: a reciprocal band beside it (project_keys).
template <class E, int kThreads, int kMF, int KS, int BM, int DL, int kLReal, int kDqReal, int kDvReal,
          bool kBand = false>
struct LatentProjection {
    static constexpr int DQ = tile_head_dim(kDqReal), DVO = tile_head_dim(kDvReal);
    static constexpr int kCprL = DL / 8, kCprQ = DQ / 8, kCprO = DVO / 8;
    static constexpr int kKQ = DQ / 16;       // k16 steps of Q W_qlat
    static constexpr int kKL = DL / 16 / KS;  // k16 steps of O_lat W_vup (the warp's half of L)
    static constexpr int kWBlock = DL < 256 ? DL : 256;  // W_qlat's columns staged at a time
    static constexpr int kWarpCols = kWBlock / KS;       // of which each warp projects these
    static_assert(kWarpCols % 32 == 0 && (KS == 1 || kWarpCols % 64 == 0),
                  "the projection writes Q_lat 32 columns at a time, a column half starts on a swizzle group");
    // The staging region: Q, a block of W_qlat[h] (and the band's K_lat rows), then W_vup[h].
    static constexpr int kPrologueBytes = (BM * DQ + DQ * kWBlock + (kBand ? BM * DL : 0)) * 2;
    static constexpr int kStagingBytes = kPrologueBytes > DL * DVO * 2 ? kPrologueBytes : DL * DVO * 2;
    static_assert(!kBand || (KS == 1 && kWBlock == DL), "the band's key projection reads W_qlat[h] staged whole");
    using Chunk = MmaCLayout<kMF, 4, 1, 32, KS>;                // 32 columns of Q_lat
    using OutLayout = MmaCLayout<kMF, DVO / 8, 1, kDvReal, KS>;  // the projected output

    // Q_lat = Q W_qlat[h] into the swizzled tile q_lat [BM x DL], W_qlat[h]'s columns from block
    // BLK on (kWBlock at a time). qg: the CTA's first query row; valid: the rows that exist.
    // stage: the free region (Q [BM x DQ], then a block of W_qlat[h]). Ends with a block
    // barrier: Q_lat is complete and the staging region is free.
    template <int BLK>
    __device__ __forceinline__ static void project_q(unsigned q_lat, unsigned stage, const E* qg, long long q_row,
                                                     int valid, const E* safe, const LatentWeights<E>& w, int tid) {
        const unsigned q_s = stage, w_s = stage + BM * DQ * 2;
        if constexpr (BLK == 0) copy_tile<E, kThreads, BM, DQ, false, kDqReal>(q_s, qg, q_row, valid, safe, tid);
        constexpr int kReal = kLReal - BLK * kWBlock < kWBlock ? kLReal - BLK * kWBlock : kWBlock;
        copy_tile<E, kThreads, DQ, kWBlock, false, kReal>(w_s, w.w_qlat + BLK * kWBlock,
                                                                              w.w_qlat_row, kDqReal, w.w_qlat, tid);
        ptx::cp_async_commit();
        ptx::cp_async_wait<0>();
        block_sync();

        const int warp = tid >> 5, lane = tid & 31, half = warp % KS;
        unsigned a[kMF][kKQ][4];  // the row group's Q rows as mma A fragments
        load_rows<0>(a, q_s + ((warp / KS) * 16 * kMF + LaneRows::a_row(lane)) * kCprQ * 16, LaneRows::a_chunks(lane));
        const unsigned w_ld = w_s + LaneRows::a_row(lane) * (kWBlock / 8) * 16 + half * kWarpCols * 2;
        project_chunk<0>(a, w_ld, LaneRows::a_chunks(lane), q_lat, BLK * kWBlock + half * kWarpCols);
        block_sync();
        if constexpr ((BLK + 1) * kWBlock < DL) project_q<BLK + 1>(q_lat, stage, qg, q_row, valid, safe, w, tid);
    }

    // The reciprocal band's keys at the query rows, in Q's space: kr [BM x DQ] (swizzled) =
    // K_lat[rows] W_qlat[h]^T, so that <Q_j, kr_i> = <Q_lat_j, K_lat_i> (s_ji before the scale)
    // with Q itself at the key rows. Call right after project_q (W_qlat[h] is still staged);
    // k_rows: the latent K at the CTA's first query row; valid: the rows that exist. Ends
    // with a block barrier.
    __device__ __forceinline__ static void project_keys(unsigned kr, unsigned stage, const E* k_rows, long long k_row,
                                                        int valid, const E* safe, int tid) {
        const unsigned w_s = stage + BM * DQ * 2, kl_s = w_s + DQ * DL * 2;
        copy_tile<E, kThreads, BM, DL, false, kLReal>(kl_s, k_rows, k_row, valid, safe, tid);
        ptx::cp_async_commit();
        ptx::cp_async_wait<0>();
        block_sync();
        const int warp = tid >> 5, lane = tid & 31;
        using KLayout = MmaCLayout<kMF, DQ / 8>;
        float c[kMF][DQ / 8][4];
        KLayout::clear(c);
        gemm_nt<E, kMF, DQ / 8, DL / 16, kCprL, kCprL>(
            c, kl_s + (warp * 16 * kMF + LaneRows::a_row(lane)) * kCprL * 16,
            w_s + LaneRows::b_row(lane) * kCprL * 16, LaneRows::a_chunks(lane), LaneRows::b_chunks(lane));
        const KLayout l;
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int nt = 0; nt < DQ / 8; ++nt)
#pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const int row = l.row(2 * mf + hi), col = l.col(nt, 0);
                    ptx::st_shared_b32(kr + (row * kCprQ + swz_chunk<kCprQ>(col >> 3, row & 7)) * 16 + (col & 7) * 2,
                                       FromFloat<E>::pack2(c[mf][nt][2 * hi], c[mf][nt][2 * hi + 1]));
                }
        block_sync();
    }

    // out = o_lat W_vup[h]: the warp's [16 kMF x DL / KS] part of O_lat (unnormalised fp32, the
    // main loop's accumulator) times its rows of W_vup[h], staged at `stage` ([DL x DVO]). With
    // KS > 1 the second warp of a row group hands its partial product to the first through
    // `x` (free shared memory, BM x DVO floats). Call once every warp is done with the staging
    // region and x; returns whether this warp holds the row group's sum (and stores it).
    template <class OFrag>
    __device__ __forceinline__ static bool project_out(const OFrag& o_lat, unsigned stage, float* x,
                                                       const LatentWeights<E>& w, int tid, float (&out)[kMF][DVO / 8][4]) {
        copy_tile<E, kThreads, DL, DVO, false, kDvReal>(stage, w.w_vup, w.w_vup_row, kLReal, w.w_vup, tid);
        ptx::cp_async_commit();
        unsigned a[kMF][kKL][4];
        pack_a<E>(o_lat, a);
        ptx::cp_async_wait<0>();
        block_sync();
        const int warp = tid >> 5, lane = tid & 31, half = warp % KS;
        OutLayout::clear(out);
        gemm_rn<E, kMF, DVO / 8, kKL, kCprO>(out, a, stage + (half * (DL / KS) + LaneRows::a_row(lane)) * kCprO * 16,
                                             LaneRows::a_chunks(lane));
        if constexpr (KS > 1) {
            constexpr int kRegs = kMF * (DVO / 8) * 4;
            float* slot = x + (warp / KS) * kRegs * 32 + lane;
            if (half == 1)
#pragma unroll
                for (int i = 0; i < kRegs; ++i) slot[i * 32] = out[i / (DVO / 2)][(i / 4) % (DVO / 8)][i % 4];
            block_sync();
            if (half == 1) return false;
#pragma unroll
            for (int i = 0; i < kRegs; ++i) out[i / (DVO / 2)][(i / 4) % (DVO / 8)][i % 4] += slot[i * 32];
        }
        return true;
    }

private:
    template <int KQ>
    __device__ __forceinline__ static void load_rows(unsigned (&a)[kMF][kKQ][4], unsigned a_ld, const LaneChunks& la) {
        if constexpr (KQ < kKQ) {
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
                ptx::ldmatrix_x4(a_ld + mf * 16 * kCprQ * 16 + chunk_bytes<kCprQ, KQ>(la), a[mf][KQ][0], a[mf][KQ][1],
                                 a[mf][KQ][2], a[mf][KQ][3]);
            load_rows<KQ + 1>(a, a_ld, la);
        }
    }

    // Columns [col0 + 32 C, + 32) of Q_lat from the staged block's columns at w_ld (+ 32 C),
    // rounded and stored into the swizzled tile.
    template <int C>
    __device__ __forceinline__ static void project_chunk(const unsigned (&a)[kMF][kKQ][4], unsigned w_ld,
                                                         const LaneChunks& lw, unsigned q_lat, int col0) {
        if constexpr (C < kWarpCols / 32) {
            float c[kMF][4][4];
            Chunk::clear(c);
            gemm_rn<E, kMF, 4, kKQ, kWBlock / 8, 2 * C>(c, a, w_ld, lw);
            const Chunk l;
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int hi = 0; hi < 2; ++hi) {
                        const int row = l.row(2 * mf + hi), col = col0 + 32 * C + l.col(nt, 0);
                        ptx::st_shared_b32(q_lat + (row * kCprL + swz_chunk<kCprL>(col >> 3, row & 7)) * 16 + (col & 7) * 2,
                                           FromFloat<E>::pack2(c[mf][nt][2 * hi], c[mf][nt][2 * hi + 1]));
                    }
            project_chunk<C + 1>(a, w_ld, lw, q_lat, col0);
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
