// The backward's key-tile kernel on Hopper (sm_90a; fp16 / bf16): backward_dkdv, and with
// kFusedDq backward_fused: sm80/backward_dkdv.cuh's products on wgmma, with the operands brought
// by the bulk tensor copies. One CTA per KV tile of BN = 128 keys, grid (ceil(Nk / 128), Hkv,
// B); it runs after backward_dq (or backward_stats), whose per-row statistics (LSE2, Delta:
// BackwardArgs::stats) it reads.
//
//   warpgroup 0, the producer: warp 0 walks the query tiles of every query head of the group
//     (QueryCursor: masked tiles skipped, classified over one warp with named barrier 1); lane
//     0 copies K and V once and, per step, Q and dO into a ring of kStages stages completing
//     on mbarriers; the warp's lanes copy the step's LSE2 and Delta beside them. The step's
//     {head, first row, class, dQ turn} travels in a small ring beside the barriers.
//   warpgroups 1 and 2, the consumers: 64 keys each. Per step, on wgmma:
//     S^T = K Q^T, dP^T = V dO^T                (both operands in shared memory; two groups)
//     P^T while dP^T runs; dV += P^T dO issued; dS^T while it runs (the hooks: BackwardScores)
//     dK += dS^T Q                               (P^T, dS^T from registers; dO, Q read N-contiguous)
//   then the stage goes back. dK (scaled once) and dV are stored from registers: each element
//   is one thread's fixed-order sum over (head, query tile), deterministic.
//
// kFusedDq (backward_fused on sm90, after backward_stats): each step also adds dQ_partial = dS K to
// the fp32 sums (BackwardArgs::dq_accum; backward_dq_convert scales and stores them). Each
// consumer writes its dS^T [64 keys x BM] to shared memory; after a barrier of both, each
// computes half of dQ_partial's columns over all BN keys on wgmma (dS^T read M-contiguous as dS,
// K read N-contiguous) and writes them to a dQ_partial tile [BM x kDqkReal] fp32 in shared
// memory. Warp 1 of the producer warpgroup, the dQ writer, adds that tile to the sums with one
// bulk reduction (its rows are contiguous there): in any order (the fast backward), or
// (BackwardArgs::dq_turns) one CTA at a time per query tile in the order of
// common/query_schedule.cuh, as sm80/backward_fused.cuh does (in the descending order, CTAs
// numbered in descending key tiles; the writer waits for the tile's turn before the reduction and publishes the next once
// it has completed). Named barriers hand the tile over: kDqFull (consumers arrive, the writer
// waits), kDqEmpty (the writer arrives once the reduction has read the tile).
//
// Not yet here: overlap of one step's element pass with another step's products, the reciprocal
// band, per-key gradients of captured tensors (those specs take the sm80 kernel).
//
// Shared memory (smem_bytes in common/kernel_config.h), from the first 1024-byte boundary:
//   header [1024]: mbarriers (K and V full; per stage full, empty), the step ring, the
//                  producer warp's classify scratch, the dQ writer's step slots
//   K [BN x DQK] | V [BN x DV] | S x (Q [BM x DQK] | dO [BM x DV]) | kFusedDq: 2 x dS^T [BN x BM] |
//   S x (LSE2 [BM] | Delta [BM]) | kFusedDq: dQ_partial [BM x kDqkReal] fp32
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

template <class E, int kDqkReal, int kDvReal, int BM, int BN, int S, bool kFusedDq = false>
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
    static constexpr int kDsOff = kQOff + S * kQStage;  // kFusedDq: two dS^T buffers, by step parity
    static constexpr int kDsBytes = BN * BM * 2;
    static constexpr int kStatOff = kDsOff + (kFusedDq ? 2 * kDsBytes : 0);
    static constexpr int kStatStage = 2 * BM * 4;  // LSE2 [BM] | Delta [BM]
    static constexpr int kDqOff = kStatOff + S * kStatStage;
    static constexpr int kSmemBytes = kDqOff + (kFusedDq ? 4 * BM * kDqkReal : 0) + 1024;  // + the alignment slack
    // The header: barriers, the step ring ({head, first row, class, wait_for, position} per
    // stage, 8 ints), the scratch.
    static constexpr int kKvFull = 0, kFull = 8, kEmpty = kFull + 8 * S, kRingOff = kEmpty + 8 * S,
                         kScratchOff = 512, kDqSlotOff = 768;  // kDqSlotOff: 2 x {h, m0, wait_for, position} to the writer
    // setmaxnreg moves registers within the CTA's allocation (168 a thread at 384 threads): the
    // consumers' increase waits for the producer's release, so 24 + 2 x 240 must stay within
    // 3 x 168 (at 32 + 2 x 240 the second consumer warpgroup waited forever). The producer warps
    // spill a few bytes at 24.
    static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
    static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (1 + kConsumers) * (65536 / kThreads / 8 * 8),
                  "setmaxnreg: the consumers' registers must come from the producer's release");
    // kFusedDq: the columns of dQ_partial each consumer computes, and the named barriers (the
    // producer warp's BlockCtx has barrier 1): dS^T written (both consumers), and the dQ_partial
    // tile's hand-over between the consumers and the writer warp.
    static constexpr int kDqCols = DQK / kConsumers;
    static constexpr int kDsWritten = 2, kDqFull = 3, kDqEmpty = 4, kDqHandover = 128 * kConsumers + 32;

    static_assert(kSmemBytes == smem_bytes(KernelConfig{kFusedDq ? KernelKind::backward_fused : KernelKind::backward_dkdv,
                                                        MainloopKind::sm90,
                                                        ElemKindOf<E>::value, kDqkReal, kDvReal,
                                                        TileConfig{BM, BN, kThreads / 32, S}}),
                  "sm90::BackwardDkdv shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(BN == 128 && BM == 64, "two consumer warpgroups of 64 keys, 64 queries a step");
    static_assert(DQK % 64 == 0 && DV % 64 == 0 && DQK <= 128 && DV <= 128,
                  "tile head dims of whole 64-column blocks, dK and dV in registers: 64 or 128");
    static_assert(kQStage % 1024 == 0 && (BN * DQK * 2) % 1024 == 0, "swizzled tiles start on 1024-byte boundaries");
    static_assert(kRingOff + 32 * S <= kScratchOff && kScratchOff + 64 <= kDqSlotOff && kDqSlotOff + 32 <= kHeaderBytes,
                  "the header holds its parts");
    static_assert(kDsOff % 1024 == 0 && kDsBytes % 1024 == 0, "dS^T's swizzled tiles start on 1024-byte boundaries");

    static constexpr const char* kName = kFusedDq ? "sm90 backward_fused" : "sm90 backward_dkdv";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;
    static constexpr bool kSupportsRecipBand = false;

    using SLayout = sm80::MmaCLayout<1, kNT, 1, BM, 1, 4>;                // S^T, P^T, dP^T, dS^T: a warp's 16 keys
    using KLayout = sm80::MmaCLayout<1, DQK / 8, 1, kDqkReal, 1, 4>;  // dK (stores the real columns)
    using VLayout = sm80::MmaCLayout<1, DV / 8, 1, kDvReal, 1, 4>;    // dV

    // Whether the consumers split the element pass around the products (P^T while dP^T's runs,
    // dS^T while dV's runs): variants whose dS needs the score itself (score_mod gradients) do not.
    template <class Variant>
    static constexpr bool kSplitElements = !Variant::kHasScoreGrad;

    // dV += P^T dO: 16 queries a step, dO read N-contiguous.
    __device__ __forceinline__ static void dv_product(float (&dv)[1][DV / 8][4], const unsigned (&pt)[1][BM / 16][4],
                                                      unsigned do_st) {
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk)
            Wgmma<E, DV>::template rs<1>(dv[0], pt[0][kk], smem_desc(do_st + kk * 16 * kRowBytes, BM * kRowBytes, 1024), 1);
    }

    // dS^T of consumer wg (packed as A fragments: its warp's 16 keys x BM queries) into rows
    // 64 wg + the warp's keys of the dS^T tile [BN x BM], 128-byte swizzled like a copied tile.
    __device__ __forceinline__ static void store_ds_t(const unsigned (&dst)[1][BM / 16][4], unsigned ds_buf, int wg,
                                                      int warp, int lane) {
        const int row = 64 * wg + 16 * (warp & 3) + (lane >> 2);  // and row + 8: the same swizzle phase
        const unsigned r0 = ds_buf + row * kRowBytes + 4 * (lane & 3), r1 = r0 + 8 * kRowBytes;
#pragma unroll
        for (int kc = 0; kc < BM / 16; ++kc) {  // queries 16 kc .. 16 kc + 15: chunks 2 kc, 2 kc + 1
            const unsigned c0 = ((2 * kc) ^ (row & 7)) << 4, c1 = ((2 * kc + 1) ^ (row & 7)) << 4;
            ptx::st_shared_b32(r0 + c0, dst[0][kc][0]);
            ptx::st_shared_b32(r1 + c0, dst[0][kc][1]);
            ptx::st_shared_b32(r0 + c1, dst[0][kc][2]);
            ptx::st_shared_b32(r1 + c1, dst[0][kc][3]);
        }
    }

    // dQ_partial (a warpgroup accumulator: the warp's 16 query rows, columns col0 + 8 nt + 2 t4)
    // into the dQ_partial tile [BM x kDqkReal] fp32 at dq_s: the real columns only.
    __device__ __forceinline__ static void store_dq(const float (&dq)[kDqCols / 8][4], unsigned dq_s, int col0, int warp,
                                                    int lane) {
        const int row = 16 * (warp & 3) + (lane >> 2);
        const unsigned r0 = dq_s + 4 * (row * kDqkReal + col0 + 2 * (lane & 3)), r1 = r0 + 4 * 8 * kDqkReal;
#pragma unroll
        for (int nt = 0; nt < kDqCols / 8; ++nt) {
            if (col0 + 8 * nt >= kDqkReal) continue;  // warp-uniform: padded columns
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(r0 + 32 * nt), "f"(dq[nt][0]), "f"(dq[nt][1]) : "memory");
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(r1 + 32 * nt), "f"(dq[nt][2]), "f"(dq[nt][3]) : "memory");
        }
    }

    // The dQ writer (one warp; lane 0 issues): per step the consumers hand over, the tile's rows
    // < Nq added to head h's sums [Nq x kDqkReal] by one bulk reduction; ordered (turns), after
    // the tile's turn, and the next turn published once the reduction has completed.
    __device__ __forceinline__ static void write_dq(const BackwardArgs& a, unsigned base, volatile int* slot, int* turns,
                                                    int b, int lane) {
        const int q_tiles = (a.q_len + BM - 1) / BM;
        named_arrive(kDqEmpty, kDqHandover);  // the tile starts free
        for (int step = 0;; ++step) {
            named_sync(kDqFull, kDqHandover);
            volatile int* const st = slot + 4 * (step & 1);
            const int h = st[0], m0 = st[1], wait_for = st[2], position = st[3];
            if (h < 0) break;
            int* const turn = turns ? turns + ((long long)b * a.q_heads + h) * q_tiles + m0 / BM : nullptr;
            if (lane == 0) {
                if (turn && wait_for > 0) {  // the CTA before this one has added to the tile
                    while (ptx::ld_acquire_gpu(turn) < wait_for) {
                    }
                    fence_proxy_async_global();
                }
                const int rows = a.q_len - m0 < BM ? a.q_len - m0 : BM;
                bulk_reduce_add_f32(a.dq_accum + (((long long)b * a.q_heads + h) * a.q_len + m0) * kDqkReal,
                                    base + kDqOff, 4u * rows * kDqkReal);
                bulk_commit();
                bulk_wait_read();
            }
            __syncwarp();
            named_arrive(kDqEmpty, kDqHandover);
            if (lane == 0 && turn) {  // the additions complete, then the next CTA's turn
                bulk_wait();
                fence_proxy_async_global();
                ptx::st_release_gpu(turn, position + 1);
            }
        }
        if (lane == 0) bulk_wait();
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dkdv(const Params& p, const BackwardTmaMaps& maps,
                                                    unsigned char* smem_raw) {
        static_assert(Variant::kRecipBandWidth < 0, "the reciprocal band's backward_dkdv runs on the sm80 loop");
        static_assert(Variant::kInputGradKeySites == 0 && !Variant::kInputGradPlanes,
                      "gradients of captured tensors in backward_dkdv run on the sm80 loop");
        const BackwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        // kFusedDq, ordered: the turn counters, and in the descending order of turns the CTAs
        // numbered in descending key tiles (none waits on one dispatched after it); the
        // rotated order (which has every CTA of a kv head resident) keeps key tile 0, the
        // heaviest under a causal mask, first.
        int* const turns = kFusedDq ? a.dq_turns : nullptr;
        const int key_tile = turns && !a.dq_rotate ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
        const int n0 = key_tile * BN, kvh = blockIdx.y, b = blockIdx.z;
        const int nq = a.q_len, nk = a.kv_len;

        const unsigned raw = ptx::smem_addr(smem_raw);
        const unsigned base = (raw + 1023u) & ~1023u;
        unsigned char* const smem = smem_raw + (base - raw);
        int* const ring = reinterpret_cast<int*>(smem + kRingOff);  // {h, m0, class, wait_for, position} per stage
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
            if constexpr (kFusedDq) {
                if (warp == 1) write_dq(a, base, reinterpret_cast<volatile int*>(smem + kDqSlotOff), turns, b, lane);
            }
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
            // The fast backward starts CTAs at different query tiles, so that their dQ additions
            // do not all meet on the same rows at once; the ordered one walks them in order. The
            // group's heads go tile by tile: the rotated turns' slack grows with the group.
            QueryCursor<Variant, Params, BM, BN, true> cursor(a, n0, last_key, kFusedDq && !turns ? key_tile : 0);
            if (turns) cursor.order_by_key_tiles(a, key_tile);
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
                    ring[8 * stage] = st.h;
                    ring[8 * stage + 1] = st.m0;
                    ring[8 * stage + 2] = static_cast<int>(st.cls);
                    ring[8 * stage + 3] = st.wait_for;
                    ring[8 * stage + 4] = st.position;
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
            const int h = ring[8 * stage], m0 = ring[8 * stage + 1];
            const TileClass cls = static_cast<TileClass>(ring[8 * stage + 2]);
            if (h < 0) break;
            if (kFusedDq && tid == 128) {  // the writer's step, by step parity (it has read the one before)
                volatile int* slot = reinterpret_cast<volatile int*>(smem + kDqSlotOff) + 4 * (pos.uses & 1);
                slot[0] = h;
                slot[1] = m0;
                slot[2] = ring[8 * stage + 3];
                slot[3] = ring[8 * stage + 4];
            }
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
            wgmma_commit();  // S^T
#pragma unroll
            for (int kk = 0; kk < DV / 16; ++kk) {  // dP^T = V dO^T
                const unsigned off = (kk % 4) * 32u;
                Wgmma<E, BM>::template ss<0>(dp[0], smem_desc(v_rows + (kk / 4) * BN * kRowBytes + off, 16, 1024),
                                             smem_desc(do_st + (kk / 4) * BM * kRowBytes + off, 16, 1024),
                                             kk > 0 ? 1 : 0);
            }
            wgmma_commit();  // dP^T
            const BackwardScores<Variant, Params> scores{p, hd, a.scale, a.scale * kLog2e,
                                                         Variant::kHasMask && cls == TileClass::kPartial};
            const float* lse2_s = stats + stage * 2 * BM;
            unsigned pt[1][kNT / 2][4], dst[1][kNT / 2][4];  // P^T and dS^T as A fragments
            if constexpr (kSplitElements<Variant>) {
                wgmma_wait<1>();  // S^T: P^T while dP^T's product runs
                fence_regs(s[0]);
                if (edge)
                    scores.template keys_are_rows_p<true>(sl, s, lse2_s, m0, nq, n0, nk);
                else
                    scores.template keys_are_rows_p<false>(sl, s, lse2_s, m0, nq, n0, nk);
                sm80::pack_a<E>(s, pt);
                fence_regs(dv[0]);
                fence_regs(pt[0]);
                wgmma_fence();
                dv_product(dv, pt, do_st);
                wgmma_commit();
                wgmma_wait<1>();  // dP^T: dS^T while dV's product runs
                fence_regs(dp[0]);
                scores.keys_are_rows_ds(sl, s, dp, lse2_s + BM);
            } else {
                wgmma_wait<0>();
                fence_regs(s[0]);
                fence_regs(dp[0]);
                if (edge)
                    scores.template keys_are_rows<true>(sl, s, dp, lse2_s, lse2_s + BM, m0, nq, n0, nk);
                else
                    scores.template keys_are_rows<false>(sl, s, dp, lse2_s, lse2_s + BM, m0, nq, n0, nk);
                sm80::pack_a<E>(s, pt);
            }
            sm80::pack_a<E>(dp, dst);
            const unsigned ds_buf = base + kDsOff + (pos.uses & 1) * kDsBytes;
            if constexpr (kFusedDq) {
                store_ds_t(dst, ds_buf, wg, warp, lane);
                fence_proxy_async();                     // dS^T's stores before the products read it
                named_sync(kDsWritten, 128 * kConsumers);  // both halves of dS^T
            }
            if constexpr (!kSplitElements<Variant>) {
                fence_regs(dv[0]);
                fence_regs(pt[0]);
            }
            fence_regs(dk[0]);
            fence_regs(dst[0]);
            wgmma_fence();
            if constexpr (!kSplitElements<Variant>) dv_product(dv, pt, do_st);
#pragma unroll
            for (int kk = 0; kk < BM / 16; ++kk)  // dK += dS^T Q
                Wgmma<E, DQK>::template rs<1>(dk[0], dst[0][kk], smem_desc(q_st + kk * 16 * kRowBytes, BM * kRowBytes, 1024),
                                              1);
            float dq[kDqCols / 8][4];
            if constexpr (kFusedDq) {
                // dQ_partial[:, this half's columns] = dS K over the BN keys: dS^T read M-contiguous,
                // K N-contiguous from its first column (a 64-column block, or half of one).
                const unsigned k_cols = k_s + (wg * kDqCols / 64) * BN * kRowBytes + (wg * kDqCols % 64) * 2;
#pragma unroll
                for (int kk = 0; kk < BN / 16; ++kk)
                    Wgmma<E, kDqCols>::template ss<1, 1>(dq, smem_desc(ds_buf + kk * 16 * kRowBytes, BN * kRowBytes, 1024),
                                                         smem_desc(k_cols + kk * 16 * kRowBytes, BN * kRowBytes, 1024),
                                                         kk > 0 ? 1 : 0);
            }
            wgmma_commit();
            wgmma_wait<0>();
            fence_regs(dv[0]);
            fence_regs(dk[0]);
            if constexpr (kFusedDq) fence_regs(dq);
            __syncwarp();
            if (lane == 0) mbar_arrive(base + kEmpty + 8 * stage);  // Q, dO and the statistics are free
            pos.advance();
            if constexpr (kFusedDq) {
                named_sync(kDqEmpty, kDqHandover);  // the writer's last reduction has read the tile
                store_dq(dq, base + kDqOff, wg * kDqCols, warp, lane);
                fence_proxy_async();  // the tile's stores before the bulk reduction reads it
                named_arrive(kDqFull, kDqHandover);
            }
        }
        if constexpr (kFusedDq) {  // the writer's end
            named_sync(kDqEmpty, kDqHandover);
            if (tid == 128) reinterpret_cast<volatile int*>(smem + kDqSlotOff)[4 * (pos.uses & 1)] = -1;
            named_arrive(kDqFull, kDqHandover);
        }

        const KLayout kl;
        const VLayout vl;
        store_key_grads<E>(a, kl, vl, dk, dv, b, kvh, n0, nk);
    }
};

}  // namespace sm90
}  // namespace attnjit
