// backward_fused on tensor cores (fp16, bf16; sm_80+; tile head dims 64, 128 and 256): one
// CTA of 8 warps per KV tile of BN keys, grid (ceil(Nk / BN) x kSplit, Hkv, B), after
// backward_stats (the per-row LSE2 and Delta, BackwardArgs::stats; the fp32 dQ sums zeroed).
// At a tile head dim of 256 (kSplit 2, fused_column_split) two CTAs share a key tile: both
// compute S and dP at the full depth, and each accumulates its half of the columns of dK,
// dV and dQ (with its own turn counters); Q and dO then have one stage, not two.
//
//   K, V of the tile stay in shared memory; Q, dO and the statistics of every query tile
//   of every query head of the group (QueryCursor: masked tiles skipped) stream through
//   two cp.async stages. Each step (one query tile of BM rows), with the warps in a
//   different grid for each product so that every warp reads operands for 32 x 32 (or
//   more) outputs from shared memory (FlashAttention-2's layout):
//     S = Q K^T, dP = dO V^T       2 x 4 warps (queries x keys), gemm_nt
//     P, dS                        BackwardScores::queries_are_rows, then to shared memory
//     dV += P^T dO, dK += dS^T Q   4 x 2 warps (keys x columns), load_a_trans + gemm_rn
//     dQ_partial = dS K            2 x 4 warps (queries x columns), gemm_nn
//   dQ_partial is added to the fp32 sums (BackwardArgs::dq_accum) with reductions: in any
//   order (the fast backward), or (BackwardArgs::dq_turns) one CTA at a time per query
//   tile, in a fixed order (common/query_schedule.cuh): the same bits every run. In the
//   descending order of turns the CTAs are numbered in descending key-tile order, so that a
//   CTA never waits on one dispatched after it; the rotated order (every CTA of a kv head
//   resident) numbers them ascending, the heaviest causal tiles first. dK (scaled once) and dV are stored at
//   the end: one thread's fixed-order sums.
//
// Reciprocal band (kRecip, sm80/reciprocal_band.cuh; head dims up to 128): on steps that meet
// the band, S += alpha [band] K_rows(m0) Q_rows(n0)^T (K at the step's query rows, copied with
// its Q/dO stage; Q at the CTA's key rows, copied once per head), and once dV's product has
// read P, P's tile takes [band] dS for the band's two products:
//   U = ([band] dS) Q_rows(n0)          added to BackwardArgs::band_dk under the dQ turn
//   alpha ([band] dS)^T K_rows(m0)      added to band_dq at the CTA's own key rows
// dK's sums go to band_dk_sums; backward_dq_convert adds alpha_h U and forms d alpha.
//
// Shared memory (smem_bytes in common/kernel_config.h): scratch | K [BN x DQK] |
// V [BN x DV] | kStages x (Q [BM x DQK] | dO [BM x DV]) | kStages x (LSE2 [BM] | Delta [BM])
// (f32) | P [BM x BN] | dS [BM x BN] | kRecip: kStages x K_rows [BM x DQK] | Q_rows [BN x DQK].
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/backward_scores.cuh"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/query_schedule.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/copy.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm80/reciprocal_band.cuh"
#include "attnjit/sm80/score_conv_backward.cuh"

namespace attnjit {
namespace sm80 {

// The byte offset and lane chunk pattern of a B operand read from column chunk `first` of
// a swizzled tile on. `first` is a multiple of the (power of two) number of chunks the warp
// reads, so the offset's low bits and the warp's own chunk bits never overlap and the XOR
// swizzle of their sum is that of the offset folded into the lane's row phase.
struct ColumnWindow {
    unsigned bytes;
    LaneChunks lc;
    __device__ __forceinline__ ColumnWindow(int first, int hi, int r7)
        : bytes((first >> 3) * 128), lc(hi, r7 ^ (first & 7)) {}
};

// kConv: the score convolution (sm80/score_conv_backward.cuh): K, V, Q, dO and the
// statistics carry halo rows, and each step's P and dS come from the extended products.
template <class E, int kDqkReal, int kDvReal, int BM, int BN, int W, int kStages = 2, bool kConv = false,
          bool kRecip = false>
struct BackwardFused {
    // Tiles at the tile head dims; columns past the real ones zero-filled on load, not stored.
    static constexpr int DQK = fused_tile_head_dims(kDqkReal, kDvReal, true);
    static constexpr int DV = fused_tile_head_dims(kDqkReal, kDvReal, false);
    static constexpr int kThreads = W * 32;
    static_assert(W == 8, "backward_fused: 8 warps");
    static_assert((DQK == 64 || DQK == 128 || DQK == 256) && (DV == 64 || DV == 128 || DV == 256),
                  "backward_fused: tile head dims 64, 128 or 256");
    static_assert((BM == 32 || BM == 64 || (BM == 128 && DQK == 64 && DV == 64)) && (BN == 64 || BN == 128),
                  "backward_fused: block_m 32 or 64 (128 with head dims 64), block_n 64 or 128");
    // The CTAs of a key tile, and the columns of dK / dQ (OQK) and dV (OV) each accumulates.
    static constexpr int kSplit = fused_column_split(kDqkReal, kDvReal);
    static constexpr int OQK = DQK / kSplit, OV = DV / kSplit;
    static_assert(kStages == 2 || (kStages == 1 && kSplit == 2), "backward_fused: 2 stages (1 at head dims over 128)");

    // S, dP: 2 x 4 warps over (queries, keys). dK, dV: 4 x 2 over (keys, columns). dQ: 2 x 4
    // over (queries, columns).
    static constexpr int kMFS = BM / 32, kNTS = BN / 32;
    static constexpr int kMFK = BN / 64, kNTK = OQK / 16, kNTV = OV / 16;
    static constexpr int kMFQ = BM / 32, kNTQ = OQK / 32;
    static constexpr int kCprQ = DQK / 8, kCprV = DV / 8, kCprP = BN / 8;

    // Rows of each operand tile, and where the core tile's rows start in it (score_conv:
    // the halos of ScoreConvBackward).
    using ConvLayout = ScoreConvBackward<E, BM, BN, W, 1, 1, DQK, DV>;
    static constexpr int kKRows = kConv ? ConvLayout::kKRows : BN, kKCore = kConv ? ConvLayout::kKCore : 0;
    static constexpr int kVRows = kConv ? ConvLayout::kVRows : BN;
    static constexpr int kQRows = kConv ? ConvLayout::kQRows : BM, kQCore = kConv ? ConvLayout::kQCore : 0;
    static constexpr int kDoRows = kConv ? ConvLayout::kDoRows : BM;  // also the statistics' rows

    static constexpr int kKOff = scratch_bytes(W);
    static constexpr int kVOff = kKOff + kKRows * DQK * 2;
    static constexpr int kQOff = kVOff + kVRows * DV * 2;
    static constexpr int kDoInStage = kQRows * DQK * 2;
    static constexpr int kQStage = kQRows * DQK * 2 + kDoRows * DV * 2;
    static constexpr int kStatOff = kQOff + kStages * kQStage;
    static constexpr int kStatStage = 2 * kDoRows * 4;  // LSE2 [kDoRows] | Delta [kDoRows]
    static constexpr int kPOff = kStatOff + kStages * kStatStage;
    static constexpr int kDsOff = kPOff + BM * BN * 2;
    static constexpr int kConvOff = kDsOff + BM * BN * 2;  // score_conv: S0 | dC | fragments
    static_assert(!kRecip || (kSplit == 1 && kStages == 2 && !kConv),
                  "backward_fused: the reciprocal band at head dims up to 128, two stages, no convolution");
    static constexpr int kBandOff = kConvOff;  // kRecip: kStages x K_rows [BM x DQK] | Q_rows [BN x DQK]
    static constexpr int kKrStage = BM * DQK * 2;
    static constexpr int kQrOff = kBandOff + kStages * kKrStage;
    static constexpr int kSmemBytes =
        kConvOff + (kConv ? ConvLayout::kBytes : 0) + (kRecip ? (kStages * BM + BN) * DQK * 2 : 0);
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::backward_fused, MainloopKind::sm80,
                                                        ElemKindOf<E>::value, kDqkReal, kDvReal, TileConfig{BM, BN, W, kStages},
                                                        kConv, false, kRecip}),
                  "sm80::BackwardFused shared-memory layout disagrees with smem_bytes in common/kernel_config.h");

    static constexpr const char* kName = "sm80 backward";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;
    static constexpr bool kSupportsRecipBand = kRecip;

    using SLayout = MmaCLayout<kMFS, kNTS, 4>;  // S, P, dP, dS
    // Split: the real columns of a half are known at run time (store_row's limit).
    using KLayout = MmaCLayout<kMFK, kNTK, 2, kSplit == 1 ? kDqkReal : OQK>;  // dK (stores the real columns)
    using VLayout = MmaCLayout<kMFK, kNTV, 2, kSplit == 1 ? kDvReal : OV>;    // dV
    using QLayout = MmaCLayout<kMFQ, kNTQ, 4, kSplit == 1 ? kDqkReal : OQK>;  // dQ_partial
    static constexpr int kRows = SLayout::kRows;

    // A C fragment of S's layout, packed, into a swizzled [BM x BN] tile.
    __device__ __forceinline__ static void store_tile(const float (&f)[kMFS][kNTS][4], unsigned tile, int warp,
                                                      int lane) {
#pragma unroll
        for (int mf = 0; mf < kMFS; ++mf)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int row = (warp >> 2) * 16 * kMFS + 16 * mf + (lane >> 2) + 8 * hi;
                const unsigned row_s = tile + row * kCprP * 16 + 4 * (lane & 3);
#pragma unroll
                for (int nt = 0; nt < kNTS; ++nt)
                    ptx::st_shared_b32(row_s + swz_chunk<kCprP>((warp & 3) * kNTS + nt, row & 7) * 16,
                                       FromFloat<E>::pack2(f[mf][nt][2 * hi], f[mf][nt][2 * hi + 1]));
            }
    }

    // dQ_partial rows < Nq added to the fp32 sums of head h: [Nq x kDqkReal], the real
    // columns only (backward_dq_convert reads them at the real head dim); col0: the first
    // column of the CTA's half. sums: dq_accum, or (kRecip) band_dk for U.
    __device__ __forceinline__ static void add_dq(const BackwardArgs& a, const float (&dq)[kMFQ][kNTQ][4], int b,
                                                  int h, int m0, int col0, float* sums) {
        const QLayout ql;
        float* base = sums + ((long long)b * a.q_heads + h) * a.q_len * kDqkReal + col0 + ql.lane_col();
#pragma unroll
        for (int r = 0; r < QLayout::kRows; ++r) {
            const int q = m0 + ql.row(r);
            if (q < a.q_len)
#pragma unroll
                for (int nt = 0; nt < kNTQ; ++nt)
                    if (QLayout::stored(nt) && col0 + ql.col(nt, 0) < kDqkReal)
                        ptx::red_add_f32x2(base + (long long)q * kDqkReal + 8 * nt, dq[r >> 1][nt][2 * (r & 1)],
                                           dq[r >> 1][nt][2 * (r & 1) + 1]);
        }
    }

    // P's tile = [band] dS (kRecip), 16-byte chunks at a time, from dS's tile (both swizzled alike).
    template <class Band>
    __device__ __forceinline__ static void store_band_ds(unsigned char* smem, int m0, int n0) {
        for (int i = threadIdx.x; i < BM * kCprP; i += kThreads) {
            const int row = i / kCprP, chunk = i % kCprP;
            const int off = row * kCprP * 16 + swz_chunk<kCprP>(chunk, row & 7) * 16;
            const unsigned* src = reinterpret_cast<const unsigned*>(smem + kDsOff + off);
            unsigned w[4] = {src[0], src[1], src[2], src[3]};
#pragma unroll
            for (int e = 0; e < 8; ++e)  // element e: the low (even) or high half of word e / 2
                if (!Band::in_band(m0 + row, n0 + 8 * chunk + e)) w[e >> 1] &= (e & 1) ? 0x0000ffffu : 0xffff0000u;
            unsigned* dst = reinterpret_cast<unsigned*>(smem + kPOff + off);
#pragma unroll
            for (int x = 0; x < 4; ++x) dst[x] = w[x];
        }
    }

    // band_dq (head h, this CTA's key rows) += alpha ([band] dS)^T K_rows(m0), half of the
    // warp's columns at a time (kPair0: the half's first 16-column pair).
    template <int kPair0>
    __device__ __forceinline__ static void add_band_dq(const BackwardArgs& a, const unsigned (&pt)[kMFK][BM / 16][4],
                                                       unsigned kr_t, const LaneChunks& lc, float alpha, int b, int h,
                                                       int n0) {
        constexpr int kHalf = kNTK / 2;
        float u[kMFK][kHalf][4];
        MmaCLayout<kMFK, kHalf>::clear(u);
        gemm_rn<E, kMFK, kHalf, BM / 16, kCprQ, kPair0>(u, pt, kr_t, lc);
        const KLayout kl;
        float* base = a.band_dq + ((long long)b * a.q_heads + h) * a.q_len * kDqkReal;
#pragma unroll
        for (int r = 0; r < KLayout::kRows; ++r) {
            const int j = n0 + kl.row(r);
            if (j < a.q_len)
#pragma unroll
                for (int nt = 0; nt < kHalf; ++nt) {
                    const int c = kl.col(nt + 2 * kPair0, 0);
                    if (c < kDqkReal)
                        ptx::red_add_f32x2(base + (long long)j * kDqkReal + c, alpha * u[r >> 1][nt][2 * (r & 1)],
                                           alpha * u[r >> 1][nt][2 * (r & 1) + 1]);
                }
        }
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dkdv(const Params& p, unsigned char* smem) {
        const BackwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        // Split: the CTA's half of the output columns (blockIdx.x % kSplit), with its own
        // turn counters.
        const int half = blockIdx.x % kSplit, x = blockIdx.x / kSplit;
        const int q_tiles = (a.q_len + BM - 1) / BM;
        int* const turns = a.dq_turns ? a.dq_turns + (long long)half * a.batch * a.q_heads * q_tiles
                                      : nullptr;  // null: the fast backward
        const int key_tiles = gridDim.x / kSplit, key_tile = turns && !a.dq_rotate ? key_tiles - 1 - x : x;
        const int cq0 = half * OQK, cv0 = half * OV;  // the half's first columns of dK / dQ and of dV
        const int n0 = key_tile * BN, kvh = blockIdx.y, b = blockIdx.z;
        const int nq = a.q_len, nk = a.kv_len;
        const E* qh = static_cast<const E*>(a.q) + b * a.q_stride[0];
        const E* doh = static_cast<const E*>(a.d_o) + b * a.do_stride[0];
        const long long qsn = a.q_stride[2], dosn = a.do_stride[2];
        const long long plane = (long long)a.batch * a.q_heads * nq;

        const unsigned sbase = ptx::smem_addr(smem);
        const unsigned k_s = sbase + kKOff, v_s = sbase + kVOff, q_s = sbase + kQOff, stat_s = sbase + kStatOff;
        const unsigned p_s = sbase + kPOff, ds_s = sbase + kDsOff;
        static_assert(kRecip == (Variant::kRecipBandWidth >= 0),
                      "a Variant with a reciprocal band needs backward_fused's kRecip layout, and only it");
        using Band = RecipBand<E, kMFS, kNTS, DQK / 16, kCprQ, (kRecip ? Variant::kRecipBandWidth : 0),
                               Variant::kRecipBandCausal, false, 4>;
        const int last_key = (n0 + BN < nk ? n0 + BN : nk) - 1;
        auto band_step = [&](const QueryStep& st) {
            return kRecip && Band::meets(st.m0, st.m0 + BM - 1, n0, last_key);
        };
        const E* const kvh_k = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
        {
            const E* kh = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
            const E* vh = static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];
            const int k_first = n0 - kKCore, v_first = n0 - (kVRows - BN) / 2;  // halo rows: zeros outside [0, nk)
            copy_tile<E, kThreads, kKRows, DQK, kConv, kDqkReal>(k_s, kh + k_first * a.k_stride[2], a.k_stride[2],
                                                                  nk - k_first, static_cast<const E*>(a.k), tid,
                                                                  -k_first);
            copy_tile<E, kThreads, kVRows, DV, kConv, kDvReal>(v_s, vh + v_first * a.v_stride[2], a.v_stride[2],
                                                                nk - v_first, static_cast<const E*>(a.v), tid,
                                                                -v_first);
        }
        ptx::cp_async_commit();

        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        // The fast backward starts CTAs at different query tiles, so that their additions
        // do not all meet on the same rows at once; the ordered one walks them in order.
        QueryCursor<Variant, Params, BM, BN> cursor(a, n0, (n0 + BN < nk ? n0 + BN : nk) - 1, turns ? 0 : key_tile);
        if (turns) cursor.order_by_key_tiles(a, key_tile);
        auto issue = [&](const QueryStep& st, int stage) {
            if (st.h >= 0) {
                if (band_step(st))  // K at the step's query rows
                    copy_tile<E, kThreads, BM, DQK, false, kDqkReal>(sbase + kBandOff + stage * kKrStage,
                                                                     kvh_k + st.m0 * a.k_stride[2], a.k_stride[2],
                                                                     nk - st.m0, kvh_k, tid);
                const unsigned dst = q_s + stage * kQStage;
                const int valid = nq - st.m0, q_first = st.m0 - kQCore;  // halo rows: zeros outside [0, nq)
                copy_tile<E, kThreads, kQRows, DQK, kConv, kDqkReal>(dst, qh + st.h * a.q_stride[1] + q_first * qsn,
                                                                      qsn, nq - q_first, qh, tid, -q_first);
                copy_tile<E, kThreads, kDoRows, DV, false, kDvReal>(dst + kDoInStage,
                                                                    doh + st.h * a.do_stride[1] + st.m0 * dosn, dosn,
                                                                    valid, doh, tid);
                const float* ws = a.stats + ((long long)b * a.q_heads + st.h) * nq + st.m0;
                for (int i = tid; i < 2 * kDoRows; i += kThreads) {
                    const int r = i < kDoRows ? i : i - kDoRows;
                    const bool ok = r < valid;
                    ptx::cp_async_4(stat_s + stage * kStatStage + i * 4,
                                    ok ? ws + (i < kDoRows ? 0 : plane) + r : a.stats, ok);
                }
            }
        };
        QueryStep cur = cursor.advance(p, ctx);
        issue(cur, 0);
        ptx::cp_async_commit();

        const int a_row = LaneRows::a_row(lane), b_row = LaneRows::b_row(lane);
        const int r7 = lane & 7, a_hi = lane >> 4;
        const LaneChunks la = LaneRows::a_chunks(lane), lb = LaneRows::b_chunks(lane);
        // S = Q K^T, dP = dO V^T: A rows of the warp's queries, B rows of its keys.
        const int s_row = (warp >> 2) * 16 * kMFS, s_key = (warp & 3) * 8 * kNTS;
        const unsigned q_nt = q_s + (s_row + a_row) * kCprQ * 16, do_nt = q_s + kDoInStage + (s_row + a_row) * kCprV * 16;
        const unsigned k_nt = k_s + (s_key + b_row) * kCprQ * 16, v_nt = v_s + (s_key + b_row) * kCprV * 16;
        // dV += P^T dO, dK += dS^T Q: the warp's key fragments, its half of the columns.
        const int kv_frag = (warp >> 1) * kMFK;
        const ColumnWindow wv(cv0 / 8 + (warp & 1) * kNTV, a_hi, r7), wk(cq0 / 8 + (warp & 1) * kNTK, a_hi, r7);
        const unsigned do_t = q_s + kDoInStage + a_row * kCprV * 16 + wv.bytes;
        const unsigned q_t = q_s + (kQCore + a_row) * kCprQ * 16 + wk.bytes;
        // dQ_partial = dS K: A rows of the warp's queries, its quarter of the columns of K.
        const ColumnWindow wq(cq0 / 8 + (warp & 3) * kNTQ, a_hi, r7);
        const unsigned ds_nn = ds_s + ((warp >> 2) * 16 * kMFQ + a_row) * kCprP * 16;
        const unsigned k_nn = k_s + (kKCore + a_row) * kCprQ * 16 + wq.bytes;
        const float* stats = reinterpret_cast<const float*>(smem + kStatOff);
        // The band's operands: K at the query rows as S's A operand (like q_nt) and read
        // transposed (like q_t); Q at the key rows as S's B operand (like k_nt) and dQ's (like
        // k_nn); [band] dS in P's tile as dQ's A operand (like ds_nn).
        const unsigned kr_nt = sbase + kBandOff + (s_row + a_row) * kCprQ * 16;
        const unsigned kr_t = sbase + kBandOff + a_row * kCprQ * 16 + wk.bytes;
        const unsigned qr_nt = sbase + kQrOff + (s_key + b_row) * kCprQ * 16;
        const unsigned qr_nn = sbase + kQrOff + a_row * kCprQ * 16 + wq.bytes;
        const unsigned bds_nn = p_s + ((warp >> 2) * 16 * kMFQ + a_row) * kCprP * 16;
        int qr_h = -1;  // the head whose Q rows are staged (kRecip)

        const SLayout sl;
        float dk[kMFK][kNTK][4], dv[kMFK][kNTV][4];
        KLayout::clear(dk);
        VLayout::clear(dv);
        typename Variant::Head hd = Variant::make_head(p, b, kvh * a.group, kvh);
        int hd_h = kvh * a.group;
        float band_alpha = 0.f;  // alpha of head hd_h (kRecip)
        if constexpr (kRecip) band_alpha = Variant::recip_band_alpha(p, hd_h);
        // score_conv: its products (sm80/score_conv_backward.cuh); dtheta's sums when asked for.
        using Conv = ScoreConvBackward<E, BM, BN, W, (kConv ? Variant::kScoreConvRows : 1),
                                       (kConv ? Variant::kScoreConvCols : 1), DQK, DV>;
        static_assert(kConv == (Variant::kScoreConvRows > 0),
                      "a Variant with a score convolution needs backward_fused's kConv layout, and only it");
        unsigned* const s0 = reinterpret_cast<unsigned*>(smem + kConvOff);
        unsigned* const dc = reinterpret_cast<unsigned*>(smem + kConvOff + Conv::kS0Bytes);
        unsigned* const frags = reinterpret_cast<unsigned*>(smem + kConvOff + Conv::kS0Bytes + Conv::kDcBytes);
        const unsigned s0_s = sbase + kConvOff, dc_s = s0_s + Conv::kS0Bytes;
        // Under the spec's mask (Variant::kScoreConvMask): its bits, dtheta's corrections.
        unsigned* const mask_bits = reinterpret_cast<unsigned*>(smem + kConvOff + Conv::kMaskOff);
        float* const theta_corr = reinterpret_cast<float*>(smem + kConvOff + Conv::kCorrOff);
        constexpr bool kConvMask = kConv && Variant::kScoreConvMask;
        const bool want_dtheta = kConv && a.score_conv_partials != nullptr && half == 0;  // one half sums it
        typename Conv::ThetaAcc theta_acc;
        auto flush_dtheta = [&](int h) {  // every thread; P and dS are free
            Conv::flush_dtheta(theta_acc, reinterpret_cast<float*>(smem + kPOff),
                               a.score_conv_partials + (((long long)b * a.q_heads + h) * key_tiles + key_tile) *
                                                           Variant::kScoreConvRows * Variant::kScoreConvCols,
                               kConvMask ? theta_corr : nullptr);
        };
        if constexpr (kConv) {
            Conv::template build_fragments<Variant>(p, hd_h, frags);
            if (kConvMask && tid < kScoreConvMaxTaps) theta_corr[tid] = 0.f;  // published by the loop's first block_sync
            for (int t = 0; t < Conv::kTapRows; ++t)
                for (int n = 0; n < 4; ++n)
                    for (int e = 0; e < 4; ++e) theta_acc[t][n][e] = 0.f;
        }
        const bool edge = n0 + BN > nk;
        int* published = nullptr;  // ordered: the turn counter of the last step, to publish
        int published_value = 0;
        int stage = 0;
        while (cur.h >= 0) {
            ptx::cp_async_wait<0>();
            block_sync();  // this step's Q, dO, stats landed; every warp is done with the other stage, P, dS
            const bool band = band_step(cur);
            if constexpr (kRecip) {
                if (band && cur.h != qr_h) {  // Q of this head at the key rows: once per head
                    copy_tile<E, kThreads, BN, DQK, false, kDqkReal>(sbase + kQrOff, qh + cur.h * a.q_stride[1] + n0 * qsn,
                                                                     qsn, nq - n0, qh, tid);
                    ptx::cp_async_commit();
                    ptx::cp_async_wait<0>();
                    block_sync();
                    qr_h = cur.h;
                }
            }
            const QueryStep next = cursor.advance(p, ctx);
            if constexpr (kStages == 2) {
                issue(next, stage ^ 1);
                ptx::cp_async_commit();
            }
            if (cur.h != hd_h) {
                if constexpr (kConv) {  // the last step's products are done: new fragments
                    if (want_dtheta) flush_dtheta(hd_h);
                    Conv::template build_fragments<Variant>(p, cur.h, frags);
                }
                hd = Variant::make_head(p, b, cur.h, kvh);
                hd_h = cur.h;
                if constexpr (kRecip) band_alpha = Variant::recip_band_alpha(p, hd_h);
            }

            const unsigned so = stage * kQStage;
            bool taps_kept = true;  // score_conv: the spec's mask (if any) keeps this step's S0 region
            if constexpr (kConv) {
                Conv::s0_products(q_s + so, k_s, s0, cur.m0, n0, nq, nk);
                block_sync();  // S0 (and new fragments) complete
                if constexpr (kConvMask) taps_kept = Conv::template mask_s0<Variant>(p, hd, s0, mask_bits, cur.m0, n0, nq, nk);
                const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e, false};
                Conv::template dc_products<Variant>(scores, hd, s0_s, frags, q_s + so + kDoInStage, v_s,
                                                    stats + stage * 2 * kDoRows, dc, p_s, cur.m0, n0, nq, nk, s0,
                                                    mask_bits, taps_kept);
                block_sync();  // dC complete
                float ds[kMFS][kNTS][4];
                SLayout::clear(ds);
                Conv::template transposed_products<Variant>(ds, dc_s, frags, (warp >> 2) * 16 * kMFS,
                                                            (warp & 3) * kNTS, cur.m0, n0, nq, nk, p, hd_h, dc,
                                                            mask_bits, taps_kept);
                store_tile(ds, ds_s, warp, lane);
            } else {
                float s[kMFS][kNTS][4], dp[kMFS][kNTS][4];
                SLayout::clear(s);
                SLayout::clear(dp);
                gemm_nt<E, kMFS, kNTS, DQK / 16, kCprQ, kCprQ>(s, q_nt + so, k_nt, la, lb);
                gemm_nt<E, kMFS, kNTS, DV / 16, kCprV, kCprV>(dp, do_nt + so, v_nt, la, lb);
                if constexpr (kRecip)
                    if (band)  // S += alpha [band] K_rows(m0) Q_rows(n0)^T
                        Band::add(s, sl, kr_nt + stage * kKrStage, qr_nt, la, lb, band_alpha, cur.m0, n0);
                const float* lse2_s = stats + stage * 2 * kDoRows;
                int qc[kRows];
                typename Variant::Row rw[kRows];
                float lse2[kRows], delta[kRows];
#pragma unroll
                for (int r = 0; r < kRows; ++r) {
                    const int row = sl.row(r), q = cur.m0 + row;
                    qc[r] = q < nq ? q : nq - 1;
                    rw[r] = Variant::make_row(p, hd, qc[r]);
                    lse2[r] = q < nq ? lse2_s[row] : -neg_inf();  // padding rows: P = 0
                    delta[r] = lse2_s[kDoRows + row];
                }
                const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e,
                                                             Variant::kHasMask && cur.cls == TileClass::kPartial};
                if (edge)
                    scores.template queries_are_rows<true>(sl, s, dp, qc, rw, lse2, delta, n0, nk);
                else
                    scores.template queries_are_rows<false>(sl, s, dp, qc, rw, lse2, delta, n0, nk);
                store_tile(s, p_s, warp, lane);
                store_tile(dp, ds_s, warp, lane);
            }
            block_sync();  // P, dS complete
            // Ordered: publish the last step's additions now, a product after they were
            // issued, so the release does not wait for them; and look at this step's turn
            // early, so the wait below rarely goes to memory.
            int turn_seen = 0;
            if (turns && tid == 0) {
                if (published) ptx::st_release_gpu(published, published_value);
                if (cur.wait_for > 0)
                    turn_seen = ptx::ld_acquire_gpu(turns + ((long long)b * a.q_heads + cur.h) * q_tiles + cur.m0 / BM);
            }
            published = nullptr;

            {
                unsigned pt[kMFK][BM / 16][4];
                load_a_trans<E, kMFK, BM / 16, kCprP>(pt, p_s, kv_frag, lane);
                gemm_rn<E, kMFK, kNTV, BM / 16, kCprV>(dv, pt, do_t + so, wv.lc);
                load_a_trans<E, kMFK, BM / 16, kCprP>(pt, ds_s, kv_frag, lane);
                gemm_rn<E, kMFK, kNTK, BM / 16, kCprQ>(dk, pt, q_t + so, wk.lc);
            }
            if constexpr (kRecip) {
                if (band) {
                    block_sync();  // every warp is done with P
                    store_band_ds<Band>(smem, cur.m0, n0);
                    block_sync();  // [band] dS complete
                }
            }
            if constexpr (kConv) {
                if (want_dtheta) {
                    Conv::accumulate_dtheta(theta_acc, dc_s, s0_s);
                    if (kConvMask && !taps_kept) Conv::correct_dtheta(theta_corr, dc, s0, mask_bits);
                }
            }
            if constexpr (kStages == 1) {  // every warp is done with Q, dO and the statistics
                block_sync();
                issue(next, 0);
                ptx::cp_async_commit();
            }
            {
                float dq[kMFQ][kNTQ][4];
                QLayout::clear(dq);
                gemm_nn<E, kMFQ, kNTQ, BN / 16, kCprP, kCprQ>(dq, ds_nn, k_nn, la, wq.lc);
                if (turns) {
                    int* const turn = turns + ((long long)b * a.q_heads + cur.h) * q_tiles + cur.m0 / BM;
                    if (tid == 0 && turn_seen < cur.wait_for)
                        while (ptx::ld_acquire_gpu(turn) < cur.wait_for) {
                        }
                    block_sync();  // our turn to add
                    published = turn;  // after the next barrier: every warp's additions are issued
                    published_value = cur.position + 1;
                }
                add_dq(a, dq, b, cur.h, cur.m0, cq0, a.dq_accum);
                if constexpr (kRecip) {
                    if (band) {  // U = ([band] dS) Q_rows(n0), in the same turn
                        QLayout::clear(dq);
                        gemm_nn<E, kMFQ, kNTQ, BN / 16, kCprP, kCprQ>(dq, bds_nn, qr_nn, la, wq.lc);
                        add_dq(a, dq, b, cur.h, cur.m0, cq0, a.band_dk);
                    }
                }
            }
            if constexpr (kRecip) {
                const int key0 = n0 + kv_frag * 16;  // the warp's key rows: those that meet the band
                if (band && Band::meets(cur.m0, cur.m0 + BM - 1, key0, key0 + 16 * kMFK - 1)) {
                    // band_dq at the key rows += alpha ([band] dS)^T K_rows(m0)
                    unsigned pt[kMFK][BM / 16][4];
                    load_a_trans<E, kMFK, BM / 16, kCprP>(pt, p_s, kv_frag, lane);
                    add_band_dq<0>(a, pt, kr_t + stage * kKrStage, wk.lc, band_alpha, b, cur.h, n0);
                    add_band_dq<kNTK / 4>(a, pt, kr_t + stage * kKrStage, wk.lc, band_alpha, b, cur.h, n0);
                }
            }
            cur = next;
            if constexpr (kStages == 2) stage ^= 1;
        }
        ptx::cp_async_wait<0>();
        if (published) {
            block_sync();
            if (tid == 0) ptx::st_release_gpu(published, published_value);
        }
        if constexpr (kConv) {
            if (want_dtheta) {
                block_sync();  // every warp is done with P and dS
                flush_dtheta(hd_h);
            }
        }

        const KLayout kl;
        const VLayout vl;
        E* dkg = static_cast<E*>(a.dk) + b * a.dk_stride[0] + kvh * a.dk_stride[1] + cq0;
        E* dvg = static_cast<E*>(a.dv) + b * a.dv_stride[0] + kvh * a.dv_stride[1] + cv0;
        const float scale = a.scale;
        // The half's real columns (a half may hold none of dV's, e.g. at d 256 x 40).
        const int k_cols = kDqkReal - cq0, v_cols = kDvReal - cv0;
        // kRecip: dK's sums, unscaled, for backward_dq_convert to add the band's part to.
        float* const dk_sums =
            kRecip ? a.band_dk_sums + ((long long)b * a.kv_heads + kvh) * nk * kDqkReal + kl.lane_col() : nullptr;
#pragma unroll
        for (int r = 0; r < KLayout::kRows; ++r) {
            const int k = n0 + kl.row(r);
            if (k < nk) {
                if constexpr (kRecip) {
#pragma unroll
                    for (int nt = 0; nt < kNTK; ++nt)
                        if (kl.col(nt, 0) < kDqkReal) {
                            float* d = dk_sums + (long long)k * kDqkReal + 8 * nt;
                            d[0] = dk[r >> 1][nt][2 * (r & 1)];
                            d[1] = dk[r >> 1][nt][2 * (r & 1) + 1];
                        }
                } else {
                    kl.store_row(dkg + k * a.dk_stride[2] + kl.lane_col(), dk, r,
                                 [scale](float x, int) { return x * scale; }, k_cols);
                }
                vl.store_row(dvg + k * a.dv_stride[2] + vl.lane_col(), dv, r, [](float x, int) { return x; }, v_cols);
            }
        }
    }
};

}  // namespace sm80
}  // namespace attnjit
