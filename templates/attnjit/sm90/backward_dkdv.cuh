// backward_dkdv on Hopper (sm_90a; fp16 / bf16): sm80/backward_dkdv.cuh's products on wgmma,
// with the operands brought by the bulk tensor copies. One CTA per KV tile of BN = 128 keys,
// grid (ceil(Nk / 128), Hkv, B); it runs after backward_dq, whose per-row statistics (LSE2,
// Delta: BackwardArgs::stats) it reads.
//
//   warpgroup 0, the producer: warp 0 walks the query tiles of every query head of the group
//     (QueryCursor: masked tiles skipped, classified over one warp with named barrier 1); lane
//     0 copies K and V once and, per step, Q and dO into a ring of kStages stages completing
//     on mbarriers; the warp's lanes copy the step's LSE2 and Delta beside them. The step's
//     {head, first row, class} travels in a small ring beside the barriers.
//   warpgroups 1 and 2, the consumers: 64 keys each. Per step, on wgmma:
//     S^T = K Q^T, dP^T = V dO^T                (both operands in shared memory)
//     P^T, dS^T                                 (BackwardScores::keys_are_rows: the hooks)
//     dV += P^T dO, dK += dS^T Q                 (P^T, dS^T from registers; dO, Q read N-contiguous)
//   then the stage goes back. dK (scaled once) and dV are stored from registers: each element
//   is one thread's fixed-order sum over (head, query tile), deterministic.
//
// Not yet here: overlap between the steps' products and the element pass, the reciprocal band,
// per-key gradients of captured tensors (those specs take the sm80 kernel).
//
// Shared memory (smem_bytes in common/kernel_config.h), from the first 1024-byte boundary:
//   header [1024]: mbarriers (K and V full; per stage full, empty), the step ring, the
//                  producer warp's classify scratch
//   K [BN x DQK] | V [BN x DV] | S x (Q [BM x DQK] | dO [BM x DV]) | S x (LSE2 [BM] | Delta [BM])
// with the tiles 128-byte swizzled in 64-column blocks (sm90/wgmma.cuh), plus 1 KiB of slack.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/backward/tma_maps.h"
#include "attnjit/common/backward_scores.cuh"
#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/key_grads_store.cuh"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/query_schedule.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm90/barrier.cuh"
#include "attnjit/sm90/tma.cuh"
#include "attnjit/sm90/wgmma.cuh"
#include "attnjit/sm90/wgmma_ops.cuh"

namespace attnjit {
namespace sm90 {

template <class E, int kDqkReal, int kDvReal, int BM, int BN, int S>
struct BackwardDkdv {
    static constexpr int DQK = tile_head_dim(kDqkReal), DV = tile_head_dim(kDvReal);
    static constexpr int kConsumers = BN / 64;  // warpgroups of 64 keys
    static constexpr int kThreads = 128 * (1 + kConsumers);
    static constexpr int kNT = BM / 8;      // n8 tiles (queries) of S^T
    static constexpr int kRowBytes = 128;  // one row of a 64-column block
    static constexpr int kHeaderBytes = 1024;
    static constexpr int kKOff = kHeaderBytes;
    static constexpr int kVOff = kKOff + BN * DQK * 2;
    static constexpr int kQOff = kVOff + BN * DV * 2;
    static constexpr int kDoInStage = BM * DQK * 2;
    static constexpr int kQStage = BM * (DQK + DV) * 2;
    static constexpr int kStatOff = kQOff + S * kQStage;
    static constexpr int kStatStage = 2 * BM * 4;  // LSE2 [BM] | Delta [BM]
    static constexpr int kSmemBytes = kStatOff + S * kStatStage + 1024;  // + the alignment slack
    // The header: barriers, the step ring ({head, first row, class} per stage), the scratch.
    static constexpr int kKvFull = 0, kFull = 8, kEmpty = kFull + 8 * S, kRingOff = kEmpty + 8 * S,
                         kScratchOff = 512;
    static constexpr int kProducerRegs = 24, kConsumerRegs = 240;

    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::backward_dkdv, MainloopKind::sm90,
                                                        ElemKindOf<E>::value, kDqkReal, kDvReal,
                                                        TileConfig{BM, BN, kThreads / 32, S}}),
                  "sm90::BackwardDkdv shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(BN == 128 && BM == 64, "two consumer warpgroups of 64 keys, 64 queries a step");
    static_assert(DQK % 64 == 0 && DV % 64 == 0 && DQK <= 128 && DV <= 128,
                  "tile head dims of whole 64-column blocks, dK and dV in registers: 64 or 128");
    static_assert(kQStage % 1024 == 0 && (BN * DQK * 2) % 1024 == 0, "swizzled tiles start on 1024-byte boundaries");
    static_assert(kRingOff + 16 * S <= kScratchOff && kScratchOff + 64 <= kHeaderBytes, "the header holds its parts");

    static constexpr const char* kName = "sm90 backward";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;
    static constexpr bool kSupportsRecipBand = false;

    using SLayout = sm80::MmaCLayout<1, kNT, 1, BM, 1, 4>;                // S^T, P^T, dP^T, dS^T: a warp's 16 keys
    using KLayout = sm80::MmaCLayout<1, DQK / 8, 1, kDqkReal, 1, 4>;  // dK (stores the real columns)
    using VLayout = sm80::MmaCLayout<1, DV / 8, 1, kDvReal, 1, 4>;    // dV

    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dkdv(const Params& p, const BackwardTmaMaps& maps,
                                                    unsigned char* smem_raw) {
        static_assert(Variant::kRecipBandWidth < 0, "the reciprocal band's backward_dkdv runs on the sm80 loop");
        static_assert(Variant::kInputGradKeySites == 0 && !Variant::kInputGradPlanes,
                      "gradients of captured tensors in backward_dkdv run on the sm80 loop");
        const BackwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int n0 = blockIdx.x * BN, kvh = blockIdx.y, b = blockIdx.z;
        const int nq = a.q_len, nk = a.kv_len;

        const unsigned raw = ptx::smem_addr(smem_raw);
        const unsigned base = (raw + 1023u) & ~1023u;
        unsigned char* const smem = smem_raw + (base - raw);
        int* const ring = reinterpret_cast<int*>(smem + kRingOff);  // {h, m0, class, -} per stage
        const unsigned k_s = base + kKOff, v_s = base + kVOff, q_s = base + kQOff;
        float* const stats = reinterpret_cast<float*>(smem + kStatOff);

        if (tid == 0) {
            mbar_init(base + kKvFull, 1);
#pragma unroll
            for (int s = 0; s < S; ++s) {
                mbar_init(base + kFull + 8 * s, 1);
                mbar_init(base + kEmpty + 8 * s, 4 * kConsumers);  // one arrival per consumer warp
            }
            mbar_init_fence();
        }
        block_sync();

        if (warp < 4) {  // ---- the producer ----
            release_registers<kProducerRegs>();
            if (warp != 0) return;
            if (lane == 0) {
                tma_prefetch(maps.q);
                tma_prefetch(maps.k);
                tma_prefetch(maps.v);
                tma_prefetch(maps.d_o);
                mbar_arrive_expect_tx(base + kKvFull, BN * (DQK + DV) * 2);
#pragma unroll
                for (int c = 0; c < DQK / 64; ++c)
                    tma_load_4d(k_s + c * BN * kRowBytes, maps.k, 64 * c, n0, kvh, b, base + kKvFull);
#pragma unroll
                for (int c = 0; c < DV / 64; ++c)
                    tma_load_4d(v_s + c * BN * kRowBytes, maps.v, 64 * c, n0, kvh, b, base + kKvFull);
            }
            BlockCtx ctx{reinterpret_cast<long long*>(smem + kScratchOff), lane, 32, 1};
            const int last_key = (n0 + BN < nk ? n0 + BN : nk) - 1;
            QueryCursor<Variant, Params, BM> cursor(a, n0, last_key);
            const long long plane = (long long)a.batch * a.q_heads * nq;
            RingPos<S> pos;
            for (;;) {
                const QueryStep st = cursor.advance(p, ctx);
                const int stage = pos.stage;
                if (pos.reused()) mbar_wait(base + kEmpty + 8 * stage, pos.phase ^ 1);  // its last use is done
                if (st.h >= 0) {  // LSE2 and Delta of the step's rows (0 past Nq: those P are 0)
                    const float* ws = a.stats + ((long long)b * a.q_heads + st.h) * nq + st.m0;
                    float* dst = stats + stage * 2 * BM;
                    for (int i = lane; i < 2 * BM; i += 32) {
                        const int r = i < BM ? i : i - BM;
                        dst[i] = st.m0 + r < nq ? ws[(i < BM ? 0 : plane) + r] : 0.f;
                    }
                    __threadfence_block();
                }
                __syncwarp();  // the lanes' statistics before lane 0's arrival publishes them
                if (lane == 0) {
                    ring[4 * stage] = st.h;
                    ring[4 * stage + 1] = st.m0;
                    ring[4 * stage + 2] = static_cast<int>(st.cls);
                    if (st.h < 0) {
                        mbar_arrive(base + kFull + 8 * stage);  // the end: no copies
                    } else {
                        const unsigned dst = q_s + stage * kQStage;
                        mbar_arrive_expect_tx(base + kFull + 8 * stage, kQStage);
#pragma unroll
                        for (int c = 0; c < DQK / 64; ++c)
                            tma_load_4d(dst + c * BM * kRowBytes, maps.q, 64 * c, st.m0, st.h, b,
                                        base + kFull + 8 * stage);
#pragma unroll
                        for (int c = 0; c < DV / 64; ++c)
                            tma_load_4d(dst + kDoInStage + c * BM * kRowBytes, maps.d_o, 64 * c, st.m0, st.h, b,
                                        base + kFull + 8 * stage);
                    }
                }
                __syncwarp();
                pos.advance();
                if (st.h < 0) return;
            }
        }

        // ---- a consumer: warpgroup wg of 64 keys ----
        claim_registers<kConsumerRegs>();
        const int wg = warp / 4 - 1;
        const unsigned k_rows = k_s + wg * 64 * kRowBytes, v_rows = v_s + wg * 64 * kRowBytes;
        const SLayout sl;
        float dk[1][DQK / 8][4], dv[1][DV / 8][4];
        KLayout::clear(dk);
        VLayout::clear(dv);
        typename Variant::Head hd = Variant::make_head(p, b, kvh * a.group, kvh);
        int hd_h = kvh * a.group;
        const bool edge = n0 + BN > nk;
        mbar_wait(base + kKvFull, 0);
        RingPos<S> pos;
        for (;;) {
            const int stage = pos.stage;
            mbar_wait(base + kFull + 8 * stage, pos.phase);
            const int h = ring[4 * stage], m0 = ring[4 * stage + 1];
            const TileClass cls = static_cast<TileClass>(ring[4 * stage + 2]);
            if (h < 0) break;
            if (h != hd_h) {
                hd = Variant::make_head(p, b, h, kvh);
                hd_h = h;
            }
            const unsigned q_st = q_s + stage * kQStage, do_st = q_st + kDoInStage;
            float s[1][kNT][4], dp[1][kNT][4];
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < DQK / 16; ++kk) {  // S^T = K Q^T, k16 steps within 64-column blocks
                const unsigned off = (kk % 4) * 32u;
                Wgmma<E, BM>::template ss<0>(s[0], smem_desc(k_rows + (kk / 4) * BN * kRowBytes + off, 16, 1024),
                                             smem_desc(q_st + (kk / 4) * BM * kRowBytes + off, 16, 1024),
                                             kk > 0 ? 1 : 0);
            }
#pragma unroll
            for (int kk = 0; kk < DV / 16; ++kk) {  // dP^T = V dO^T
                const unsigned off = (kk % 4) * 32u;
                Wgmma<E, BM>::template ss<0>(dp[0], smem_desc(v_rows + (kk / 4) * BN * kRowBytes + off, 16, 1024),
                                             smem_desc(do_st + (kk / 4) * BM * kRowBytes + off, 16, 1024),
                                             kk > 0 ? 1 : 0);
            }
            wgmma_commit();
            wgmma_wait<0>();
            fence_regs(s[0]);
            fence_regs(dp[0]);
            const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e,
                                                         Variant::kHasMask && cls == TileClass::kPartial};
            const float* lse2_s = stats + stage * 2 * BM;
            if (edge)
                scores.template keys_are_rows<true>(sl, s, dp, lse2_s, lse2_s + BM, m0, nq, n0, nk);
            else
                scores.template keys_are_rows<false>(sl, s, dp, lse2_s, lse2_s + BM, m0, nq, n0, nk);
            unsigned pt[1][kNT / 2][4], dst[1][kNT / 2][4];  // P^T and dS^T as A fragments
            sm80::pack_a<E>(s, pt);
            sm80::pack_a<E>(dp, dst);
            fence_regs(dv[0]);
            fence_regs(dk[0]);
            fence_regs(pt[0]);
            fence_regs(dst[0]);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < BM / 16; ++kk)  // dV += P^T dO: 16 queries a step, dO read N-contiguous
                Wgmma<E, DV>::template rs<1>(dv[0], pt[0][kk], smem_desc(do_st + kk * 16 * kRowBytes, BM * kRowBytes, 1024),
                                             1);
#pragma unroll
            for (int kk = 0; kk < BM / 16; ++kk)  // dK += dS^T Q
                Wgmma<E, DQK>::template rs<1>(dk[0], dst[0][kk], smem_desc(q_st + kk * 16 * kRowBytes, BM * kRowBytes, 1024),
                                              1);
            wgmma_commit();
            wgmma_wait<0>();
            fence_regs(dv[0]);
            fence_regs(dk[0]);
            __syncwarp();
            if (lane == 0) mbar_arrive(base + kEmpty + 8 * stage);  // Q, dO and the statistics are free
            pos.advance();
        }

        const KLayout kl;
        const VLayout vl;
        store_key_grads<E>(a, kl, vl, dk, dv, b, kvh, n0, nk);
    }
};

}  // namespace sm90
}  // namespace attnjit
