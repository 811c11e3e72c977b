// Backward main loop with plain fp32 FFMA for every element type (inputs are converted to
// float as they are staged): the correct, deterministic baseline of both backward kinds
// (FlashAttention-2's algorithm). Speed is the business of a tensor-core loop beside it.
//
// One (query tile, KV tile) step, the same in both kinds:
//   stage Q, dO (query rows [m0, m0 + BM)) and K, V (keys [n0, n0 + BN)) as floats;
//   LSE_i from the forward and Delta_i = rowsum(dO_i * O_i), recomputed per query tile;
//   per element: keep = mask (kPartial tiles), s = scale <q, k>, t = score_mod(s),
//     P = exp(t - LSE), dP = <dO_i, v_j>, dS = P (dP - Delta) * d score_mod / d s;
//   backward_dkdv (a CTA per KV tile, visiting every query tile of every query head of its
//     kv head): dV += P^T dO, dK += dS^T Q;
//   backward_dq (a CTA per query tile, visiting its KV tiles): dQ += dS K.
// dK and dQ are scaled once at the end. Each output element is accumulated by one thread
// in a fixed order: the same inputs give the same bits. Per-query (backward_dq) and
// per-key (backward_dkdv, per head) gradients of captured tensors: each thread sums per
// element slot across tiles, then one thread per row (key) sums the slots in tile order.
// The per-key planes are summed by the CTA that finishes last (common/input_grads.cuh).
//
// Shared memory (see smem_bytes in common/kernel_config.h), floats, rows padded by one to
// spread banks: scratch | Q [BM][DQK+1] | dO [BM][DV+1] | K [BN][DQK+1] | V [BN][DV+1] |
// P [BM][BN+1] | dS [BM][BN+1] | LSE [BM] | Delta [BM]
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/bias_tile.cuh"
#include "attnjit/common/input_grads.cuh"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/kv_schedule.cuh"
#include "attnjit/common/row_reduce.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {
namespace simt {

template <class E, int DQK, int DV, int BM, int BN, int W>
struct Backward {
    static constexpr int kThreads = W * 32;
    static constexpr int kQP = DQK + 1, kVP = DV + 1, kSP = BN + 1;  // row pitches, floats

    static constexpr int kQOff = scratch_bytes(W);
    static constexpr int kDoOff = kQOff + BM * kQP * 4;
    static constexpr int kKOff = kDoOff + BM * kVP * 4;
    static constexpr int kVOff = kKOff + BN * kQP * 4;
    static constexpr int kPOff = kVOff + BN * kVP * 4;
    static constexpr int kDsOff = kPOff + BM * kSP * 4;
    static constexpr int kLseOff = kDsOff + BM * kSP * 4;
    static constexpr int kDeltaOff = kLseOff + BM * 4;
    static constexpr int kSmemBytes = kDeltaOff + BM * 4;
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::backward_dkdv, MainloopKind::simt,
                                                        ElemKindOf<E>::value, DQK, DV, TileConfig{BM, BN, W, 1}}),
                  "simt::Backward shared-memory layout disagrees with smem_bytes in common/kernel_config.h");

    // Structural Variant features this loop implements (check_variant in common/variant.cuh).
    static constexpr const char* kName = "simt backward";
    static constexpr bool kSupportsOutputTransform = false;  // its gradient comes with the gated variants
    static constexpr bool kSupportsScoreTileTransform = false;

    // Output elements per thread of the accumulators.
    static constexpr int kDkPer = (BN * DQK + kThreads - 1) / kThreads;
    static constexpr int kDvPer = (BN * DV + kThreads - 1) / kThreads;
    static constexpr int kDqPer = (BM * DQK + kThreads - 1) / kThreads;

    struct Tiles {  // the shared-memory tiles
        float *q, *d_o, *k, *v, *p, *ds, *lse, *delta;
        __device__ __forceinline__ explicit Tiles(unsigned char* smem)
            : q(reinterpret_cast<float*>(smem + kQOff)), d_o(reinterpret_cast<float*>(smem + kDoOff)),
              k(reinterpret_cast<float*>(smem + kKOff)), v(reinterpret_cast<float*>(smem + kVOff)),
              p(reinterpret_cast<float*>(smem + kPOff)), ds(reinterpret_cast<float*>(smem + kDsOff)),
              lse(reinterpret_cast<float*>(smem + kLseOff)), delta(reinterpret_cast<float*>(smem + kDeltaOff)) {}
    };

    // Rows [0, ROWS) x [0, D) of a row-major global tile (row stride `stride` elements) as
    // floats into a tile of pitch P; rows >= valid are zero and not read.
    template <int ROWS, int D, int P>
    __device__ __forceinline__ static void stage(float* dst, const E* g, long long stride, int valid) {
        for (int e = threadIdx.x; e < ROWS * D; e += kThreads) {
            const int r = e / D, c = e % D;
            dst[r * P + c] = r < valid ? to_float(g[r * stride + c]) : 0.f;
        }
    }

    // Q, dO, LSE and Delta = rowsum(dO * O) of query rows [m0, m0 + BM) of head h. Rows
    // >= Nq get LSE = -inf: they keep no key, so their P and dS are zero.
    __device__ __forceinline__ static void stage_queries(const BackwardArgs& a, const Tiles& t, int b, int h,
                                                         int m0) {
        const int valid = a.q_len - m0;
        stage<BM, DQK, kQP>(t.q, static_cast<const E*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1] + m0 * a.q_stride[2],
                            a.q_stride[2], valid);
        stage<BM, DV, kVP>(t.d_o,
                           static_cast<const E*>(a.d_o) + b * a.do_stride[0] + h * a.do_stride[1] + m0 * a.do_stride[2],
                           a.do_stride[2], valid);
        block_sync();
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        const E* o = static_cast<const E*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1];
        // Delta from delta_d_o (d_o itself unless there is an output gate: BackwardArgs).
        const E* dd = static_cast<const E*>(a.delta_d_o) + b * a.delta_do_stride[0] + h * a.delta_do_stride[1];
        for (int r = warp; r < BM; r += W) {
            const int q = m0 + r;
            float acc = 0.f;
            if (q < a.q_len)
                for (int d = lane; d < DV; d += 32)
                    acc += to_float(dd[q * a.delta_do_stride[2] + d]) * to_float(o[q * a.o_stride[2] + d]);
            acc = WarpRowReduce::sum(acc);
            if (lane == 0) {
                t.lse[r] = q < a.q_len ? a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + q * a.lse_stride[2]]
                                       : neg_inf();
                t.delta[r] = acc;
            }
        }
    }

    // K and V of keys [n0, n0 + BN) of kv head kvh.
    __device__ __forceinline__ static void stage_keys(const BackwardArgs& a, const Tiles& t, int b, int kvh, int n0) {
        const int valid = a.kv_len - n0;
        stage<BN, DQK, kQP>(t.k,
                            static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1] + n0 * a.k_stride[2],
                            a.k_stride[2], valid);
        stage<BN, DV, kVP>(t.v, static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1] + n0 * a.v_stride[2],
                           a.v_stride[2], valid);
    }

    // P and dS of the staged tile (query rows from m0, keys from n0, class cls). Elements
    // outside Nq x Nk, masked, or with t = -inf are zero in both.
    // kGrads 1 (backward_dq with Variant::kInputGrads): also the gradients of captured
    // tensors and scalars at every in-range element (common/input_grads.cuh); 2
    // (backward_dkdv with per-key sites): the per-key sites (Variant::input_grads_key).
    // The thread's element slot i (element threadIdx.x + i kThreads of every tile: the
    // same (row, column) of the tile each time) is acc's row slot for per-query and
    // per-key sites.
    template <class Variant, class Params, int kGrads = 0, class Acc = int>
    __device__ __forceinline__ static void tile_gradients(const Params& p, const typename Variant::Head& hd,
                                                          const Tiles& t, int m0, int n0, TileClass cls,
                                                          Acc* acc = nullptr) {
        const BackwardArgs& a = p.args;
        auto grads = [&](const typename Variant::Row& row, float s, int q, int k, float dt) {
            if constexpr (kGrads == 1) Variant::input_grads(p, hd, row, s, q, k, dt, *acc);
            if constexpr (kGrads == 2) Variant::input_grads_key(p, hd, row, s, q, k, dt, *acc);
        };
        int slot = 0;
        for (int e = threadIdx.x; e < BM * BN; e += kThreads, ++slot) {
            if constexpr (kGrads != 0) acc->slot = slot;
            const int r = e / BN, c = e % BN;
            const int q = m0 + r, k = n0 + c;
            const float lse = t.lse[r];
            float pv = 0.f, ds = 0.f;
            if (q < a.q_len && k < a.kv_len && lse != neg_inf()) {
                const typename Variant::Row row = Variant::make_row(p, hd, q);
                bool keep = true;
                if constexpr (Variant::kHasMask) {
                    if (cls == TileClass::kPartial) keep = Variant::mask(p, hd, row, q, k);
                }
                if (keep) {
                    float dot = 0.f;
                    for (int d = 0; d < DQK; ++d) dot += t.q[r * kQP + d] * t.k[c * kQP + d];
                    const float s = a.scale * dot;
                    float sm = s;
                    if constexpr (Variant::kHasScoreMod) sm = score_mod_at<Variant>(p, hd, row, s, q, k);
                    if (sm != neg_inf()) {
                        pv = expf(sm - lse);
                        float dp = 0.f;
                        for (int d = 0; d < DV; ++d) dp += t.d_o[r * kVP + d] * t.v[c * kVP + d];
                        ds = pv * (dp - t.delta[r]);
                        if constexpr (kGrads != 0) grads(row, s, q, k, pv == 0.f ? 0.f : ds);
                        if constexpr (Variant::kHasScoreGrad) ds *= Variant::d_score(p, hd, row, s, q, k);
                    } else if constexpr (kGrads != 0) {
                        grads(row, s, q, k, 0.f);
                    }
                } else if constexpr (kGrads != 0) {
                    grads(row, 0.f, q, k, 0.f);
                }
            } else if constexpr (kGrads != 0) {
                if (q < a.q_len && k < a.kv_len) {
                    const typename Variant::Row row = Variant::make_row(p, hd, q);
                    grads(row, 0.f, q, k, 0.f);
                }
            }
            t.p[r * kSP + c] = pv;
            t.ds[r * kSP + c] = ds;
        }
    }

    // Element slots of a thread in tile_gradients (the row slots of per-query and per-key sums).
    static constexpr int kSlots = (BM * BN + kThreads - 1) / kThreads;

    // Per-query (kKey false) and per-key (kKey true) sites: the row sums (queries of a key
    // column, keys of a query row) from every thread's element slots, staged in the P tile
    // (free: the caller is past the step's products) and summed by one thread per row or
    // column in tile order, a fixed order; stored for row0 + x < n. Clears the sums.
    template <class Variant, bool kKey, class Params, class Acc>
    __device__ __forceinline__ static void store_slot_sums(const Params& p, const typename Variant::Head& hd,
                                                           const Tiles& t, Acc& acc, int row0, int n) {
        constexpr int kSites = kKey ? Variant::kInputGradKeySites : Variant::kInputGradQuerySites;
        for (int s = 0; s < kSites; ++s) {
            block_sync();  // every thread is done with the P tile
#pragma unroll
            for (int i = 0; i < kSlots; ++i) {
                const int e = threadIdx.x + i * kThreads;
                if (e < BM * BN) t.p[(e / BN) * kSP + e % BN] = acc.row[s][i];
            }
            block_sync();
            for (int x = threadIdx.x; x < (kKey ? BN : BM); x += kThreads) {
                if (row0 + x >= n) break;
                float sum = 0.f;
                for (int y = 0; y < (kKey ? BM : BN); ++y) sum += kKey ? t.p[y * kSP + x] : t.p[x * kSP + y];
                if constexpr (kKey)
                    Variant::input_grads_key_store(p, hd, s, row0 + x, sum);
                else
                    Variant::input_grads_query_store(p, hd, s, row0 + x, sum);
            }
        }
        block_sync();  // the P tile is free again
        acc.clear_rows();
    }

    // dK and dV of one KV tile: grid (ceil(Nk / BN), Hkv, B).
    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dkdv(const Params& p, unsigned char* smem) {
        sum_input_grad_planes<Variant, Params, kThreads>(p);  // gradients of captured tensors (common/input_grads.cuh)
        const BackwardArgs& a = p.args;
        const Tiles t(smem);
        const int tid = threadIdx.x;
        const int n0 = blockIdx.x * BN, kvh = blockIdx.y, b = blockIdx.z;
        const int nq = a.q_len, nk = a.kv_len;
        const int n1 = (n0 + BN < nk ? n0 + BN : nk) - 1;
        stage_keys(a, t, b, kvh, n0);
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};

        float dk[kDkPer], dv[kDvPer];
#pragma unroll
        for (int i = 0; i < kDkPer; ++i) dk[i] = 0.f;
#pragma unroll
        for (int i = 0; i < kDvPer; ++i) dv[i] = 0.f;

        // Per-key sites: the thread's element-slot sums for the head being walked.
        InputGradAcc<Variant, (Variant::kInputGradKeySites > 0 ? kSlots : 1)> kacc;
        kacc.clear();
        for (int h = kvh * a.group; h < (kvh + 1) * a.group; ++h) {
            const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
            for (int m0 = 0; m0 < nq; m0 += BM) {
                TileClass cls = Variant::kHasMask ? TileClass::kPartial : TileClass::kFull;
                if constexpr (Variant::kCanClassify) {
                    cls = Variant::classify(p, hd, m0, (m0 + BM < nq ? m0 + BM : nq) - 1, n0, n1, ctx);
                    if (cls == TileClass::kSkip) continue;
                }
                block_sync();  // every thread is done with the previous query tile
                stage_queries(a, t, b, h, m0);
                block_sync();
                if constexpr (Variant::kInputGradKeySites > 0)
                    tile_gradients<Variant, Params, 2>(p, hd, t, m0, n0, cls, &kacc);
                else
                    tile_gradients<Variant>(p, hd, t, m0, n0, cls);
                block_sync();
#pragma unroll
                for (int i = 0; i < kDkPer; ++i) {
                    const int e = tid + i * kThreads;
                    if (BN * DQK % kThreads == 0 || e < BN * DQK) {
                        const int j = e / DQK, d = e % DQK;
                        float acc = dk[i];
                        for (int r = 0; r < BM; ++r) acc += t.ds[r * kSP + j] * t.q[r * kQP + d];
                        dk[i] = acc;
                    }
                }
#pragma unroll
                for (int i = 0; i < kDvPer; ++i) {
                    const int e = tid + i * kThreads;
                    if (BN * DV % kThreads == 0 || e < BN * DV) {
                        const int j = e / DV, d = e % DV;
                        float acc = dv[i];
                        for (int r = 0; r < BM; ++r) acc += t.p[r * kSP + j] * t.d_o[r * kVP + d];
                        dv[i] = acc;
                    }
                }
            }
            // Per-key sites: head h's sum of every key of the tile (zeros where every tile
            // was skipped), one store per (b, h, key).
            if constexpr (Variant::kInputGradKeySites > 0) store_slot_sums<Variant, true>(p, hd, t, kacc, n0, nk);
        }

        E* dkg = static_cast<E*>(a.dk) + b * a.dk_stride[0] + kvh * a.dk_stride[1] + n0 * a.dk_stride[2];
        E* dvg = static_cast<E*>(a.dv) + b * a.dv_stride[0] + kvh * a.dv_stride[1] + n0 * a.dv_stride[2];
#pragma unroll
        for (int i = 0; i < kDkPer; ++i) {
            const int e = tid + i * kThreads, j = e / DQK, d = e % DQK;
            if (e < BN * DQK && n0 + j < nk) dkg[j * a.dk_stride[2] + d] = FromFloat<E>::cvt(a.scale * dk[i]);
        }
#pragma unroll
        for (int i = 0; i < kDvPer; ++i) {
            const int e = tid + i * kThreads, j = e / DV, d = e % DV;
            if (e < BN * DV && n0 + j < nk) dvg[j * a.dv_stride[2] + d] = FromFloat<E>::cvt(dv[i]);
        }
        if constexpr (Variant::kInputGradKeySites > 0) {
            block_sync();  // every thread is past its last use of shared memory
            finish_key_grads<Variant, Params, kThreads>(p, smem);
        }
    }

    // dQ of one query tile: grid (ceil(Nq / BM), Hq, B).
    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dq(const Params& p, unsigned char* smem) {
        const BackwardArgs& a = p.args;
        const Tiles t(smem);
        const int tid = threadIdx.x;
        const int m0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z, kvh = h / a.group;
        const int nq = a.q_len;
        stage_queries(a, t, b, h, m0);
        const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
        if constexpr (Variant::kInputGrads) zero_fill_input_grads<Variant, Params, kThreads>(p, hd, m0, BM, nq, a.kv_len);
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        KvCursor<Variant, Params, BN> cursor(a.kv_len, m0, (m0 + BM < nq ? m0 + BM : nq) - 1);

        float dq[kDqPer];
#pragma unroll
        for (int i = 0; i < kDqPer; ++i) dq[i] = 0.f;
        InputGradAcc<Variant, (Variant::kInputGradQuerySites > 0 ? kSlots : 1)> gacc;
        gacc.clear();
        if constexpr (Variant::kInputGrads) begin_input_grads<Variant, Params, kThreads>(p, gacc);

        TileClass cls;
        for (int tile = cursor.advance(p, hd, ctx, cls); tile >= 0; tile = cursor.advance(p, hd, ctx, cls)) {
            const int n0 = tile * BN;
            block_sync();  // every thread is done with the previous K, V, P, dS
            stage_keys(a, t, b, kvh, n0);
            block_sync();
            if constexpr (Variant::kInputGrads)
                tile_gradients<Variant, Params, 1>(p, hd, t, m0, n0, cls, &gacc);
            else
                tile_gradients<Variant>(p, hd, t, m0, n0, cls);
            block_sync();
#pragma unroll
            for (int i = 0; i < kDqPer; ++i) {
                const int e = tid + i * kThreads;
                if (BM * DQK % kThreads == 0 || e < BM * DQK) {
                    const int r = e / DQK, d = e % DQK;
                    float acc = dq[i];
                    for (int c = 0; c < BN; ++c) acc += t.ds[r * kSP + c] * t.k[c * kQP + d];
                    dq[i] = acc;
                }
            }
        }

        E* dqg = static_cast<E*>(a.dq) + b * a.dq_stride[0] + h * a.dq_stride[1] + m0 * a.dq_stride[2];
#pragma unroll
        for (int i = 0; i < kDqPer; ++i) {
            const int e = tid + i * kThreads, r = e / DQK, d = e % DQK;
            if (e < BM * DQK && m0 + r < nq) dqg[r * a.dq_stride[2] + d] = FromFloat<E>::cvt(a.scale * dq[i]);
        }
        // Per-query sites: each row's sum over its keys.
        if constexpr (Variant::kInputGradQuerySites > 0) store_slot_sums<Variant, false>(p, hd, t, gacc, m0, nq);
        if constexpr (Variant::kInputGrads) finish_input_grads<Variant, Params, kThreads, kSmemBytes>(p, hd, gacc, smem);
    }
};

}  // namespace simt
}  // namespace attnjit
