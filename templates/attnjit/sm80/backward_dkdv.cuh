// backward_dkdv on tensor cores (fp16, bf16; sm_80+): one CTA per KV tile of BN keys,
// grid (ceil(Nk / BN), Hkv, B). It runs after backward_dq, whose per-row statistics
// (LSE2, Delta: BackwardArgs::stats) it reads.
//
//   K, V of the tile stay in shared memory; Q, dO and the statistics of every query tile
//   of every query head of the group (QueryCursor: masked tiles skipped) stream through
//   two cp.async stages. The products are taken transposed, so that the warps own key
//   rows and P^T, dS^T stay in registers:
//     S^T = K Q^T, dP^T = V dO^T       (gemm_nt, warps own 16 kMF key rows)
//     P^T, dS^T                        (BackwardScores::keys_are_rows)
//     dV += P^T dO, dK += dS^T Q       (gemm_rn, dO and Q read transposed)
//   dK is scaled once; dK and dV are stored. Each element is one thread's fixed-order
//   sum over (head, query tile): deterministic.
//   Per-key gradients of captured tensors (kv_bias[h][k], common/input_grads.cuh): each
//   thread sums its key rows' elements in registers, head by head; when the cursor
//   leaves a head the quads reduce (fixed butterfly) and the row leaders store one sum per
//   (b, h, key), directly or into planes that the CTA finishing last sums in plane order.
// Shared memory (smem_bytes in common/kernel_config.h): scratch | K [BN x DQK] |
// V [BN x DV] | 2 x (Q [BM x DQK] | dO [BM x DV]) | 2 x (LSE2 [BM] | Delta [BM]) (f32),
// and with kRecip (a reciprocal band, sm80/reciprocal_band.cuh) 2 x (K at the step's query
// rows [BM x DQK] | Q of the step's head at the tile's key rows [BN x DQK]), copied with the
// step's Q and dO when it meets the band. Then R^T = Q_rows(n0) K_rows(m0)^T joins S^T, the
// band's dQ_j += alpha (band dS)^T K_rows(m0) goes to BackwardArgs::band_dq (rows of this key
// tile: no other CTA writes them), and at the end the CTA stores dq for its key tile's rows
// of every head of the group, and adds alpha_h U (band_dk, from backward_dq) to dK.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/backward_scores.cuh"
#include "attnjit/common/input_grads.cuh"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/key_grads_store.cuh"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/query_schedule.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/copy.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm80/reciprocal_band.cuh"

namespace attnjit {
namespace sm80 {

template <class E, int kDqkReal, int kDvReal, int BM, int BN, int W, bool kRecip = false>
struct BackwardDkdv {
    // Tiles at the tile head dims; columns past the real ones zero-filled on load, not stored.
    static constexpr int DQK = tile_head_dim(kDqkReal), DV = tile_head_dim(kDvReal);
    static constexpr int kThreads = W * 32;
    static constexpr int kMF = BN / (16 * W);  // 16-row key fragments per warp
    static constexpr int kNT = BM / 8;         // n8 tiles (queries) of S^T per fragment
    static constexpr int kCprQ = DQK / 8, kCprV = DV / 8;

    static constexpr int kKOff = scratch_bytes(W);
    static constexpr int kVOff = kKOff + BN * DQK * 2;
    static constexpr int kQOff = kVOff + BN * DV * 2;
    static constexpr int kDoInStage = BM * DQK * 2;
    static constexpr int kQStage = BM * (DQK + DV) * 2;
    static constexpr int kStatOff = kQOff + 2 * kQStage;
    static constexpr int kStatStage = 2 * BM * 4;  // LSE2 [BM] | Delta [BM]
    static constexpr int kBandOff = kStatOff + 2 * kStatStage;  // band: K at the query rows | Q at the key rows
    static constexpr int kQrInStage = BM * DQK * 2;
    static constexpr int kBandStage = (BM + BN) * DQK * 2;
    static constexpr int kSmemBytes = kBandOff + (kRecip ? 2 * kBandStage : 0);
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::backward_dkdv, MainloopKind::sm80,
                                                        ElemKindOf<E>::value, kDqkReal, kDvReal, TileConfig{BM, BN, W, 2},
                                                        false, false, kRecip}),
                  "sm80::BackwardDkdv shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(kMF >= 1 && BN % (16 * W) == 0, "block_n must be a multiple of 16 keys per warp");
    static_assert(BM % 16 == 0, "block_m must be a multiple of 16");

    static constexpr const char* kName = "sm80 backward";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;
    static constexpr bool kSupportsRecipBand = kRecip;

    using SLayout = MmaCLayout<kMF, kNT>;       // S^T, P^T, dP^T, dS^T
    using KLayout = MmaCLayout<kMF, DQK / 8, 1, kDqkReal>;  // dK (stores the real columns)
    using VLayout = MmaCLayout<kMF, DV / 8, 1, kDvReal>;    // dV

    // The reciprocal band's ends (kRecip): dK += alpha_h U (band_dk) over the heads of the group,
    // for this thread's elements; then, once every warp's adds to band_dq are done, dq =
    // scale band_dq for the tile's rows of each head of the group (Nq == Nk: the key tiles
    // cover every query row once).
    template <class Variant, class Params>
    __device__ __forceinline__ static void store_band_grads(const Params& p, const KLayout& kl,
                                                            float (&dk)[kMF][DQK / 8][4], int b, int kvh, int n0) {
        const BackwardArgs& a = p.args;
        const int nq = a.q_len;
        for (int h = kvh * a.group; h < (kvh + 1) * a.group; ++h) {
            const float alpha = Variant::recip_band_alpha(p, h);
            const float* u = a.band_dk + ((long long)b * a.q_heads + h) * nq * kDqkReal;
            auto add = [&](float& v, int r, int c) {
                const int j = n0 + kl.row(r);
                if (j < nq && c < kDqkReal) v += alpha * u[(long long)j * kDqkReal + c];
            };
            kl.for_each(dk, add);
        }
        block_sync();  // every thread's adds to band_dq (this tile's rows) are done
        // dq = scale band_dq, kBatch elements a thread at a time: their loads, then their stores.
        constexpr int kBatch = 8;
        const int rows = (n0 + BN < nq ? n0 + BN : nq) - n0;
        const long long per_head = (long long)rows * kDqkReal, total = a.group * per_head;
        for (long long n0b = (long long)threadIdx.x; n0b < total; n0b += (long long)kBatch * kThreads) {
            float v[kBatch];
#pragma unroll
            for (int x = 0; x < kBatch; ++x) {
                const long long n = n0b + (long long)x * kThreads;
                if (n < total) {
                    const int h = kvh * a.group + static_cast<int>(n / per_head);
                    const long long rc = n % per_head;
                    v[x] = a.band_dq[(((long long)b * a.q_heads + h) * nq + n0) * kDqkReal + rc];
                }
            }
#pragma unroll
            for (int x = 0; x < kBatch; ++x) {
                const long long n = n0b + (long long)x * kThreads;
                if (n < total) {
                    const int h = kvh * a.group + static_cast<int>(n / per_head);
                    const long long rc = n % per_head;
                    const int j = n0 + static_cast<int>(rc / kDqkReal), c = static_cast<int>(rc % kDqkReal);
                    static_cast<E*>(a.dq)[b * a.dq_stride[0] + h * a.dq_stride[1] + j * a.dq_stride[2] + c] =
                        FromFloat<E>::cvt(v[x] * a.scale);
                }
            }
        }
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dkdv(const Params& p, unsigned char* smem) {
        sum_input_grad_planes<Variant, Params, kThreads>(p);  // gradients of captured tensors (common/input_grads.cuh)
        const BackwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int n0 = blockIdx.x * BN, kvh = blockIdx.y, b = blockIdx.z;
        const int nq = a.q_len, nk = a.kv_len;
        const E* qh = static_cast<const E*>(a.q) + b * a.q_stride[0];
        const E* doh = static_cast<const E*>(a.d_o) + b * a.do_stride[0];
        const long long qsn = a.q_stride[2], dosn = a.do_stride[2];
        const long long plane = (long long)a.batch * a.q_heads * nq;

        const unsigned sbase = ptx::smem_addr(smem);
        const unsigned k_s = sbase + kKOff, v_s = sbase + kVOff, q_s = sbase + kQOff, stat_s = sbase + kStatOff;
        copy_tile<E, kThreads, BN, DQK, false, kDqkReal>(
            k_s, static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1] + n0 * a.k_stride[2],
            a.k_stride[2], nk - n0, static_cast<const E*>(a.k), tid);
        copy_tile<E, kThreads, BN, DV, false, kDvReal>(
            v_s, static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1] + n0 * a.v_stride[2],
            a.v_stride[2], nk - n0, static_cast<const E*>(a.v), tid);
        ptx::cp_async_commit();

        static_assert(kRecip == (Variant::kRecipBandWidth >= 0),
                      "a Variant with a reciprocal band needs backward_dkdv's kRecip layout, and only it");
        using Band = RecipBand<E, kMF, kNT, DQK / 16, kCprQ, (kRecip ? Variant::kRecipBandWidth : 0),
                               Variant::kRecipBandCausal, true>;
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        const int last_key = (n0 + BN < nk ? n0 + BN : nk) - 1;
        QueryCursor<Variant, Params, BM> cursor(a, n0, last_key);
        auto band_step = [&](const QueryStep& st) {
            return kRecip && Band::meets(st.m0, st.m0 + BM - 1, n0, last_key);
        };
        const E* kvh_k = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
        auto issue = [&](const QueryStep& st, int stage) {
            if (st.h >= 0) {
                if (band_step(st)) {  // K at the step's query rows, Q of its head at the key rows
                    const unsigned band_dst = sbase + kBandOff + stage * kBandStage;
                    copy_tile<E, kThreads, BM, DQK, false, kDqkReal>(band_dst, kvh_k + st.m0 * a.k_stride[2],
                                                                     a.k_stride[2], nk - st.m0, kvh_k, tid);
                    copy_tile<E, kThreads, BN, DQK, false, kDqkReal>(band_dst + kQrInStage,
                                                                     qh + st.h * a.q_stride[1] + n0 * qsn, qsn, nq - n0,
                                                                     qh, tid);
                }
                const unsigned dst = q_s + stage * kQStage;
                const int valid = nq - st.m0;
                copy_tile<E, kThreads, BM, DQK, false, kDqkReal>(dst, qh + st.h * a.q_stride[1] + st.m0 * qsn, qsn,
                                                                 valid, qh, tid);
                copy_tile<E, kThreads, BM, DV, false, kDvReal>(dst + kDoInStage,
                                                               doh + st.h * a.do_stride[1] + st.m0 * dosn, dosn, valid,
                                                               doh, tid);
                const float* ws = a.stats + ((long long)b * a.q_heads + st.h) * nq + st.m0;
                for (int i = tid; i < 2 * BM; i += kThreads) {
                    const int r = i < BM ? i : i - BM;
                    const bool ok = r < valid;
                    ptx::cp_async_4(stat_s + stage * kStatStage + i * 4, ok ? ws + (i < BM ? 0 : plane) + r : a.stats,
                                    ok);
                }
            }
        };
        QueryStep cur = cursor.advance(p, ctx);
        issue(cur, 0);
        ptx::cp_async_commit();

        const int a_row = LaneRows::a_row(lane), b_row = LaneRows::b_row(lane);
        const LaneChunks la = LaneRows::a_chunks(lane), lb = LaneRows::b_chunks(lane);
        const unsigned k_ld = k_s + (warp * 16 * kMF + a_row) * kCprQ * 16;
        const unsigned v_ld = v_s + (warp * 16 * kMF + a_row) * kCprV * 16;
        const unsigned q_nt = q_s + b_row * kCprQ * 16, do_nt = q_s + kDoInStage + b_row * kCprV * 16;
        const unsigned q_t = q_s + a_row * kCprQ * 16, do_t = q_s + kDoInStage + a_row * kCprV * 16;
        const float* stats = reinterpret_cast<const float*>(smem + kStatOff);

        // The band's operands: Q at the key rows as the A operand (like k_ld), K at the query
        // rows as the B operand (like q_nt) and read transposed (like q_t).
        const unsigned qr_ld = sbase + kBandOff + kQrInStage + (warp * 16 * kMF + a_row) * kCprQ * 16;
        const unsigned kr_nt = sbase + kBandOff + b_row * kCprQ * 16, kr_t = sbase + kBandOff + a_row * kCprQ * 16;

        const SLayout sl;
        float dk[kMF][DQK / 8][4], dv[kMF][DV / 8][4];
        KLayout::clear(dk);
        VLayout::clear(dv);
        typename Variant::Head hd = Variant::make_head(p, b, kvh * a.group, kvh);
        int hd_h = kvh * a.group;
        float band_alpha = 0.f;  // alpha of head hd_h (kRecip)
        if constexpr (kRecip) band_alpha = Variant::recip_band_alpha(p, hd_h);
        // Per-key sites: the thread's sums of its key rows for query head hd_h.
        InputGradAcc<Variant, (Variant::kInputGradKeySites > 0 ? SLayout::kRows : 1)> kacc;
        kacc.clear();
        const bool edge = n0 + BN > nk;
        int stage = 0;
        while (cur.h >= 0) {
            ptx::cp_async_wait<0>();
            block_sync();  // this step's Q, dO, stats landed; every warp is done with the other stage
            const QueryStep next = cursor.advance(p, ctx);
            issue(next, stage ^ 1);
            ptx::cp_async_commit();
            if (cur.h != hd_h) {
                store_key_sums<Variant>(p, hd, kacc, sl, b, kvh, hd_h, cur.h, n0, nk);  // head hd_h is done
                hd = Variant::make_head(p, b, cur.h, kvh);
                hd_h = cur.h;
                if constexpr (kRecip) band_alpha = Variant::recip_band_alpha(p, hd_h);
            }

            const unsigned so = stage * kQStage;
            float s[kMF][kNT][4], dp[kMF][kNT][4];
            SLayout::clear(s);
            SLayout::clear(dp);
            gemm_nt<E, kMF, kNT, DQK / 16, kCprQ, kCprQ>(s, k_ld, q_nt + so, la, lb);
            const bool band = band_step(cur);
            if constexpr (kRecip) {
                if (band)  // S^T += alpha [band] Q_rows(n0) K_rows(m0)^T
                    Band::add(s, sl, qr_ld + stage * kBandStage, kr_nt + stage * kBandStage, la, lb, band_alpha, n0,
                              cur.m0);
            }
            gemm_nt<E, kMF, kNT, DV / 16, kCprV, kCprV>(dp, v_ld, do_nt + so, la, lb);
            const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e,
                                                         Variant::kHasMask && cur.cls == TileClass::kPartial};
            const float* lse2_s = stats + stage * 2 * BM;
            if constexpr (Variant::kInputGradKeySites > 0) {
                if (edge)
                    scores.template keys_are_rows<true, SLayout, decltype(s), true>(sl, s, dp, lse2_s, lse2_s + BM,
                                                                                    cur.m0, nq, n0, nk, &kacc);
                else
                    scores.template keys_are_rows<false, SLayout, decltype(s), true>(sl, s, dp, lse2_s, lse2_s + BM,
                                                                                     cur.m0, nq, n0, nk, &kacc);
            } else {
                if (edge)
                    scores.template keys_are_rows<true>(sl, s, dp, lse2_s, lse2_s + BM, cur.m0, nq, n0, nk);
                else
                    scores.template keys_are_rows<false>(sl, s, dp, lse2_s, lse2_s + BM, cur.m0, nq, n0, nk);
            }
            unsigned pa[kMF][kNT / 2][4];
            pack_a<E>(s, pa);
            gemm_rn<E, kMF, DV / 8, kNT / 2, kCprV>(dv, pa, do_t + so, la);
            pack_a<E>(dp, pa);
            gemm_rn<E, kMF, DQK / 8, kNT / 2, kCprQ>(dk, pa, q_t + so, la);
            if constexpr (kRecip) {
                if (band) {  // dQ_j += alpha sum_i band dS_ij k_i, into band_dq (this tile's rows)
                    Band::mask(dp, sl, n0, cur.m0);
                    pack_a<E>(dp, pa);
                    float* wq = a.band_dq + ((long long)b * a.q_heads + cur.h) * nq * kDqkReal;
                    auto add_dq = [&](float (&u)[kMF][2][4], int pair) {  // loads first, then stores
                        float old[kMF][2][4];
                        Band::for_each_product(sl, pair, [&](int mf, int nt, int e, int r, int c) {
                            old[mf][nt][e] = n0 + r < nq && c < kDqkReal ? wq[(long long)(n0 + r) * kDqkReal + c] : 0.f;
                        });
                        Band::for_each_product(sl, pair, [&](int mf, int nt, int e, int r, int c) {
                            if (n0 + r < nq && c < kDqkReal)
                                wq[(long long)(n0 + r) * kDqkReal + c] = old[mf][nt][e] + band_alpha * u[mf][nt][e];
                        });
                    };
                    Band::template band_products<DQK>(pa, kr_t + stage * kBandStage, la, add_dq);
                }
            }
            cur = next;
            stage ^= 1;
        }
        ptx::cp_async_wait<0>();
        store_key_sums<Variant>(p, hd, kacc, sl, b, kvh, hd_h, (kvh + 1) * a.group, n0, nk);  // the last heads

        const KLayout kl;
        const VLayout vl;
        if constexpr (kRecip) store_band_grads<Variant>(p, kl, dk, b, kvh, n0);
        store_key_grads<E>(a, kl, vl, dk, dv, b, kvh, n0, nk);
        if constexpr (Variant::kInputGradKeySites > 0) {
            block_sync();  // every warp is past its last use of shared memory
            finish_key_grads<Variant, Params, kThreads>(p, smem);
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
