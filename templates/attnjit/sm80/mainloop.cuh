// FlashAttention-2-style forward main loop for 16-bit inputs (fp16, bf16) on sm_80+:
//   Q tile in shared memory (read through ldmatrix each KV step), K/V streamed through a
//   cp.async pipeline, S = Q K^T and O += P V with mma.sync m16n8k16 (fp32 accumulators),
//   P handed to the P V product in registers.
// This file is data movement and products only: the hooks (common/score_hooks.cuh), the
// online softmax (common/online_softmax.cuh), the epilogue (common/epilogue.cuh) and the
// CTA order (common/cta_order.cuh) are shared with every main loop; the register layout
// they work on is MmaCLayout (sm80/fragment.cuh).
//
// Warp w owns query rows [w * 16 * kMF, (w + 1) * 16 * kMF) of the CTA tile.
// Shared memory (see smem_bytes in common/kernel_config.h):
//   scratch | Q [BM x DQK] | K [S][BN x DQK] | V [S][BN x DV]
// Every tile row is XOR-swizzled (sm80/swizzle.cuh).
//
// Pipeline (S = kStages):
//   S == 1: one K and one V buffer. V_j is fetched during S_j = Q K_j^T, K_{j+1} during
//           softmax and P V_j.
//   S >= 2: a ring of S (K, V) buffers; at the top of step j the pair for the
//           (S-1)-th next non-skipped tile is issued, so up to S-1 tiles are in flight.
// kBiasTile (KernelConfig::bias_tile): one more buffer, score_mod's bias tile
// (sm80/bias_tile.cuh). Bias_{j+1} is issued once every warp is past step j's score hooks
// (with K_{j+1} when S == 1), and lands during softmax, P V_j and Q K_{j+1}^T; with S >= 2
// the top of step j then waits for every group in flight (bias_j is the newest).
// kRecipBand (KernelConfig::recip_band, sm80/reciprocal_band.cuh): K at the query tile's rows,
// loaded with Q, and a ring of S Q tiles at the key tiles' rows, each copied with its K tile
// (same group) when the tile meets the band.
// kLatQ > 0 (KernelConfig::latent, sm80/latent.cuh): the loop runs at head dim L (kDqkReal =
// kDvReal = L) over the latent K, V; the prologue writes Q_lat = Q W_qlat[h] into the Q tile
// and the epilogue stores O_lat W_vup[h] (kLatQ, kLatV: Q's and O's real head dims), both
// staging their operands in the K/V region. A latent dim over 256 (latent_col_split: KS = 2)
// splits the columns across the two warps of a row group: each computes Q K^T over its half
// of L, the two add their partial scores through shared memory (both then hold the whole
// tile and run the same softmax), and each accumulates its half of O's columns.
#pragma once

#include "attnjit/common/cta_tile.cuh"
#include "attnjit/common/cta_order.cuh"
#include "attnjit/common/epilogue.cuh"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/kv_schedule.cuh"
#include "attnjit/common/math_constants.h"
#include "attnjit/common/online_softmax.cuh"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/score_hooks.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/forward/args.h"
#include "attnjit/sm80/copy.cuh"
#include "attnjit/sm80/bias_tile.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm80/latent.cuh"
#include "attnjit/sm80/reciprocal_band.cuh"
#include "attnjit/sm80/score_conv.cuh"
#include "attnjit/sm80/swizzle.cuh"

namespace attnjit {

namespace sm80 {

// kConv: the score convolution (sm80/score_conv.cuh): Q and K tiles carry halo rows, and
// each S tile is computed extended, staged and convolved.
// kDqkReal, kDvReal: the real head dims; the tiles use DQK, DV (tile_head_dim), with the
// columns past the real dims zero-filled on load (they add nothing to Q K^T, and give O
// columns of zeros) and not stored.
template <class E, int kDqkReal, int kDvReal, int BM, int BN, int W, int S, int kOrder = kOrderAuto,
          bool kConv = false, bool kBiasTile = false, bool kRecipBand = false, int kLatQ = 0, int kLatV = 0>
struct Mainloop {
    static constexpr int DQK = tile_head_dim(kDqkReal), DV = tile_head_dim(kDvReal);
    static constexpr int kThreads = W * 32;
    static constexpr int KS = kLatQ > 0 ? latent_col_split(kDqkReal) : 1;  // warps a row group
    static constexpr int kMF = BM / (16 * W / KS);  // 16-row fragments per warp
    static constexpr int kNT = BN / 8;              // n8 tiles of S per fragment
    static constexpr int kDT = DV / 8 / KS;         // n8 tiles of O per fragment (the warp's columns)
    static constexpr int kKQ = DQK / 16 / KS;       // k16 steps of Q K^T (over the warp's columns)
    static constexpr int kKV = BN / 16;        // k16 steps of P V
    static constexpr int kCprQ = DQK / 8;
    static constexpr int kCprV = DV / 8;

    static constexpr int kQHalo = kConv ? 16 : 0;  // query rows above the tile (score_conv)
    static constexpr int kKHalo = kConv ? 8 : 0;   // keys on each side of a K tile (score_conv)
    static constexpr int kQOff = scratch_bytes(W);
    static constexpr int kKOff = kQOff + (BM + kQHalo) * DQK * 2;
    static constexpr int kKStage = (BN + 2 * kKHalo) * DQK * 2;
    static constexpr int kVOff = kKOff + S * kKStage;
    static constexpr int kVStage = BN * DV * 2;
    static constexpr int kS0Off = kVOff + S * kVStage;          // score_conv: S0, then the
    static constexpr int kS0Bytes = kConv ? (BM + 16) * (BN + 24) * 2 : 0;  // Toeplitz fragments
    static constexpr int kFragOff = kS0Off + kS0Bytes;
    static constexpr int kMaskOff = kFragOff + (kConv ? kScoreConvFragmentBytes : 0);  // conv mask bits
    static constexpr int kBiasOff = kMaskOff + (kConv ? score_conv_mask_bytes(BM, BN) : 0);  // bias tile
    static constexpr bool kLatent = kLatQ > 0;
    using Latent = LatentProjection<E, kThreads, kMF, KS, BM, DQK, kDqkReal, (kLatent ? kLatQ : 8),
                                    (kLatent ? kLatV : 8), kRecipBand>;
    // The latent projection stages its operands in the K/V region: at least that big.
    static constexpr int kLatentRegion = kLatent ? Latent::kStagingBytes : 0;
    static constexpr int kXOff =  // KS > 1: the warps' partial scores, [W][kMF kNT 4][32 lanes] f32
        kKOff + (S * (kKStage + kVStage) > kLatentRegion ? S * (kKStage + kVStage) : kLatentRegion);
    static constexpr int kXBytes = KS > 1 ? W * kMF * kNT * 4 * 32 * 4 : 0;
    // The reciprocal band's operands are Q-wide: with a latent projection the keys at the query
    // rows are K_lat W_qlat[h]^T (latent.cuh) and the queries at the key rows are Q itself.
    static constexpr int DB = kLatent ? Latent::DQ : DQK;
    static constexpr int kDbReal = kLatent ? kLatQ : kDqkReal;
    static constexpr int kCprB = DB / 8;
    static constexpr int kKrOff = kLatent ? kXOff + kXBytes  // recip band: K at the query rows
                                          : kBiasOff + (kBiasTile ? BM * BN * 2 : 0);
    static constexpr int kQrOff = kKrOff + (kRecipBand ? BM * DB * 2 : 0);  // and Q at the key rows
    static constexpr int kQrStage = BN * DB * 2;
    static constexpr int kSmemBytes = kQrOff + (kRecipBand ? S * kQrStage : 0);
    static_assert(KS == 1 || (DQK / KS) % 64 == 0, "a column half starts on a whole swizzle group");
    static_assert(!kLatent || !(kConv || kBiasTile), "the latent projection runs without these layouts");
    static_assert(!kRecipBand || KS == 1, "the reciprocal band runs without a column split");
    static_assert(KS == 1 || (W % KS == 0 && kMF >= 1), "a column split needs whole row groups of warps");
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::forward, MainloopKind::sm80, ElemKindOf<E>::value,
                                                        kLatent ? kLatQ : kDqkReal, kLatent ? kLatV : kDvReal,
                                                        TileConfig{BM, BN, W, S}, kConv, kBiasTile, kRecipBand,
                                                        kLatent ? kDqkReal : 0}),
                  "sm80::Mainloop shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(kMF >= 1 && BM % (16 * W / KS) == 0, "block_m must be a multiple of 16 rows per warp (row group)");
    static_assert(BN % 16 == 0, "block_n must be a multiple of 16");
    static_assert(DQK % 32 == 0 && DV % 32 == 0, "head dims must be multiples of 32");
    static_assert(S >= 1 && S <= 3, "stages must be 1, 2 or 3");

    // Structural Variant features this loop implements (check_variant in common/variant.cuh).
    static constexpr const char* kName = "sm80";
    static constexpr bool kSupportsOutputTransform = true;
    static constexpr bool kSupportsScoreTileTransform = false;  // needs the tile staged in smem
    static constexpr bool kSupportsRecipBand = kRecipBand;
    static constexpr bool kSupportsLatent = kLatent;

    using SLayout = MmaCLayout<kMF, kNT, 1, 8 * kNT, KS>;  // S = Q K^T, then P (the row group's whole tile)
    using OLayout = MmaCLayout<kMF, kDT, KS, kDvReal>;    // O accumulator (stores the real columns)

    template <int ROWS, int D, int kCols>
    __device__ __forceinline__ static void load_tile(unsigned dst, const E* g, long long stride, int valid,
                                                     const E* safe, int tid) {
        copy_tile<E, kThreads, ROWS, D, false, kCols>(dst, g, stride, valid, safe, tid);
    }

    // KS > 1: S += the partial scores of the other warp of the row group (over the other half
    // of the head dim's columns). Both warps then hold the same sums (a + b == b + a). The next
    // write of `x` comes after the next step's block barrier, past the partner's reads.
    __device__ __forceinline__ static void add_partner_scores(float (&s)[kMF][kNT][4], float* x, int warp, int lane) {
        constexpr int kRegs = kMF * kNT * 4;
        float* mine = x + warp * kRegs * 32 + lane;
        const float* other = x + (warp ^ 1) * kRegs * 32 + lane;
#pragma unroll
        for (int i = 0; i < kRegs; ++i) mine[i * 32] = s[i / (kNT * 4)][(i / 4) % kNT][i % 4];
        block_sync();
#pragma unroll
        for (int i = 0; i < kRegs; ++i) s[i / (kNT * 4)][(i / 4) % kNT][i % 4] += other[i * 32];
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run(const Params& p, unsigned char* smem) {
        const ForwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int nq = a.q_len, nk = a.kv_len;
        const CtaTile<E, BM> cta(a, launch_cta_order<Variant, kOrder>(a), (DQK + DV) * 2);
        const int b = cta.b, h = cta.h, m0 = cta.m0;
        const E *qg = cta.q, *kg = cta.k, *vg = cta.v;
        const long long ksn = a.k_stride[2], vsn = a.v_stride[2];

        const unsigned sbase = ptx::smem_addr(smem);
        const unsigned q_s = sbase + kQOff, k_s = sbase + kKOff, v_s = sbase + kVOff;
        // ldmatrix row addresses of this lane (see sm80/gemm.cuh); all these rows have
        // (row & 7) == (lane & 7).
        const LaneChunks lq(lane >> 4, lane & 7), lk((lane >> 3) & 1, lane & 7), lv(lane >> 4, lane & 7);
        // KS > 1: the warp's row group and its half of the head dim's columns (whole swizzle
        // groups, so the lane's chunk pattern is the same in either half).
        const int rgroup = warp / KS, half = warp % KS;
        const unsigned q_ld = q_s + (kQHalo + rgroup * 16 * kMF + (lane & 7) + ((lane >> 3) & 1) * 8) * kCprQ * 16 +
                              half * (DQK / KS) * 2;
        const unsigned k_ld = k_s + ((lane & 7) + (lane >> 4) * 8) * kCprQ * 16 + half * (DQK / KS) * 2;
        const unsigned v_ld = v_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kCprV * 16 + half * (DV / KS) * 2;

        // Q first: its group is the oldest, so the first wait for K covers it.
        if constexpr (kConv) {  // with the 16 rows above the tile (none above row 0)
            copy_tile<E, kThreads, BM + kQHalo, DQK, true, kDqkReal>(q_s, qg - kQHalo * a.q_stride[2], a.q_stride[2],
                                                                     nq - m0 + kQHalo, static_cast<const E*>(a.q), tid,
                                                                     kQHalo - m0);
        } else if constexpr (kLatent) {  // Q_lat = Q W_qlat[h], staged in the free K/V region
            static_assert(Variant::kLatentDim == kDqkReal, "the Variant's latent dim is the main loop's head dim");
            const LatentWeights<E> lw = Variant::latent_weights(p, h);
            Latent::template project_q<0>(q_s, k_s, qg, a.q_stride[2], nq - m0, static_cast<const E*>(a.q), lw, tid);
            if constexpr (kRecipBand)  // K at the query rows, projected: K_lat W_qlat[h]^T (Nq == Nk)
                Latent::project_keys(sbase + kKrOff, k_s, kg + (long long)m0 * ksn, ksn, nk - m0, kg, tid);
        } else {
            load_tile<BM, DQK, kDqkReal>(q_s, qg, a.q_stride[2], nq - m0, static_cast<const E*>(a.q), tid);
        }
        if constexpr (kRecipBand && !kLatent)  // K at the query rows (Nq == Nk), the A operand of R = K Q^T
            load_tile<BM, DQK, kDqkReal>(sbase + kKrOff, kg + (long long)m0 * ksn, ksn, nk - m0, kg, tid);
        ptx::cp_async_commit();

        const typename Variant::Head hd = Variant::make_head(p, b, h, cta.kvh);
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        KvCursor<Variant, Params, BN> cursor(nk, m0, cta.last_row(nq));

        const SLayout sl;
        const OLayout ol;
        const ScoreHooks<Variant, Params, SLayout::kRows> hooks(p, hd, sl, m0, nq, nk, a.scale);

        static_assert(kRecipBand == (Variant::kRecipBandWidth >= 0),
                      "a Variant with a reciprocal band needs the main loop's kRecipBand layout, and only it");
        using Band = RecipBand<E, kMF, kNT, DB / 16, kCprB, (kRecipBand ? Variant::kRecipBandWidth : 0),
                               Variant::kRecipBandCausal>;
        const int last_row = cta.last_row(nq);
        auto band_tile = [&](int tile) { return Band::meets(m0, last_row, tile * BN, tile * BN + BN - 1); };
        auto issue_k = [&](int tile, int stage) {
            if (tile < 0) return;
            if constexpr (kRecipBand) {  // Q at the key tile's rows, in K's group
                if (band_tile(tile)) {
                    const E* q_head = qg - (long long)m0 * a.q_stride[2];
                    load_tile<BN, DB, kDbReal>(sbase + kQrOff + stage * kQrStage,
                                                 q_head + (long long)tile * BN * a.q_stride[2], a.q_stride[2],
                                                 nq - tile * BN, static_cast<const E*>(a.q), tid);
                }
            }
            if constexpr (kConv) {  // keys [n0 - 8, n0 + BN + 8)
                const int first = tile * BN - kKHalo;
                copy_tile<E, kThreads, BN + 2 * kKHalo, DQK, true, kDqkReal>(
                    k_s + stage * kKStage, kg + (long long)first * ksn, ksn, nk - first, kg, tid, -first);
            } else {
                load_tile<BN, DQK, kDqkReal>(k_s + stage * kKStage, kg + (long long)tile * BN * ksn, ksn,
                                             nk - tile * BN, kg, tid);
            }
        };
        static_assert(!kBiasTile || Variant::kHasBiasTile, "the staged bias tile needs a Variant with kHasBiasTile");
        using Bias = typename Select<kBiasTile, StagedBias<typename BiasTileElementOf<Variant>::type, BN>, NoBias>::type;
        // The (batch, head)'s bias tile reference, read once (not per step).
        BiasTileRef<typename BiasTileElementOf<Variant>::type> bias_ref{};
        bool bias_vector = false;
        if constexpr (kBiasTile) {
            bias_ref = Variant::bias_tile(p, hd);
            bias_vector = Bias::vectorizable(bias_ref);
        }
        auto issue_bias = [&](int tile) {
            if constexpr (kBiasTile) {
                if (tile >= 0)
                    Bias::template copy<kThreads, BM>(sbase + kBiasOff, bias_ref, m0, tile * BN, nq, nk, bias_vector,
                                                      tid);
            }
        };
        auto apply_hooks = [&](float (&s)[kMF][kNT][4], int tile, TileClass cls) {
            if constexpr (kBiasTile)
                hooks.template apply<BN>(p, hd, sl, s, tile * BN, cls,
                                         Bias{reinterpret_cast<const unsigned*>(smem + kBiasOff)});
            else
                hooks.template apply<BN>(p, hd, sl, s, tile * BN, cls);
        };
        auto issue_v = [&](int tile, int stage) {
            if (tile >= 0)
                load_tile<BN, DV, kDvReal>(v_s + stage * kVStage, vg + (long long)tile * BN * vsn, vsn,
                                           nk - tile * BN, vg, tid);
        };

        // (W / KS: the warps with rows of their own; the convolution has no column split.)
        using Conv = ScoreConv<E, BM, BN, W / KS, (kConv ? Variant::kScoreConvRows : 1),
                               (kConv ? Variant::kScoreConvCols : 1)>;
        static_assert(kConv == (Variant::kScoreConvRows > 0),
                      "a Variant with a score convolution needs the main loop's kConv layout, and only it");
        unsigned* const s0 = reinterpret_cast<unsigned*>(smem + kS0Off);
        const unsigned* const frags = reinterpret_cast<const unsigned*>(smem + kFragOff);
        unsigned* const mask_bits = reinterpret_cast<unsigned*>(smem + kMaskOff);  // Variant::kScoreConvMask
        if constexpr (kConv) Conv::template prepare<Variant>(p, h, reinterpret_cast<unsigned*>(smem + kFragOff), s0);
        int conv_prev = -2;                // the last tile convolved
        uint4 carry[kConv ? Conv::kCarry : 1];  // its last 16 extended keys (Conv::take_carry)

        // The reciprocal band's operands: the lane's ldmatrix rows as in q_ld and k_ld.
        const unsigned kr_ld = sbase + kKrOff + (warp * 16 * kMF + (lane & 7) + ((lane >> 3) & 1) * 8) * kCprB * 16;
        const unsigned qr_ld = sbase + kQrOff + ((lane & 7) + (lane >> 4) * 8) * kCprB * 16;
        float band_alpha = 0.f;
        if constexpr (kRecipBand) band_alpha = Variant::recip_band_alpha(p, h);

        float o[kMF][kDT][4];
        OLayout::clear(o);
        OnlineSoftmax<SLayout::kRows, typename SLayout::RowReduce, Variant::kHasSink> softmax(
            Variant::kHasScoreMod ? kLog2e : a.scale_log2);
        if constexpr (Variant::kHasSink) softmax.set_sink(Variant::sink(p, h));

        // Prologue.
        int ring[S];
        TileClass rcls[S];
        if constexpr (S == 1) {
            ring[0] = cursor.advance(p, hd, ctx, rcls[0]);
            issue_k(ring[0], 0);
            issue_bias(ring[0]);
            ptx::cp_async_commit();
        } else {
#pragma unroll
            for (int s = 0; s < S - 1; ++s) {
                ring[s] = cursor.advance(p, hd, ctx, rcls[s]);
                issue_k(ring[s], s);
                ptx::cp_async_commit();
                issue_v(ring[s], s);
                ptx::cp_async_commit();
            }
            if constexpr (kBiasTile) {
                issue_bias(ring[0]);
                ptx::cp_async_commit();
            }
        }

        int slot = 0;
        while (ring[0] >= 0) {
            const int tile = ring[0];
            const TileClass cls = rcls[0];
            if constexpr (S == 1) {
                ptx::cp_async_wait<0>();
                block_sync();
                issue_v(tile, 0);
                ptx::cp_async_commit();
            } else {
                if constexpr (kBiasTile) ptx::cp_async_wait<0>();  // bias_j is the newest group
                else ptx::cp_async_wait<2 * S - 3>();
                block_sync();
                ring[S - 1] = cursor.advance(p, hd, ctx, rcls[S - 1]);
                const int ps = slot == 0 ? S - 1 : slot - 1;  // (slot + S - 1) % S
                issue_k(ring[S - 1], ps);
                ptx::cp_async_commit();
                issue_v(ring[S - 1], ps);
                ptx::cp_async_commit();
            }

            float s[kMF][kNT][4];
            SLayout::clear(s);
            if constexpr (kConv) {
                // The extended S = Q K^T, staged as S0, then convolved. After the tile
                // before it, the first 16 extended keys are carried over (Conv::take_carry).
                const bool carried = tile == conv_prev + 1;
                if (carried) Conv::put_carry(s0, carry);
                const unsigned q_halo_ld = q_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kCprQ * 16;
                Conv::template tile_scores<Variant, Params, kKQ, kCprQ>(
                    p, hd, h, s, typename Conv::Smem{s0, sbase + kS0Off, frags, mask_bits}, q_ld, q_halo_ld,
                    k_ld + slot * kKStage, lq, lk, m0, tile * BN, nq, nk, carried);
                Conv::take_carry(s0, carry);
                conv_prev = tile;
            } else {
                gemm_nt<E, kMF, kNT, kKQ, kCprQ, kCprQ>(s, q_ld, k_ld + slot * kKStage, lq, lk);  // S = Q K^T
                if constexpr (KS > 1) add_partner_scores(s, reinterpret_cast<float*>(smem + kXOff), warp, lane);
                if constexpr (kRecipBand) {
                    if (band_tile(tile))  // S += alpha [band] K_rows(m0) Q_rows(n0)^T
                        Band::add(s, sl, kr_ld, qr_ld + slot * kQrStage, lq, lk, band_alpha, m0, tile * BN);
                }
            }
            apply_hooks(s, tile, cls);

            if constexpr (S == 1) {
                ptx::cp_async_wait<0>();
                block_sync();
                ring[0] = cursor.advance(p, hd, ctx, rcls[0]);
                issue_k(ring[0], 0);
                issue_bias(ring[0]);
                ptx::cp_async_commit();
            } else {
                ptx::cp_async_wait<2 * S - 2>();
                block_sync();  // (and every warp is past its reads of bias_j)
                if constexpr (kBiasTile) {
                    issue_bias(ring[1]);
                    ptx::cp_async_commit();
                }
            }

            softmax.update(sl, s, ol, o);
            unsigned pa[kMF][kKV][4];  // P as mma A fragments
            pack_a<E>(s, pa);
            gemm_rn<E, kMF, kDT, kKV, kCprV>(o, pa, v_ld + slot * kVStage, lv);  // O += P V

            if constexpr (S > 1) {
#pragma unroll
                for (int i = 0; i < S - 1; ++i) {
                    ring[i] = ring[i + 1];
                    rcls[i] = rcls[i + 1];
                }
                slot = slot + 1 == S ? 0 : slot + 1;
            }
        }
        // Drain outstanding (empty or unused) copy groups before the CTA's smem is released.
        ptx::cp_async_wait<0>();

        if constexpr (kLatent) {  // O = O_lat W_vup[h], W_vup[h] staged where K and V were
            block_sync();        // every warp is done with the last K/V tiles
            float out[kMF][Latent::DVO / 8][4];  // Q_lat's tile is free: the halves' exchange (KS > 1)
            if (Latent::project_out(o, k_s, reinterpret_cast<float*>(smem + kQOff), Variant::latent_weights(p, h),
                                    tid, out))
                store_forward_output<E, Variant>(p, hd, hooks, softmax, typename Latent::OutLayout{}, out, b, h, m0);
        } else {
            store_forward_output<E, Variant>(p, hd, hooks, softmax, ol, o, b, h, m0);
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
