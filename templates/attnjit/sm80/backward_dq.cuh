// backward_dq on tensor cores (fp16, bf16; sm_80+): one CTA per query tile of BM rows,
// grid (ceil(Nq / BM), Hq, B). It runs before backward_dkdv and also writes that kernel's
// per-row statistics (LSE2, Delta: BackwardArgs::stats).
//
//   Q, dO of the tile stay in shared memory; K, V stream through two cp.async stages over
//   the KV tiles KvCursor hands out (masked tiles skipped, as in the forward). Each step:
//     S = Q K^T, dP = dO V^T           (gemm_nt, warps own 16 kMF query rows)
//     P, dS                            (BackwardScores: mask, score_mod, d_score)
//     dQ += dS K                       (gemm_rn, K read transposed)
//   dQ is scaled once and stored. Each dQ element is one thread's fixed-order sum:
//   deterministic. Gradients of captured tensors (common/input_grads.cuh): per-query
//   sites sum each row in the threads' row slots across the key tiles, then over the
//   quad (fixed butterfly) after the loop; the row leader stores. A Variant whose one
//   gradient site is elementwise and summed over the batch (a broadcast pair bias) may
//   leave it to a second launch of this kernel, run_batch_sum (BackwardArgs::batch_sum).
//
// kConv (a spec with a score convolution): the launches compute the gradients of captured
// tensors and scalars only (backward_fused computes dQ, dK, dV and dtheta). Their score
// tile is the convolution's C, as in the forward: Q carries 16 halo rows, K 8 halo keys a
// side, and ScoreConv::tile_scores stages and convolves each tile (sm80/score_conv.cuh).
//
// Shared memory (smem_bytes in common/kernel_config.h): scratch | Q [(BM + qh) x DQK] |
// dO [BM x DV] | 2 x (K [(BN + 2 kh) x DQK] | V [BN x DV]) | LSE2 [BM] | Delta [BM] (f32),
// qh, kh = 16, 8 with kConv (then S0, the Toeplitz fragments and the mask bits follow),
// else 0. kRecip (a reciprocal band, sm80/reciprocal_band.cuh): then K at the tile's query
// rows [BM x DQK] and 2 x Q at the key tile's rows [BN x DQK] (copied with K and V when the
// tile meets the band); dQ's sums go to BackwardArgs::band_dq (backward_dkdv adds the band's
// part and stores dq), U to band_dk, and the CTAs' sums of <k_i, U_i> make d alpha.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/backward_rows.cuh"
#include "attnjit/common/band_alpha_grad.cuh"
#include "attnjit/common/backward_scores.cuh"
#include "attnjit/common/input_grads.cuh"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/kv_schedule.cuh"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/copy.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm80/reciprocal_band.cuh"
#include "attnjit/sm80/score_conv.cuh"

namespace attnjit {
namespace sm80 {

template <class E, int kDqkReal, int kDvReal, int BM, int BN, int W, bool kConv = false, bool kRecip = false>
struct BackwardDq {
    // Tiles at the tile head dims; columns past the real ones zero-filled on load, not stored.
    static constexpr int DQK = tile_head_dim(kDqkReal), DV = tile_head_dim(kDvReal);
    static constexpr int kThreads = W * 32;
    static constexpr int kMF = BM / (16 * W);  // 16-row query fragments per warp
    static constexpr int kNT = BN / 8;         // n8 tiles of S per fragment
    static constexpr int kCprQ = DQK / 8, kCprV = DV / 8;

    static constexpr int kQHalo = kConv ? 16 : 0;  // query rows above the tile (score_conv)
    static constexpr int kKHalo = kConv ? 8 : 0;   // keys on each side of a K tile (score_conv)
    static constexpr int kQOff = scratch_bytes(W);
    static constexpr int kDoOff = kQOff + (BM + kQHalo) * DQK * 2;
    static constexpr int kKvOff = kDoOff + BM * DV * 2;
    static constexpr int kVInStage = (BN + 2 * kKHalo) * DQK * 2;
    static constexpr int kKvStage = kVInStage + BN * DV * 2;
    static constexpr int kLseOff = kKvOff + 2 * kKvStage;
    static constexpr int kDeltaOff = kLseOff + BM * 4;
    static constexpr int kS0Off = kDeltaOff + BM * 4;  // score_conv: S0, the Toeplitz fragments, the mask bits
    static constexpr int kFragOff = kS0Off + (kConv ? 2 * (BM + 16) * (BN + 24) : 0);
    static constexpr int kMaskOff = kFragOff + (kConv ? kScoreConvFragmentBytes : 0);
    static constexpr int kKrOff = kMaskOff + (kConv ? score_conv_mask_bytes(BM, BN) : 0);  // band: K at the rows
    static constexpr int kQrOff = kKrOff + (kRecip ? BM * DQK * 2 : 0);  // band: 2 x Q at the key tile's rows
    static constexpr int kQrStage = BN * DQK * 2;
    static constexpr int kSmemBytes = kQrOff + (kRecip ? 2 * kQrStage : 0);
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::backward_dq, MainloopKind::sm80,
                                                        ElemKindOf<E>::value, kDqkReal, kDvReal, TileConfig{BM, BN, W, 2},
                                                        kConv, false, kRecip}),
                  "sm80::BackwardDq shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(kMF >= 1 && BM % (16 * W) == 0, "block_m must be a multiple of 16 rows per warp");
    static_assert(BN % 16 == 0, "block_n must be a multiple of 16");

    static constexpr const char* kName = "sm80 backward";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;
    static constexpr bool kSupportsRecipBand = kRecip;

    using SLayout = MmaCLayout<kMF, kNT>;         // S, P, dP, dS
    using DLayout = MmaCLayout<kMF, DQK / 8, 1, kDqkReal>;  // dQ (stores the real columns)
    static constexpr int kRows = SLayout::kRows;  // row slots per thread

    template <class Variant>
    using Band = RecipBand<E, kMF, kNT, DQK / 16, kCprQ, (kRecip ? Variant::kRecipBandWidth : 0),
                           Variant::kRecipBandCausal>;
    template <class Variant>
    using Conv = ScoreConv<E, BM, BN, W, (kConv ? Variant::kScoreConvRows : 1), (kConv ? Variant::kScoreConvCols : 1)>;

    // Q's tile at query m0 (with kConv, from m0 - 16; rows before 0 zero-filled).
    __device__ __forceinline__ static void load_q(unsigned q_s, const E* qg, long long qsn, int nq, int m0,
                                                  const E* safe, int tid) {
        copy_tile<E, kThreads, BM + kQHalo, DQK, kConv, kDqkReal>(q_s, qg - kQHalo * qsn, qsn, nq - m0 + kQHalo, safe,
                                                                 tid, kQHalo - m0);
    }
    // K's tile at key n0 (k_n0: its first row), with kConv keys [n0 - 8, n0 + BN + 8).
    __device__ __forceinline__ static void load_k(unsigned k_s, const E* kg, const E* k_n0, long long ksn, int nk, int n0,
                                                  int tid) {
        if constexpr (kConv) {
            const int first = n0 - kKHalo;
            copy_tile<E, kThreads, BN + 2 * kKHalo, DQK, true, kDqkReal>(k_s, kg + (long long)first * ksn, ksn,
                                                                        nk - first, kg, tid, -first);
        } else {
            copy_tile<E, kThreads, BN, DQK, false, kDqkReal>(k_s, k_n0, ksn, nk - n0, kg, tid);
        }
    }

    // The tile's scores: S = Q K^T, or with kConv the convolution's C (ScoreConv::tile_scores,
    // block-collective). q_ld: this warp's first row of the tile; k_ld: key row 0 (extended).
    template <class Variant, class Params>
    __device__ __forceinline__ static void scores(const Params& p, const typename Variant::Head& hd, int h,
                                                  float (&s)[kMF][kNT][4], unsigned char* smem, unsigned q_ld,
                                                  unsigned k_ld, const LaneChunks& la, const LaneChunks& lb, int m0,
                                                  int n0, int nq, int nk) {
        if constexpr (kConv) {
            const unsigned sbase = ptx::smem_addr(smem);
            const unsigned q_halo_ld = sbase + kQOff + LaneRows::a_row(threadIdx.x & 31) * kCprQ * 16;
            Conv<Variant>::template tile_scores<Variant, Params, DQK / 16, kCprQ>(
                p, hd, h, s,
                typename Conv<Variant>::Smem{reinterpret_cast<unsigned*>(smem + kS0Off), sbase + kS0Off,
                                             reinterpret_cast<const unsigned*>(smem + kFragOff),
                                             reinterpret_cast<unsigned*>(smem + kMaskOff)},
                q_ld, q_halo_ld, k_ld, la, lb, m0, n0, nq, nk, false);
        } else {
            gemm_nt<E, kMF, kNT, DQK / 16, kCprQ, kCprQ>(s, q_ld, k_ld, la, lb);
        }
    }
    // The Toeplitz fragments (kConv), before the first block_sync of the loop.
    template <class Variant, class Params>
    __device__ __forceinline__ static void prepare(const Params& p, int h, unsigned char* smem) {
        static_assert(kConv == (Variant::kScoreConvRows > 0),
                      "a Variant with a score convolution needs backward_dq's kConv layout, and only it");
        static_assert(kRecip == (Variant::kRecipBandWidth >= 0),
                      "a Variant with a reciprocal band needs backward_dq's kRecip layout, and only it");
        if constexpr (kConv)
            Conv<Variant>::template prepare<Variant>(p, h, reinterpret_cast<unsigned*>(smem + kFragOff),
                                                     reinterpret_cast<unsigned*>(smem + kS0Off));
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dq(const Params& p, unsigned char* smem) {
        if constexpr (Variant::kInputGradBatchSum) {
            if (p.args.batch_sum == 2) return run_batch_sum<Variant>(p, smem);
        }
        const BackwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int m0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z, kvh = h / a.group;
        const int nq = a.q_len, nk = a.kv_len;
        const E* qg = static_cast<const E*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1] + m0 * a.q_stride[2];
        const E* dog = static_cast<const E*>(a.d_o) + b * a.do_stride[0] + h * a.do_stride[1] + m0 * a.do_stride[2];
        const E* kg = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
        const E* vg = static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];
        const long long ksn = a.k_stride[2], vsn = a.v_stride[2];

        const unsigned sbase = ptx::smem_addr(smem);
        const unsigned q_s = sbase + kQOff, do_s = sbase + kDoOff, kv_s = sbase + kKvOff;
        load_q(q_s, qg, a.q_stride[2], nq, m0, static_cast<const E*>(a.q), tid);
        copy_tile<E, kThreads, BM, DV, false, kDvReal>(do_s, dog, a.do_stride[2], nq - m0,
                                                       static_cast<const E*>(a.d_o), tid);
        if constexpr (kRecip)  // K at the tile's query rows (Nq == Nk): the A operand of R = K Q^T
            copy_tile<E, kThreads, BM, DQK, false, kDqkReal>(sbase + kKrOff, kg + (long long)m0 * ksn, ksn, nk - m0, kg,
                                                             tid);
        ptx::cp_async_commit();
        prepare<Variant>(p, h, smem);

        const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
        // The batch-sum launch writes the one site (Variant::kInputGradBatchSum): no hooks here.
        const bool site_elsewhere = Variant::kInputGradBatchSum && a.batch_sum == 1;
        if constexpr (Variant::kInputGrads) {
            if (!site_elsewhere) zero_fill_input_grads<Variant, Params, kThreads>(p, hd, m0, BM, nq, nk);
        }
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        const int last_row = (m0 + BM < nq ? m0 + BM : nq) - 1;
        KvCursor<Variant, Params, BN> cursor(nk, m0, last_row);
        auto band_tile = [&](int tile) {
            return kRecip && Band<Variant>::meets(m0, last_row, tile * BN, tile * BN + BN - 1);
        };
        auto issue = [&](int tile, int stage) {
            if (tile >= 0) {
                if (band_tile(tile))  // Q at the key tile's rows, in K's group
                    copy_tile<E, kThreads, BN, DQK, false, kDqkReal>(
                        sbase + kQrOff + stage * kQrStage, qg + (long long)(tile * BN - m0) * a.q_stride[2],
                        a.q_stride[2], nq - tile * BN, static_cast<const E*>(a.q), tid);
                const unsigned dst = kv_s + stage * kKvStage;
                load_k(dst, kg, kg + (long long)tile * BN * ksn, ksn, nk, tile * BN, tid);
                copy_tile<E, kThreads, BN, DV, false, kDvReal>(dst + kVInStage, vg + (long long)tile * BN * vsn, vsn,
                                                               nk - tile * BN, vg, tid);
            }
        };
        TileClass cls;
        int tile = cursor.advance(p, hd, ctx, cls);
        issue(tile, 0);
        ptx::cp_async_commit();

        float* lse2_s = reinterpret_cast<float*>(smem + kLseOff);
        float* delta_s = reinterpret_cast<float*>(smem + kDeltaOff);
        backward_row_stats<E, kDvReal, 16 * kMF>(a, lse2_s, delta_s, b, h, m0, warp * 16 * kMF, lane);
        warp_sync();

        const SLayout sl;
        int qc[kRows];
        bool q_ok[kRows];
        typename Variant::Row rw[kRows];
        float lse2[kRows], delta[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            const int q = m0 + sl.row(r);
            qc[r] = q < nq ? q : nq - 1;
            q_ok[r] = q < nq;
            rw[r] = Variant::make_row(p, hd, qc[r]);
            lse2[r] = lse2_s[sl.row(r)];
            delta[r] = delta_s[sl.row(r)];
        }

        const int a_row = warp * 16 * kMF + LaneRows::a_row(lane), b_row = LaneRows::b_row(lane);
        const LaneChunks la = LaneRows::a_chunks(lane), lb = LaneRows::b_chunks(lane);
        const unsigned q_ld = q_s + (kQHalo + a_row) * kCprQ * 16, do_ld = do_s + a_row * kCprV * 16;
        const unsigned k_nt = kv_s + b_row * kCprQ * 16, v_nt = kv_s + kVInStage + b_row * kCprV * 16;
        const unsigned k_t = kv_s + LaneRows::a_row(lane) * kCprQ * 16;

        // The band's operands (as q_ld, k_nt, k_t), its weight, and this thread's part of
        // sum_i <k_i, U_i> (d alpha).
        const unsigned kr_ld = sbase + kKrOff + a_row * kCprQ * 16, qr_nt = sbase + kQrOff + b_row * kCprQ * 16,
                       qr_t = sbase + kQrOff + LaneRows::a_row(lane) * kCprQ * 16;
        float band_alpha = 0.f, alpha_sum = 0.f;
        if constexpr (kRecip) band_alpha = Variant::recip_band_alpha(p, h);
        float* const band_dk_h = a.band_dk + ((long long)b * a.q_heads + h) * nq * kDqkReal;

        float dq[kMF][DQK / 8][4];
        DLayout::clear(dq);
        InputGradAcc<Variant, (Variant::kInputGradQuerySites > 0 ? kRows : 1)> gacc;  // row sums per row slot
        gacc.clear();
        if constexpr (Variant::kInputGrads) begin_input_grads<Variant, Params, kThreads>(p, gacc);
        int stage = 0;
        while (tile >= 0) {
            const TileClass tcls = cls;
            ptx::cp_async_wait<0>();
            block_sync();  // this tile's K, V landed; every warp is done with the other stage
            const int next = cursor.advance(p, hd, ctx, cls);
            issue(next, stage ^ 1);
            ptx::cp_async_commit();

            const unsigned so = stage * kKvStage;
            float s[kMF][kNT][4], dp[kMF][kNT][4];
            SLayout::clear(s);
            SLayout::clear(dp);
            const int k0 = tile * BN;
            scores<Variant>(p, hd, h, s, smem, q_ld, k_nt + so, la, lb, m0, k0, nq, nk);
            const bool band = band_tile(tile);
            if constexpr (kRecip) {
                if (band)  // S += alpha [band] K_rows(m0) Q_rows(k0)^T
                    Band<Variant>::add(s, sl, kr_ld, qr_nt + stage * kQrStage, la, lb, band_alpha, m0, k0);
            }
            gemm_nt<E, kMF, kNT, DV / 16, kCprV, kCprV>(dp, do_ld, v_nt + so, la, lb);
            const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e,
                                                         Variant::kHasMask && tcls == TileClass::kPartial};
            bool hooks = false;
            if constexpr (Variant::kInputGrads) {
                hooks = !site_elsewhere;
                if (hooks) {
                    if (k0 + BN > nk)
                        scores.template queries_are_rows_grads<true>(sl, s, dp, qc, q_ok, rw, lse2, delta, k0, nk, gacc);
                    else
                        scores.template queries_are_rows_grads<false>(sl, s, dp, qc, q_ok, rw, lse2, delta, k0, nk,
                                                                      gacc);
                }
            }
            if (!hooks) {
                if (k0 + BN > nk)
                    scores.template queries_are_rows<true>(sl, s, dp, qc, rw, lse2, delta, k0, nk);
                else
                    scores.template queries_are_rows<false>(sl, s, dp, qc, rw, lse2, delta, k0, nk);
            }
            if constexpr (!kConv) {  // with a convolution, backward_fused computes dQ
                unsigned ds_a[kMF][kNT / 2][4];
                pack_a<E>(dp, ds_a);
                gemm_rn<E, kMF, DQK / 8, kNT / 2, kCprQ>(dq, ds_a, k_t + so, la);
            }
            if constexpr (kRecip) {
                if (band) {  // U_i += sum_j band dS_ij q_j (band_dk), and <k_i, U_i> for d alpha
                    Band<Variant>::mask(dp, sl, m0, k0);
                    unsigned bds_a[kMF][kNT / 2][4];
                    pack_a<E>(dp, bds_a);
                    // Every load first, then every store: the loads overlap (no store between them
                    // that the compiler must assume aliases).
                    auto add_u = [&](float (&u)[kMF][2][4], int pair) {
                        float old[kMF][2][4], kv[kMF][2][4];
                        Band<Variant>::for_each_product(sl, pair, [&](int mf, int nt, int e, int r, int c) {
                            const bool ok = m0 + r < nq && c < kDqkReal;
                            old[mf][nt][e] = ok ? band_dk_h[(long long)(m0 + r) * kDqkReal + c] : 0.f;
                            kv[mf][nt][e] = ok ? to_float(kg[(long long)(m0 + r) * ksn + c]) : 0.f;
                        });
                        Band<Variant>::for_each_product(sl, pair, [&](int mf, int nt, int e, int r, int c) {
                            if (m0 + r < nq && c < kDqkReal)
                                band_dk_h[(long long)(m0 + r) * kDqkReal + c] = old[mf][nt][e] + u[mf][nt][e];
                            alpha_sum += u[mf][nt][e] * kv[mf][nt][e];
                        });
                    };
                    Band<Variant>::template band_products<DQK>(bds_a, qr_t + stage * kQrStage, la, add_u);
                }
            }
            tile = next;
            stage ^= 1;
        }
        ptx::cp_async_wait<0>();

        if constexpr (kRecip) {
            // dQ's sums (unscaled) for backward_dkdv, which adds the band's part and stores dq.
            const DLayout dl;
            float* wq = a.band_dq + ((long long)b * a.q_heads + h) * nq * kDqkReal;
            auto put = [&](float& v, int r, int c) {
                const int q = m0 + dl.row(r);
                if (q < nq && c < kDqkReal) wq[(long long)q * kDqkReal + c] = v;
            };
            dl.for_each(dq, put);
            if (a.d_alpha != nullptr) store_band_alpha_sum<W>(a, smem, alpha_sum, b, h);
        } else if constexpr (!kConv) {
            const DLayout dl;
            E* dqg = static_cast<E*>(a.dq) + b * a.dq_stride[0] + h * a.dq_stride[1];
            const float scale = a.scale;
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                const int q = m0 + dl.row(r);
                if (q < nq)
                    dl.store_row(dqg + q * a.dq_stride[2] + dl.lane_col(), dq, r,
                                 [scale](float v, int) { return v * scale; });
            }
        }
        // Per-query sites: each row's sum over its keys (common/input_grads.cuh).
        if constexpr (Variant::kInputGradQuerySites > 0) store_row_sums<Variant, false>(p, hd, gacc, sl, m0, nq);
        if constexpr (Variant::kInputGrads) finish_input_grads<Variant, Params, kThreads, kSmemBytes>(p, hd, gacc, smem);
    }

    // The batch-sum launch (Variant::kInputGradBatchSum, BackwardArgs::batch_sum; after
    // backward_dq's own launch, which wrote the row statistics): grid (ceil(Nk / BN),
    // ceil(Nq / BM), Hq x chunks). A CTA recomputes S and dP of its (query tile, key tile)
    // of head h for the b of its chunk in order and adds the stored site's contributions in
    // registers; with one chunk each element of the gradient is one thread's sum over the
    // batch, stored once; with more (grids too small for the GPU), the chunks' sums meet in
    // f32 partials, added in chunk order by the CTA that finishes the tile last. Every tile is computed (masked elements add 0). Shared memory: backward_dq's
    // Q, dO and first K/V stage, and its LSE2 / Delta rows; b + 1's copies overlap b's
    // element pass.
    template <class Variant, class Params>
    __device__ __forceinline__ static void run_batch_sum(const Params& p, unsigned char* smem) {
        const BackwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM, h = blockIdx.z % a.q_heads, kvh = h / a.group;
        const int chunk = blockIdx.z / a.q_heads, chunks = a.batch_sum_chunks;
        const int per_chunk = (a.batch + chunks - 1) / chunks, b0 = chunk * per_chunk;
        const int b1 = b0 + per_chunk < a.batch ? b0 + per_chunk : a.batch;
        const int nq = a.q_len, nk = a.kv_len;
        const long long plane = (long long)a.batch * a.q_heads * nq;
        const unsigned sbase = ptx::smem_addr(smem);
        const unsigned q_s = sbase + kQOff, do_s = sbase + kDoOff, kv_s = sbase + kKvOff, stat_s = sbase + kLseOff;
        const float* lse2_s = reinterpret_cast<const float*>(smem + kLseOff);
        const float* delta_s = reinterpret_cast<const float*>(smem + kDeltaOff);

        const int a_row = warp * 16 * kMF + LaneRows::a_row(lane), b_row = LaneRows::b_row(lane);
        const LaneChunks la = LaneRows::a_chunks(lane), lb = LaneRows::b_chunks(lane);
        const unsigned q_ld = q_s + (kQHalo + a_row) * kCprQ * 16, do_ld = do_s + a_row * kCprV * 16;
        const unsigned k_nt = kv_s + b_row * kCprQ * 16, v_nt = kv_s + kVInStage + b_row * kCprV * 16;

        const SLayout sl;
        float sum[kMF][kNT][4];
        SLayout::clear(sum);
        int qc[kRows];
        bool q_ok[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
            const int q = m0 + sl.row(r);
            qc[r] = q < nq ? q : nq - 1;
            q_ok[r] = q < nq;
        }
        // score_mod's bias tile, when every batch row reads the same one (a pair bias
        // broadcast over the MSA rows): read once here, not gathered again for each b.
        constexpr bool kBiasOnce = Variant::kHasBiasTile && Variant::kBiasTileBatchInvariant;
        float bias[kMF][kNT][4];
        if constexpr (kBiasOnce) {
            const auto ref = Variant::bias_tile(p, Variant::make_head(p, 0, h, kvh));
            auto load = [&](float& v, float&, int r, int col) {
                const int k = n0 + col;
                v = ref.at(qc[r], k < nk ? k : nk - 1);  // keys past Nk: not kept, any value
            };
            sl.for_each2(bias, bias, load);
        }
        // b's tiles and row statistics; issued once every warp is past its products of b - 1,
        // so they land while the element pass of b - 1 runs.
        auto issue = [&](int b) {
            const E* qg = static_cast<const E*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1];
            const E* dog = static_cast<const E*>(a.d_o) + b * a.do_stride[0] + h * a.do_stride[1];
            const E* kg = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
            const E* vg = static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];
            load_q(q_s, qg + m0 * a.q_stride[2], a.q_stride[2], nq, m0, qg, tid);
            copy_tile<E, kThreads, BM, DV, false, kDvReal>(do_s, dog + m0 * a.do_stride[2], a.do_stride[2], nq - m0, dog,
                                                           tid);
            load_k(kv_s, kg, kg + n0 * a.k_stride[2], a.k_stride[2], nk, n0, tid);
            copy_tile<E, kThreads, BN, DV, false, kDvReal>(kv_s + kVInStage, vg + n0 * a.v_stride[2], a.v_stride[2],
                                                           nk - n0, vg, tid);
            const float* ws = a.stats + ((long long)b * a.q_heads + h) * nq + m0;
            for (int i = tid; i < 2 * BM; i += kThreads) {  // LSE2 then Delta (contiguous in smem)
                const int r = i < BM ? i : i - BM;
                const bool ok = m0 + r < nq;
                ptx::cp_async_4(stat_s + i * 4, ok ? ws + (i < BM ? 0 : plane) + r : a.stats, ok);
            }
            ptx::cp_async_commit();
        };
        prepare<Variant>(p, h, smem);
        if (b0 < b1) issue(b0);
        for (int b = b0; b < b1; ++b) {
            ptx::cp_async_wait<0>();
            block_sync();  // b's tiles landed

            const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
            typename Variant::Row rw[kRows];
            float lse2[kRows], delta[kRows];
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
                rw[r] = Variant::make_row(p, hd, qc[r]);
                lse2[r] = q_ok[r] ? lse2_s[sl.row(r)] : -neg_inf();  // padding rows: P = 0
                delta[r] = delta_s[sl.row(r)];
            }
            float s[kMF][kNT][4], dp[kMF][kNT][4];
            SLayout::clear(s);
            SLayout::clear(dp);
            scores<Variant>(p, hd, h, s, smem, q_ld, k_nt, la, lb, m0, n0, nq, nk);
            gemm_nt<E, kMF, kNT, DV / 16, kCprV, kCprV>(dp, do_ld, v_nt, la, lb);
            block_sync();  // every warp is done with b's shared memory
            if (b + 1 < b1) issue(b + 1);

            const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e, Variant::kHasMask};
            if (n0 + BN > nk)
                scores.template queries_are_rows_batch_sum<true, kBiasOnce>(sl, s, dp, sum, qc, q_ok, rw, lse2, delta,
                                                                            n0, nk, bias);
            else
                scores.template queries_are_rows_batch_sum<false, kBiasOnce>(sl, s, dp, sum, qc, q_ok, rw, lse2, delta,
                                                                             n0, nk, bias);
        }
        const typename Variant::Head hd0 = Variant::make_head(p, 0, h, kvh);
        if (chunks > 1) {
            // This chunk's sums to its partials; the tile's last CTA adds the chunks in order.
            const long long chunk_elems = (long long)a.q_heads * nq * nk;
            float* part = a.batch_sum_partials + (long long)h * nq * nk;
            auto put = [&](float& v, float&, int r, int col) {
                const int k = n0 + col;
                if (q_ok[r] && k < nk) part[chunk * chunk_elems + (long long)qc[r] * nk + k] = v;
            };
            sl.for_each2(sum, sum, put);
            unsigned* flag = reinterpret_cast<unsigned*>(smem);  // every warp is past its last use of smem
            grad_detail::fence_gpu();  // each thread's partials, before tid 0's ticket
            block_sync();
            unsigned* ticket = a.batch_sum_tickets + ((long long)h * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
            if (!grad_detail::last_to_arrive(ticket, static_cast<unsigned>(chunks), flag)) return;
            auto gather = [&](float& v, float&, int r, int col) {
                const int k = n0 + col;
                if (!(q_ok[r] && k < nk)) return;
                const float* e = part + (long long)qc[r] * nk + k;
                v = 0.f;
                for (int c = 0; c < chunks; ++c) v += __ldcg(e + c * chunk_elems);
            };
            sl.for_each2(sum, sum, gather);
        }
        auto store = [&](float& v, float&, int r, int col) {
            const int k = n0 + col;
            if (q_ok[r] && k < nk) Variant::input_grads_batch_store(p, hd0, qc[r], k, v);
        };
        sl.for_each2(sum, sum, store);
    }
};

}  // namespace sm80
}  // namespace attnjit
