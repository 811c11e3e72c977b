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

// kMF: 16-row fragments per warp (warp w owns rows [16 kMF w, 16 kMF (w + 1)));
// DL: the main loop's head dim (tile_head_dim(L)); kLReal, kDqReal, kDvReal: L, Q's and O's
// real head dims.
template <class E, int kThreads, int kMF, int BM, int DL, int kLReal, int kDqReal, int kDvReal>
struct LatentProjection {
    static constexpr int DQ = tile_head_dim(kDqReal), DVO = tile_head_dim(kDvReal);
    static constexpr int kCprL = DL / 8, kCprQ = DQ / 8, kCprO = DVO / 8;
    static constexpr int kKQ = DQ / 16;  // k16 steps of Q W_qlat
    static constexpr int kKL = DL / 16;  // k16 steps of O_lat W_vup
    static_assert(DL % 32 == 0, "the projection writes Q_lat 32 columns at a time");
    using Chunk = MmaCLayout<kMF, 4>;                 // 32 columns of Q_lat
    using OutLayout = MmaCLayout<kMF, DVO / 8, 1, kDvReal>;  // the projected output

    // Q_lat = Q W_qlat[h] into the swizzled tile q_lat [BM x DL]. qg: the CTA's first query
    // row; valid: the rows that exist. stage: the free region (Q [BM x DQ], then W_qlat[h]).
    // Ends with a block barrier: Q_lat is complete and the staging region is free.
    __device__ __forceinline__ static void project_q(unsigned q_lat, unsigned stage, const E* qg, long long q_row,
                                                     int valid, const E* safe, const LatentWeights<E>& w, int tid) {
        const unsigned q_s = stage, w_s = stage + BM * DQ * 2;
        copy_tile<E, kThreads, BM, DQ, false, kDqReal>(q_s, qg, q_row, valid, safe, tid);
        copy_tile<E, kThreads, DQ, DL, false, kLReal>(w_s, w.w_qlat, w.w_qlat_row, kDqReal, w.w_qlat, tid);
        ptx::cp_async_commit();
        ptx::cp_async_wait<0>();
        block_sync();

        const int warp = tid >> 5, lane = tid & 31;
        unsigned a[kMF][kKQ][4];  // the warp's Q rows as mma A fragments
        load_rows<0>(a, q_s + (warp * 16 * kMF + LaneRows::a_row(lane)) * kCprQ * 16, LaneRows::a_chunks(lane));
        const unsigned w_ld = w_s + LaneRows::a_row(lane) * kCprL * 16;
        project_chunk<0>(a, w_ld, LaneRows::a_chunks(lane), q_lat);
        block_sync();
    }

    // out = o_lat W_vup[h]: the warp's [16 kMF x DL] O_lat (unnormalised fp32, the main loop's
    // accumulator) times W_vup[h], staged at `stage` ([DL x DVO]). Call once every warp is done
    // with the K/V region; ends with a block barrier after the staging tile's last read.
    template <class OFrag>
    __device__ __forceinline__ static void project_out(const OFrag& o_lat, unsigned stage, const LatentWeights<E>& w,
                                                       int tid, float (&out)[kMF][DVO / 8][4]) {
        copy_tile<E, kThreads, DL, DVO, false, kDvReal>(stage, w.w_vup, w.w_vup_row, kLReal, w.w_vup, tid);
        ptx::cp_async_commit();
        unsigned a[kMF][kKL][4];
        pack_a<E>(o_lat, a);
        ptx::cp_async_wait<0>();
        block_sync();
        OutLayout::clear(out);
        gemm_rn<E, kMF, DVO / 8, kKL, kCprO>(out, a, stage + LaneRows::a_row(tid & 31) * kCprO * 16,
                                             LaneRows::a_chunks(tid & 31));
        block_sync();
    }

private:
    template <int KS>
    __device__ __forceinline__ static void load_rows(unsigned (&a)[kMF][kKQ][4], unsigned a_ld, const LaneChunks& la) {
        if constexpr (KS < kKQ) {
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
                ptx::ldmatrix_x4(a_ld + mf * 16 * kCprQ * 16 + chunk_bytes<kCprQ, KS>(la), a[mf][KS][0], a[mf][KS][1],
                                 a[mf][KS][2], a[mf][KS][3]);
            load_rows<KS + 1>(a, a_ld, la);
        }
    }

    // Columns [32 C, 32 C + 32) of Q_lat, rounded and stored into the swizzled tile.
    template <int C>
    __device__ __forceinline__ static void project_chunk(const unsigned (&a)[kMF][kKQ][4], unsigned w_ld,
                                                         const LaneChunks& lw, unsigned q_lat) {
        if constexpr (C < DL / 32) {
            float c[kMF][4][4];
            Chunk::clear(c);
            gemm_rn<E, kMF, 4, kKQ, kCprL, 2 * C>(c, a, w_ld, lw);
            const Chunk l;
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int hi = 0; hi < 2; ++hi) {
                        const int row = l.row(2 * mf + hi), col = 32 * C + l.col(nt, 0);
                        ptx::st_shared_b32(q_lat + (row * kCprL + swz_chunk<kCprL>(col >> 3, row & 7)) * 16 + (col & 7) * 2,
                                           FromFloat<E>::pack2(c[mf][nt][2 * hi], c[mf][nt][2 * hi + 1]));
                    }
            project_chunk<C + 1>(a, w_ld, lw, q_lat);
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
