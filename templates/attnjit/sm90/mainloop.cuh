// The Hopper forward main loop (sm_90a): the FlashAttention-3 design on the same Variant hooks
// as the sm80 loop.
//
//   warpgroup 0, the producer: warp 0 walks the KV tiles (KvCursor: classify, skip) and its
//     lane 0 issues the bulk tensor copies (TMA) of Q once and of K and V per tile into a ring
//     of kStages shared-memory stages, each completing on an mbarrier; the tile's index and
//     class travel with it in a small ring beside the barriers. The other three warps leave.
//   warpgroups 1 and 2 (and 3 with 192 query rows), the consumers: 64 query rows each. Per
//     tile j a consumer issues S_j = Q K_j^T (both operands in shared memory) and
//     O += P_{j-1} V_{j-1} (P from registers) on wgmma together; it hands K_j's buffer back
//     once the scores are in, runs the hooks (common/score_hooks.cuh) and the online softmax
//     (common/online_softmax.cuh) on S_j while P V is in flight, then rescales O and hands
//     V_{j-1}'s buffer back. The consumers take turns, round robin, to issue their products
//     (ping-pong, named barriers), so one's softmax runs while another's products hold the
//     tensor cores. Each consumer's accumulators are the mma.sync C layout of its four warps
//     (MmaCLayout with kMF = 1, counted from warp 4), so the hooks, the softmax and the
//     epilogue (common/epilogue.cuh) are the shared ones.
//
// Work items: (query tile, head, batch) by linear index, in the order of cta_order.cuh
// (heaviest query tiles first where tiles are skipped). On a grid of one CTA an item the CTA
// computes item blockIdx; on the persistent grid (ForwardArgs::work_counter, one CTA an SM
// when there are more items than SMs) the producer fetches the next item from the counter as
// it starts one, so CTAs that drew light tiles take more of them: a dynamic hand-out,
// longest first. The counter is 0 at the launch and back to 0 at its end (api/work_counters.h). The producer writes the item beside the barriers before Q's copy completes
// kQFull, and -1 (kQFull completed without a copy) when none is left; the consumers read it
// there. The ring, its barriers' phases and Q's full / empty pair run on across items.
//
// Shared memory (KernelConfig layout: smem_bytes in common/kernel_config.h), from the first
// 1024-byte boundary of the dynamic allocation:
//   header [1024]: mbarriers (Q full, Q empty; per stage K full, V full, K empty, V empty, bias
//                  full, bias empty), the tile ring {tile, class} per stage, the producer warp's
//                  classify scratch, the work item
//   Q [BM x DQK] | K [S][BN x DQK] | V [S][BN x DV]   (128-byte swizzled, sm90/wgmma.cuh)
//   | with kBias: bias [S][BM x BN] (16-bit, sm90/bias_tile.cuh)
//
// kBias (KernelConfig::bias_tile): score_mod's bias tile travels with K in the ring, a bulk copy
// of its own barriers a stage: the consumers wait for it before their score hooks and hand it
// back right after them.
// plus 1024 bytes of slack for the alignment.
#pragma once

#include "attnjit/common/cta_order.cuh"
#include "attnjit/common/cta_tile.cuh"
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
#include "attnjit/forward/tma_maps.h"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm90/barrier.cuh"
#include "attnjit/sm90/bias_tile.cuh"
#include "attnjit/sm90/tma.cuh"
#include "attnjit/sm90/wgmma.cuh"
#include "attnjit/sm90/wgmma_ops.cuh"

namespace attnjit {
namespace sm90 {

template <class E, int kDqkReal, int kDvReal, int BM, int BN, int S, bool kBias = false>
struct Mainloop {
    static constexpr int DQK = tile_head_dim(kDqkReal), DV = tile_head_dim(kDvReal);
    static constexpr int kConsumers = BM / 64;  // warpgroups of 64 query rows
    static constexpr int kThreads = 128 * (1 + kConsumers);
    static constexpr int kNT = BN / 8, kDT = DV / 8;
    static constexpr int kRowBytes = 128;  // one row of a 64-column block
    static constexpr int kHeaderBytes = 1024;
    static constexpr int kQOff = kHeaderBytes;
    static constexpr int kKOff = kQOff + BM * DQK * 2;
    static constexpr int kKStage = BN * DQK * 2;
    static constexpr int kVOff = kKOff + S * kKStage;
    static constexpr int kVStage = BN * DV * 2;
    static constexpr int kBOff = kVOff + S * kVStage;
    static constexpr int kBStage = kBias ? BM * BN * 2 : 0;
    static constexpr int kSmemBytes = kBOff + S * kBStage + 1024;  // + the alignment slack
    // The header: barriers, then the tile ring, then the producer's classify scratch.
    // K and V buffers are handed back separately: K once the scores are in, V once P V is.
    static constexpr int kQFull = 0, kQEmpty = 8, kKFull = 16, kVFull = kKFull + 8 * S, kKEmpty = kVFull + 8 * S,
                         kVEmpty = kKEmpty + 8 * S, kBFull = kVEmpty + 8 * S, kBEmpty = kBFull + 8 * S;
    static constexpr int kRingOff = kBEmpty + 8 * S, kScratchOff = 512, kItemOff = kScratchOff + 64;
    // Two consumers: 240 registers each, the producer 24 (24 + 2 x 240 <= 3 x 168). Three: 160
    // each and the producer 32 (32 + 3 x 160 = 4 x 128), FlashAttention-3's split.
    static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32, kConsumerRegs = kConsumers == 2 ? 240 : 160;
    // Named barriers: 1 is the producer warp's classify (BlockCtx), kTurnBarrier + c consumer c's
    // turn to issue products (ping-pong).
    static constexpr int kTurnBarrier = 2;
    // (Ping-pong: -1% to +6% against the same kernel without it on the H100, at d256 too,
    // where it costs a few bytes of spills: bench/results/2026-11-28-h100-sm90-schedules.md.)

    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::forward, MainloopKind::sm90, ElemKindOf<E>::value,
                                                        kDqkReal, kDvReal, TileConfig{BM, BN, kThreads / 32, S},
                                                        false, kBias}),
                  "sm90::Mainloop shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(BM == 128 || (BM == 192 && DQK == 64 && DV == 64),
                  "two consumer warpgroups of 64 rows, or three at tile head dims of 64 (160 registers each)");
    static_assert(DQK % 64 == 0 && DV % 64 == 0, "tile head dims of whole 64-column swizzle blocks");
    static_assert(BN % 16 == 0 && BN <= 256, "block_n: a multiple of 16, at most 256 (one wgmma's N)");
    static_assert(!kBias || bias_tile_fits(MainloopKind::sm90, BN), "the bias tile travels in two boxes of 64 keys");
    static_assert(S >= 2, "a consumer holds tile j-1's stage while it waits for tile j's: two stages at least");
    static_assert(kRingOff + 8 * S <= kScratchOff && kItemOff + 4 <= kHeaderBytes, "the header holds its parts");
    // setmaxnreg moves registers within the CTA's launch allocation (65536 / kThreads a thread, in
    // steps of 8): the consumers' increase waits for the producer's release.
    static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (1 + kConsumers) * (65536 / kThreads / 8 * 8),
                  "setmaxnreg: the consumers' registers must come from the producer's release");

    static constexpr const char* kName = "sm90";
    static constexpr bool kSupportsOutputTransform = true;
    static constexpr bool kSupportsScoreTileTransform = false;
    static constexpr bool kSupportsRecipBand = false;
    static constexpr bool kSupportsLatent = false;

    using SLayout = sm80::MmaCLayout<1, kNT, 1, 8 * kNT, 1, 4>;  // S, then P: a warp's 16 rows
    using OLayout = sm80::MmaCLayout<1, kDT, 1, kDvReal, 1, 4>;  // O (stores the real columns)

    template <class Variant, class Params>
    __device__ __forceinline__ static void run(const Params& p, const ForwardTmaMaps& maps, unsigned char* smem_raw) {
        const ForwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int nq = a.q_len, nk = a.kv_len;
        // The work items: every (query tile, head, batch).
        const WorkGrid grid{(nq + BM - 1) / BM, a.q_heads, a.batch};
        const int items = grid.size();
        // With a bias tile the batch rows of a head run together: one read of a shared bias.
        const int order = launch_cta_order<Variant, kOrderAuto>(a) | (kBias ? kOrderBatchInner : 0);
        constexpr int kKvRowBytes = (DQK + DV) * 2;

        const unsigned raw = ptx::smem_addr(smem_raw);
        const unsigned base = (raw + 1023u) & ~1023u;
        unsigned char* const smem = smem_raw + (base - raw);
        int* const ring = reinterpret_cast<int*>(smem + kRingOff);  // {tile, class} per stage
        volatile int* const item_slot = reinterpret_cast<int*>(smem + kItemOff);  // the item Q belongs to
        const unsigned q_s = base + kQOff, k_s = base + kKOff, v_s = base + kVOff, b_s = base + kBOff;

        if (tid == 0) {
            mbar_init(base + kQFull, 1);
            mbar_init(base + kQEmpty, 4 * kConsumers);  // one arrival per consumer warp
#pragma unroll
            for (int s = 0; s < S; ++s) {
                mbar_init(base + kKFull + 8 * s, 1);
                mbar_init(base + kVFull + 8 * s, 1);
                mbar_init(base + kKEmpty + 8 * s, 4 * kConsumers);
                mbar_init(base + kVEmpty + 8 * s, 4 * kConsumers);
                if constexpr (kBias) {
                    mbar_init(base + kBFull + 8 * s, 1);
                    mbar_init(base + kBEmpty + 8 * s, 4 * kConsumers);
                }
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
                if constexpr (kBias) tma_prefetch(maps.bias);
            }
            BlockCtx ctx{reinterpret_cast<long long*>(smem + kScratchOff), lane, 32, 1};
            // The ring runs on across work items (end markers take a stage like tiles).
            RingPos<S> pos;
            int q_phase = 0;
            for (int n = 0;; ++n) {
                // The next item: from the counter (persistent grid), else this CTA's one.
                int item = a.work_counter ? 0 : (n == 0 ? WorkGrid::this_block() : items);
                if (a.work_counter && lane == 0) {
                    item = atomicAdd(a.work_counter, 1);
                    // Every CTA draws one ticket past the items, so this one is the last drawn
                    // of the launch: the counter goes back to 0 for the next launch.
                    if (item == items + (int)gridDim.x - 1) atomicExch(a.work_counter, 0);
                }
                item = __shfl_sync(0xffffffffu, item, 0);
                const bool done = item >= items;
                if (lane == 0) {
                    if (n > 0) mbar_wait(base + kQEmpty, q_phase ^ 1);  // the last item's Q is done
                    *item_slot = done ? -1 : item;  // kQFull's arrival releases it to the consumers
                    if (done) {
                        mbar_arrive(base + kQFull);
                    } else {
                        const CtaTile<E, BM> cta(a, order, kKvRowBytes, item, grid);
                        mbar_arrive_expect_tx(base + kQFull, BM * DQK * 2);
#pragma unroll
                        for (int c = 0; c < DQK / 64; ++c)
                            tma_load_4d(q_s + c * BM * kRowBytes, maps.q, 64 * c, cta.m0, cta.h, cta.b, base + kQFull);
                    }
                }
                __syncwarp();
                q_phase ^= 1;
                if (done) break;
                const CtaTile<E, BM> cta(a, order, kKvRowBytes, item, grid);
                const typename Variant::Head hd = Variant::make_head(p, cta.b, cta.h, cta.kvh);
                KvCursor<Variant, Params, BN> cursor(nk, cta.m0, cta.last_row(nq));
                int bias_row = 0;  // the item's first bias row among the tensor's rows
                if constexpr (kBias) bias_row = bias_plane_row(Variant::bias_tile(p, hd)) + cta.m0;
                for (;;) {
                    TileClass cls;
                    const int tile = cursor.advance(p, hd, ctx, cls);
                    const int stage = pos.stage, phase = pos.phase;
                    if (pos.reused()) mbar_wait(base + kKEmpty + 8 * stage, phase ^ 1);  // its last use is done
                    if (lane == 0) {
                        ring[2 * stage] = tile;
                        ring[2 * stage + 1] = static_cast<int>(cls);
                        if (tile < 0) {  // the end: no copies; both barriers still complete a phase
                            mbar_arrive(base + kKFull + 8 * stage);
                            // Not before V's (and the bias') last use is done: a parity wait cannot
                            // tell a barrier one phase ahead of the waiter from one three ahead.
                            if constexpr (kBias) {
                                if (pos.reused()) mbar_wait(base + kBEmpty + 8 * stage, phase ^ 1);
                                mbar_arrive(base + kBFull + 8 * stage);
                            }
                            if (pos.reused()) mbar_wait(base + kVEmpty + 8 * stage, phase ^ 1);
                            mbar_arrive(base + kVFull + 8 * stage);
                        } else {
                            mbar_arrive_expect_tx(base + kKFull + 8 * stage, kKStage);
#pragma unroll
                            for (int c = 0; c < DQK / 64; ++c)
                                tma_load_4d(k_s + stage * kKStage + c * BN * kRowBytes, maps.k, 64 * c, tile * BN,
                                            cta.kvh, cta.b, base + kKFull + 8 * stage);
                            // The bias before V: its buffer came back at tile j - S's hooks, V's
                            // only after tile j - S's P V, late in the consumers' last step.
                            if constexpr (kBias) {
                                if (pos.reused()) mbar_wait(base + kBEmpty + 8 * stage, phase ^ 1);
                                mbar_arrive_expect_tx(base + kBFull + 8 * stage, kBStage);
#pragma unroll
                                for (int c = 0; c < BN / 64; ++c)
                                    tma_load_2d(b_s + stage * kBStage + c * BM * kRowBytes, maps.bias, tile * BN + 64 * c,
                                                bias_row, base + kBFull + 8 * stage);
                            }
                            if (pos.reused()) mbar_wait(base + kVEmpty + 8 * stage, phase ^ 1);
                            mbar_arrive_expect_tx(base + kVFull + 8 * stage, kVStage);
#pragma unroll
                            for (int c = 0; c < DV / 64; ++c)
                                tma_load_4d(v_s + stage * kVStage + c * BN * kRowBytes, maps.v, 64 * c, tile * BN,
                                            cta.kvh, cta.b, base + kVFull + 8 * stage);
                        }
                    }
                    __syncwarp();
                    pos.advance();
                    if (tile < 0) break;
                }
            }
            return;
        }

        // ---- a consumer: warpgroup wg of 64 rows ----
        claim_registers<kConsumerRegs>();
        const int wg = warp / 4 - 1;
        const SLayout sl;
        const OLayout ol;
        const unsigned q_rows = q_s + wg * 64 * kRowBytes;  // this warpgroup's 64 rows of Q
        float o[1][kDT][4];
        // S = Q K^T of the tile in `stage`, issued (not waited for).
        auto issue_scores = [&](float (&s)[1][kNT][4], int stage) {
#pragma unroll
            for (int kk = 0; kk < DQK / 16; ++kk) {  // k16 steps within 64-column blocks
                const unsigned off = (kk % 4) * 32u;  // 16 columns = 32 bytes into the block
                const unsigned long long qd = smem_desc(q_rows + (kk / 4) * BM * kRowBytes + off, 16, 1024);
                const unsigned long long kd =
                    smem_desc(k_s + stage * kKStage + (kk / 4) * BN * kRowBytes + off, 16, 1024);
                Wgmma<E, BN>::template ss<0>(s[0], qd, kd, kk > 0 ? 1 : 0);
            }
            wgmma_commit();
        };
        // O += P V of the tile in `stage`, issued: 16 keys a step, V read N-contiguous.
        auto issue_pv = [&](const unsigned (&pa)[1][BN / 16][4], int stage) {
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) {
                const unsigned long long vd =
                    smem_desc(v_s + stage * kVStage + kk * 16 * kRowBytes, BN * kRowBytes, 1024);
                Wgmma<E, DV>::template rs<1>(o[0], pa[0][kk], vd, 1);
            }
            wgmma_commit();
        };
        // Ping-pong: the consumers take turns to issue their products, so one's softmax runs
        // while the other's products hold the tensor cores. Named barrier kTurn + c is
        // consumer c's turn; consumer 0 starts.
        // The score hooks of the tile in `stage` (its bias tile waited for and handed back).
        auto run_hooks = [&](const ScoreHooks<Variant, Params, SLayout::kRows>& hooks,
                             const typename Variant::Head& hd, float (&s)[1][kNT][4], int tile, TileClass cls,
                             const RingPos<S>& at) {
            if constexpr (kBias) {
                using T = typename BiasTileElementOf<Variant>::type;
                mbar_wait(base + kBFull + 8 * at.stage, at.phase);
                const TmaBias<T, BM> bias{reinterpret_cast<const unsigned*>(smem + kBOff + at.stage * kBStage)};
                hooks.template apply<BN>(p, hd, sl, s, tile * BN, cls, bias);
                __syncwarp();
                if (lane == 0) mbar_arrive(base + kBEmpty + 8 * at.stage);
            } else {
                hooks.template apply<BN>(p, hd, sl, s, tile * BN, cls);
            }
        };
        // Each turn's rendezvous: the waiting warpgroup and the one passing it on (whatever kConsumers).
        auto wait_turn = [&] { named_sync(kTurnBarrier + wg, 2 * 128); };
        auto pass_turn = [&] { named_arrive(kTurnBarrier + (wg + 1) % kConsumers, 2 * 128); };
        if (wg == kConsumers - 1) pass_turn();

        RingPos<S> pos;  // as the producer's: the consumers see every tile and end marker
        int q_phase = 0;
        for (;;) {
            mbar_wait(base + kQFull, q_phase);  // Q and the item it belongs to (-1: none left)
            q_phase ^= 1;
            const int item = *item_slot;
            if (item < 0) break;
            const CtaTile<E, BM> cta(a, order, kKvRowBytes, item, grid);
            const int b = cta.b, h = cta.h, m0 = cta.m0;
            const typename Variant::Head hd = Variant::make_head(p, b, h, cta.kvh);
            const ScoreHooks<Variant, Params, SLayout::kRows> hooks(p, hd, sl, m0, nq, nk, a.scale);
            OLayout::clear(o);
            OnlineSoftmax<SLayout::kRows, typename SLayout::RowReduce, Variant::kHasSink> softmax(
                Variant::kHasScoreMod ? kLog2e : a.scale_log2);
            if constexpr (Variant::kHasSink) softmax.set_sink(Variant::sink(p, h));

            float s[1][kNT][4];
            unsigned pa[1][BN / 16][4];  // P of the previous tile as A fragments
            float alpha[SLayout::kRows];
            // The first tile: its scores alone.
            mbar_wait(base + kKFull + 8 * pos.stage, pos.phase);
            int tile = ring[2 * pos.stage];
            TileClass cls = static_cast<TileClass>(ring[2 * pos.stage + 1]);
            if (tile >= 0) {
                wait_turn();
                wgmma_fence();
                issue_scores(s, pos.stage);
                pass_turn();
                wgmma_wait<0>();
                fence_regs(s[0]);
                __syncwarp();
                if (lane == 0) mbar_arrive(base + kKEmpty + 8 * pos.stage);  // its K buffer is free
                run_hooks(hooks, hd, s, tile, cls, pos);
#pragma unroll
                for (int r = 0; r < SLayout::kRows; ++r) softmax.update_row(sl, s, r);  // O is 0: no rescale
                sm80::pack_a<E>(s, pa);
                RingPos<S> prev = pos;  // tile j-1's stage and phase
                for (;;) {
                    // Tile j's scores and tile j-1's P V issued together; the softmax of tile j
                    // runs while P V is in flight, the rescale of O once it has landed.
                    pos.advance();
                    mbar_wait(base + kKFull + 8 * pos.stage, pos.phase);
                    tile = ring[2 * pos.stage];
                    cls = static_cast<TileClass>(ring[2 * pos.stage + 1]);
                    mbar_wait(base + kVFull + 8 * prev.stage, prev.phase);
                    if (tile < 0) {  // the end: the last tile's P V alone
                        fence_regs(o[0]);
                        fence_regs(pa[0]);
                        wait_turn();
                        wgmma_fence();
                        issue_pv(pa, prev.stage);
                        pass_turn();
                        wgmma_wait<0>();
                        fence_regs(o[0]);
                        __syncwarp();
                        if (lane == 0) mbar_arrive(base + kVEmpty + 8 * prev.stage);
                        break;
                    }
                    fence_regs(o[0]);
                    fence_regs(pa[0]);
                    wait_turn();
                    wgmma_fence();
                    issue_scores(s, pos.stage);
                    issue_pv(pa, prev.stage);
                    pass_turn();
                    wgmma_wait<1>();  // the scores (committed first)
                    fence_regs(s[0]);
                    __syncwarp();
                    if (lane == 0) mbar_arrive(base + kKEmpty + 8 * pos.stage);
                    run_hooks(hooks, hd, s, tile, cls, pos);
#pragma unroll
                    for (int r = 0; r < SLayout::kRows; ++r) alpha[r] = softmax.update_row(sl, s, r);
                    wgmma_wait<0>();  // P V
                    fence_regs(o[0]);
                    __syncwarp();
                    if (lane == 0) mbar_arrive(base + kVEmpty + 8 * prev.stage);  // tile j-1's V buffer is free
#pragma unroll
                    for (int r = 0; r < SLayout::kRows; ++r) softmax.rescale_row(ol, o, r, alpha[r]);
                    sm80::pack_a<E>(s, pa);
                    prev = pos;
                }
            }
            // `pos` holds the end marker: Q is read no more and the stage goes back whole
            // (its K and V barriers each completed a phase without copies).
            __syncwarp();
            if (lane == 0) {
                mbar_arrive(base + kQEmpty);
                mbar_arrive(base + kKEmpty + 8 * pos.stage);
                mbar_arrive(base + kVEmpty + 8 * pos.stage);
                if constexpr (kBias) mbar_arrive(base + kBEmpty + 8 * pos.stage);
            }
            pos.advance();
            store_forward_output<E, Variant>(p, hd, hooks, softmax, ol, o, b, h, m0);
        }
    }
};

}  // namespace sm90
}  // namespace attnjit
