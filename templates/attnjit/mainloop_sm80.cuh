// FlashAttention-2-style forward main loop for 16-bit inputs (fp16, bf16) on sm_80+:
//   Q tile in shared memory (read through ldmatrix each KV step), K/V streamed through a
//   cp.async pipeline, S = Q K^T and O += P V with mma.sync m16n8k16 (fp32 accumulators),
//   online softmax in registers with exp2, P handed to the P V product in registers.
//
// Warp w owns query rows [w * 16 * kMF, (w + 1) * 16 * kMF) of the CTA tile.
// Shared memory (see smem_bytes in common/kernel_config.h):
//   scratch | Q [BM x DQK] | K [S][BN x DQK] | V [S][BN x DV]
// Every tile row is a run of 16-byte chunks, XOR-swizzled (swz_chunk) so that the 8 rows
// an ldmatrix phase reads, and the chunks a cp.async phase writes, fall in 8 different
// 16-byte bank groups.
//
// Pipeline (S = kStages):
//   S == 1: one K and one V buffer. V_j is fetched during S_j = Q K_j^T, K_{j+1} during
//           softmax and P V_j.
//   S >= 2: a ring of S (K, V) buffers; at the top of step j the pair for the
//           (S-1)-th next non-skipped tile is issued, so up to S-1 tiles are in flight.
#pragma once

#include "attnjit/cta_operands.cuh"
#include "attnjit/forward/args.h"
#include "attnjit/intervals.cuh"
#include "attnjit/kv_schedule.cuh"
#include "attnjit/ptx.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/types.cuh"

namespace attnjit {

// Physical chunk (16 bytes) of logical chunk c in a row whose (row & 7) is r7, for a row
// of CPR chunks. CPR is a multiple of 4: chunks in whole groups of 8 are XORed with
// (row & 7); a trailing group of 4 (D = 32, 96) with (row >> 1) & 3.
template <int CPR>
__device__ __forceinline__ int swz_chunk(int c, int r7) {
    constexpr int kFull = (CPR / 8) * 8;
    if constexpr (CPR % 8 == 0) {
        return c ^ r7;
    } else {
        return c < kFull ? (c ^ r7) : kFull + ((c & 3) ^ (r7 >> 1));
    }
}

// CTA order (the host grid is always (ceil(Nq / BM), Hq, B); the kernel remaps it):
//   kOrderPerHead: blockIdx.x reversed (heaviest causal tiles of a head first), heads in
//     launch order: the CTAs of one head run together and share K/V in L2.
//   kOrderChunked16/4/1: (head, batch) pairs are taken in chunks whose K and V fit in
//     16, 4 or 1 MiB of L2; inside a chunk the heaviest query tiles go first (for every
//     head of the chunk), so light tiles fill the tail of the grid. Pays off when tiles
//     are skipped (causal, document masks): measured on H100, see the harness.
//   kOrderAuto (default): chunked (16 MiB) when Variant::kCanClassify, else per head.
enum : int { kOrderAuto = -1, kOrderPerHead = 0, kOrderChunked16 = 1, kOrderChunked4 = 2, kOrderChunked1 = 3 };

__device__ __forceinline__ void cta_coords(int order, int nk, int kv_row_bytes, int& m_block, int& h, int& b) {
    const int gx = gridDim.x, gy = gridDim.y, gz = gridDim.z;
    if (order == kOrderPerHead) {
        m_block = gx - 1 - blockIdx.x;
        h = blockIdx.y;
        b = blockIdx.z;
        return;
    }
    const int hb_total = gy * gz;
    const long long per_head = (long long)nk * kv_row_bytes;
    const long long budget = order == kOrderChunked16 ? (16LL << 20) : order == kOrderChunked4 ? (4LL << 20) : (1LL << 20);
    const long long g = budget / (per_head > 0 ? per_head : 1);
    const int group = g < 1 ? 1 : (g > hb_total ? hb_total : (int)g);
    const int lin = blockIdx.x + gx * (blockIdx.y + gy * blockIdx.z);
    const int chunk = lin / (group * gx);
    const int first = chunk * group;
    const int gc = hb_total - first < group ? hb_total - first : group;
    const int r = lin - first * gx;
    m_block = gx - 1 - r / gc;
    const int hb = first + r % gc;
    h = hb % gy;
    b = hb / gy;
}

template <class E, int DQK, int DV, int BM, int BN, int W, int S, int kOrder = kOrderAuto>
struct MainloopSm80 {
    static constexpr int kThreads = W * 32;
    static constexpr int kMF = BM / (16 * W);  // 16-row fragments per warp
    static constexpr int kNT = BN / 8;         // n8 tiles of S per fragment
    static constexpr int kDT = DV / 8;         // n8 tiles of O per fragment
    static constexpr int kKQ = DQK / 16;       // k16 steps of Q K^T
    static constexpr int kKV = BN / 16;        // k16 steps of P V
    static constexpr int kCprQ = DQK / 8;
    static constexpr int kCprV = DV / 8;

    static constexpr int kQOff = scratch_bytes(W);
    static constexpr int kKOff = kQOff + BM * DQK * 2;
    static constexpr int kKStage = BN * DQK * 2;
    static constexpr int kVOff = kKOff + S * kKStage;
    static constexpr int kVStage = BN * DV * 2;
    static constexpr int kSmemBytes = kVOff + S * kVStage;
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::forward, MainloopKind::sm80, ElemKindOf<E>::value,
                                                        DQK, DV, TileConfig{BM, BN, W, S}}),
                  "MainloopSm80 shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(kMF >= 1 && BM % (16 * W) == 0, "block_m must be a multiple of 16 rows per warp");
    static_assert(BN % 16 == 0, "block_n must be a multiple of 16");
    static_assert(DQK % 32 == 0 && DV % 32 == 0, "head dims must be multiples of 32");
    static_assert(S >= 1 && S <= 3, "stages must be 1, 2 or 3");

    // Copy rows [0, ROWS) x [0, D) of a row-major global tile (row stride `stride`
    // elements) into a swizzled shared tile; rows >= valid are zero-filled and not read.
    template <int ROWS, int D>
    __device__ __forceinline__ static void load_tile(unsigned dst, const E* g, long long stride, int valid,
                                                     const E* safe, int tid) {
        constexpr int CPR = D / 8;
        constexpr int kChunks = ROWS * CPR;
        constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
        if constexpr (kThreads % CPR == 0 && (kThreads / CPR) % 8 == 0) {
            // Each thread keeps one chunk column and one row phase (row & 7): the shared
            // offset of its k-th chunk is a constant step; the global one a pointer bump.
            constexpr int kRowStep = kThreads / CPR;
            const int row0 = tid / CPR, c = tid % CPR;
            const unsigned d0 = dst + (row0 * CPR + swz_chunk<CPR>(c, row0 & 7)) * 16;
            const E* src = g + row0 * stride + c * 8;
            const long long step = kRowStep * stride;
#pragma unroll
            for (int it = 0; it < kIters; ++it) {
                const int row = row0 + it * kRowStep;
                if (kChunks % kThreads == 0 || row < ROWS) {
                    const bool ok = row < valid;
                    ptx::cp_async_16(d0 + it * kRowStep * CPR * 16, ok ? src : safe, ok);
                }
                src += step;
            }
        } else {
#pragma unroll
            for (int it = 0; it < kIters; ++it) {
                const int ch = it * kThreads + tid;
                if (kChunks % kThreads == 0 || ch < kChunks) {
                    const int row = ch / CPR, c = ch % CPR;
                    const bool ok = row < valid;
                    const E* src = ok ? g + row * stride + c * 8 : safe;
                    ptx::cp_async_16(dst + (row * CPR + swz_chunk<CPR>(c, row & 7)) * 16, src, ok);
                }
            }
        }
    }

    // Per-lane physical chunk offsets (in bytes) of logical chunks 2i + hi of a row with
    // (row & 7) == r7: the four XOR patterns of whole 8-chunk groups, and the two of a
    // trailing 4-chunk group. chunk_bytes<CPR>(i, ...) then needs no run-time arithmetic.
    struct LaneChunks {
        int xa[4];
        int xb[2];
        __device__ __forceinline__ LaneChunks(int hi, int r7) {
#pragma unroll
            for (int j = 0; j < 4; ++j) xa[j] = ((2 * j + hi) ^ r7) * 16;
#pragma unroll
            for (int j = 0; j < 2; ++j) xb[j] = ((2 * j + hi) ^ (r7 >> 1)) * 16;
        }
    };
    template <int CPR, int I>
    __device__ __forceinline__ static int chunk_bytes(const LaneChunks& lc) {
        constexpr int kFull = (CPR / 8) * 8;
        if constexpr (2 * I < kFull)
            return (I / 4) * 128 + lc.xa[I % 4];
        else
            return kFull * 16 + lc.xb[I - kFull / 2];
    }

    template <int KK = 0>
    __device__ __forceinline__ static void gemm_qk_step(float (&s)[kMF][kNT][4], unsigned q_base, unsigned k_base,
                                                        const LaneChunks& lq, const LaneChunks& lk) {
        if constexpr (KK < kKQ) {
            unsigned a[kMF][4];
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
                ptx::ldmatrix_x4(q_base + mf * 16 * kCprQ * 16 + chunk_bytes<kCprQ, KK>(lq), a[mf][0], a[mf][1],
                                 a[mf][2], a[mf][3]);
#pragma unroll
            for (int np = 0; np < kNT / 2; ++np) {
                unsigned b0, b1, b2, b3;
                ptx::ldmatrix_x4(k_base + np * 16 * kCprQ * 16 + chunk_bytes<kCprQ, KK>(lk), b0, b1, b2, b3);
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf) {
                    ptx::Mma16816<E>::run(s[mf][2 * np], a[mf], b0, b1);
                    ptx::Mma16816<E>::run(s[mf][2 * np + 1], a[mf], b2, b3);
                }
            }
            gemm_qk_step<KK + 1>(s, q_base, k_base, lq, lk);
        }
    }

    // S += Q K^T for this warp's rows. q_base / k_base: per-lane ldmatrix row addresses.
    __device__ __forceinline__ static void gemm_qk(float (&s)[kMF][kNT][4], unsigned q_base, unsigned k_base,
                                                   const LaneChunks& lq, const LaneChunks& lk) {
        gemm_qk_step<0>(s, q_base, k_base, lq, lk);
    }

    template <int DP = 0>
    __device__ __forceinline__ static void gemm_pv_step(float (&o)[kMF][kDT][4], const unsigned (&pa)[kMF][kKV][4],
                                                        unsigned v_base, const LaneChunks& lv) {
        if constexpr (DP < kDT / 2) {
#pragma unroll
            for (int kc = 0; kc < kKV; ++kc) {
                unsigned b0, b1, b2, b3;
                ptx::ldmatrix_x4_trans(v_base + kc * 16 * kCprV * 16 + chunk_bytes<kCprV, DP>(lv), b0, b1, b2, b3);
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf) {
                    ptx::Mma16816<E>::run(o[mf][2 * DP], pa[mf][kc], b0, b1);
                    ptx::Mma16816<E>::run(o[mf][2 * DP + 1], pa[mf][kc], b2, b3);
                }
            }
            gemm_pv_step<DP + 1>(o, pa, v_base, lv);
        }
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run(const Params& p, unsigned char* smem) {
        const ForwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int g = lane >> 2, t4 = lane & 3;
        const int nq = a.q_len, nk = a.kv_len;
        int m_block, h, b;
        constexpr int kOrd =
            kOrder != kOrderAuto ? kOrder : (Variant::kCanClassify ? kOrderChunked16 : kOrderPerHead);
        cta_coords(kOrd, nk, (DQK + DV) * 2, m_block, h, b);
        const int kvh = h / a.group;
        const int m0 = m_block * BM;

        const CtaOperands<E> ops(a, b, h, kvh, m0);
        const E *qg = ops.q, *kg = ops.k, *vg = ops.v;
        const long long ksn = a.k_stride[2], vsn = a.v_stride[2];

        const unsigned sbase = ptx::smem_addr(smem);
        const unsigned q_s = sbase + kQOff, k_s = sbase + kKOff, v_s = sbase + kVOff;
        // ldmatrix row addresses of this lane (see gemm_qk / gemm_pv); all these rows have
        // (row & 7) == (lane & 7).
        const LaneChunks lq(lane >> 4, lane & 7), lk((lane >> 3) & 1, lane & 7), lv(lane >> 4, lane & 7);
        const unsigned q_ld = q_s + (warp * 16 * kMF + (lane & 7) + ((lane >> 3) & 1) * 8) * kCprQ * 16;
        const unsigned k_ld = k_s + ((lane & 7) + (lane >> 4) * 8) * kCprQ * 16;
        const unsigned v_ld = v_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kCprV * 16;

        // Q first: its group is the oldest, so the first wait for K covers it.
        load_tile<BM, DQK>(q_s, qg, a.q_stride[2], nq - m0, static_cast<const E*>(a.q), tid);
        ptx::cp_async_commit();

        const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        KvCursor<Variant, Params, BN> cursor(nk, m0, (m0 + BM < nq ? m0 + BM : nq) - 1);

        // Rows this thread holds: q = m0 + warp*16*kMF + 16*mf + g + 8*hr; clamped for hooks.
        int qc[kMF][2];
        typename Variant::Row rw[kMF][2];
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                const int q = m0 + warp * 16 * kMF + 16 * mf + g + 8 * hr;
                qc[mf][hr] = q < nq ? q : nq - 1;
                rw[mf][hr] = Variant::make_row(p, hd, qc[mf][hr]);
            }

        auto issue_k = [&](int tile, int stage) {
            if (tile >= 0)
                load_tile<BN, DQK>(k_s + stage * kKStage, kg + (long long)tile * BN * ksn, ksn, nk - tile * BN, kg,
                                   tid);
        };
        auto issue_v = [&](int tile, int stage) {
            if (tile >= 0)
                load_tile<BN, DV>(v_s + stage * kVStage, vg + (long long)tile * BN * vsn, vsn, nk - tile * BN, vg,
                                  tid);
        };

        float o[kMF][kDT][4];
        float m_run[kMF][2], l_run[kMF][2];
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf) {
#pragma unroll
            for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
                for (int e = 0; e < 4; ++e) o[mf][dt][e] = 0.f;
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                m_run[mf][hr] = neg_inf();
                l_run[mf][hr] = 0.f;
            }
        }
        const float scl = Variant::kHasScoreMod ? kLog2e : a.scale_log2;

        // Prologue.
        int ring[S];
        TileClass rcls[S];
        if constexpr (S == 1) {
            ring[0] = cursor.advance(p, hd, ctx, rcls[0]);
            issue_k(ring[0], 0);
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
                ptx::cp_async_wait<2 * S - 3>();
                block_sync();
                ring[S - 1] = cursor.advance(p, hd, ctx, rcls[S - 1]);
                const int ps = slot == 0 ? S - 1 : slot - 1;  // (slot + S - 1) % S
                issue_k(ring[S - 1], ps);
                ptx::cp_async_commit();
                issue_v(ring[S - 1], ps);
                ptx::cp_async_commit();
            }

            float s[kMF][kNT][4];
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) s[mf][nt][e] = 0.f;
            gemm_qk(s, q_ld, k_ld + slot * kKStage, lq, lk);

            const int k0 = tile * BN;
            if constexpr (Variant::kHasScoreMod) {
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int k = k0 + 8 * nt + 2 * t4 + (e & 1);
                            const int kc = k < nk ? k : nk - 1;
                            s[mf][nt][e] = Variant::score_mod(p, hd, rw[mf][e >> 1], s[mf][nt][e] * a.scale,
                                                              qc[mf][e >> 1], kc);
                        }
            }
            const bool edge = k0 + BN > nk;
            const bool need_mask = Variant::kHasMask && cls == TileClass::kPartial;
            if (edge || need_mask) {
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
                    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int k = k0 + 8 * nt + 2 * t4 + (e & 1);
                            bool keep = k < nk;
                            if constexpr (Variant::kHasMask) {
                                if (keep && need_mask) keep = Variant::mask(p, hd, rw[mf][e >> 1], qc[mf][e >> 1], k);
                            }
                            if (!keep) s[mf][nt][e] = neg_inf();
                        }
            }

            if constexpr (S == 1) {
                ptx::cp_async_wait<0>();
                block_sync();
                ring[0] = cursor.advance(p, hd, ctx, rcls[0]);
                issue_k(ring[0], 0);
                ptx::cp_async_commit();
            } else {
                ptx::cp_async_wait<2 * S - 2>();
                block_sync();
            }

            // Online softmax; P into mma A fragments.
            unsigned pa[kMF][kKV][4];
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf) {
#pragma unroll
                for (int hr = 0; hr < 2; ++hr) {
                    float mx = m_run[mf][hr];
#pragma unroll
                    for (int nt = 0; nt < kNT; ++nt) mx = fmax_(mx, fmax_(s[mf][nt][2 * hr], s[mf][nt][2 * hr + 1]));
                    mx = fmax_(mx, shfl_xor(mx, 1));
                    mx = fmax_(mx, shfl_xor(mx, 2));
                    const float ms = mx == neg_inf() ? 0.f : mx * scl;
                    const float alpha = fast_exp2(m_run[mf][hr] * scl - ms);
                    m_run[mf][hr] = mx;
                    float rs = 0.f;
#pragma unroll
                    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const float v = fast_exp2(s[mf][nt][2 * hr + e] * scl - ms);
                            s[mf][nt][2 * hr + e] = v;
                            rs += v;
                        }
                    l_run[mf][hr] = l_run[mf][hr] * alpha + rs;
#pragma unroll
                    for (int dt = 0; dt < kDT; ++dt) {
                        o[mf][dt][2 * hr] *= alpha;
                        o[mf][dt][2 * hr + 1] *= alpha;
                    }
                }
#pragma unroll
                for (int kc = 0; kc < kKV; ++kc) {
                    pa[mf][kc][0] = FromFloat<E>::pack2(s[mf][2 * kc][0], s[mf][2 * kc][1]);
                    pa[mf][kc][1] = FromFloat<E>::pack2(s[mf][2 * kc][2], s[mf][2 * kc][3]);
                    pa[mf][kc][2] = FromFloat<E>::pack2(s[mf][2 * kc + 1][0], s[mf][2 * kc + 1][1]);
                    pa[mf][kc][3] = FromFloat<E>::pack2(s[mf][2 * kc + 1][2], s[mf][2 * kc + 1][3]);
                }
            }
            gemm_pv_step<0>(o, pa, v_ld + slot * kVStage, lv);

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

        // Epilogue: O = acc / l in the input dtype; LSE natural log.
        E* og = static_cast<E*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1];
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                float l = l_run[mf][hr];
                l += shfl_xor(l, 1);
                l += shfl_xor(l, 2);
                const float inv = l > 0.f ? 1.f / l : 0.f;
                const int q = m0 + warp * 16 * kMF + 16 * mf + g + 8 * hr;
                if (q < nq) {
                    E* orow = og + q * a.o_stride[2];
#pragma unroll
                    for (int dt = 0; dt < kDT; ++dt)
                        ptx::st_global_b32(orow + 8 * dt + 2 * t4,
                                           FromFloat<E>::pack2(o[mf][dt][2 * hr] * inv, o[mf][dt][2 * hr + 1] * inv));
                    if (a.lse != nullptr && t4 == 0) {
                        const float lse =
                            l > 0.f ? (m_run[mf][hr] * scl + fast_log2(l)) * kLn2 : neg_inf();
                        a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + q * a.lse_stride[2]] = lse;
                    }
                }
            }
    }
};

}  // namespace attnjit
