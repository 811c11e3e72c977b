// Forward main loop for fp32 inputs: plain FFMA (SIMT) arithmetic, no tensor cores, so
// the result is fp32-accurate (TF32 would not be). Correctness, not speed, is the goal.
// Data movement and products only: hooks, online softmax, epilogue and CTA order are the
// shared components of common/ (see sm80/mainloop.cuh); the register layouts are in
// simt/fragment.cuh.
//
// Warp w owns query rows [w * RPW, (w + 1) * RPW) of the CTA tile and processes them one
// at a time: lane j computes the scores of keys j, j + 32, ...; the warp reduces the row
// max; the probabilities go through a per-warp shared row P; lane c accumulates output
// columns c, c + 32, ...
// Shared memory (see smem_bytes in common/kernel_config.h):
//   scratch | Q [BM x (DQK+4)] | K [BN x (DQK+4)] | V [BN x DV] | P [W x BN]   (floats)
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
#include "attnjit/simt/fragment.cuh"

namespace attnjit {
namespace simt {

// kDqkReal, kDvReal: the real head dims; the tiles use DQK, DV (tile_head_dim), with the
// columns past the real dims zero-filled on load and not stored (as in sm80/mainloop.cuh).
template <int kDqkReal, int kDvReal, int BM, int BN, int W>
struct Mainloop {
    static constexpr int DQK = tile_head_dim(kDqkReal), DV = tile_head_dim(kDvReal);
    static constexpr int kThreads = W * 32;
    static constexpr int kRPW = BM / W;
    static constexpr int kJ = BN / 32;
    static constexpr int kC = DV / 32;
    static constexpr int kQP = DQK + kSimtRowPad;  // row pitch of Q and K, floats

    static constexpr int kQOff = scratch_bytes(W);
    static constexpr int kKOff = kQOff + BM * kQP * 4;
    static constexpr int kVOff = kKOff + BN * kQP * 4;
    static constexpr int kPOff = kVOff + BN * DV * 4;
    static constexpr int kSmemBytes = kPOff + W * BN * 4;
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::forward, MainloopKind::simt, ElemKind::f32, kDqkReal,
                                                        kDvReal, TileConfig{BM, BN, W, 1}}),
                  "simt::Mainloop shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(BM % W == 0, "fp32: block_m must be a multiple of warps");
    static_assert(BN % 32 == 0, "fp32: block_n must be a multiple of 32");

    // Structural Variant features this loop implements (check_variant in common/variant.cuh).
    static constexpr const char* kName = "simt";
    static constexpr bool kSupportsOutputTransform = true;
    static constexpr bool kSupportsScoreTileTransform = false;  // needs the tile staged in smem

    using SRow = SimtScoreRow<kJ>;          // the scores of one row, then its P
    using OLayout = SimtAccLayout<kRPW, kC, kDvReal>;  // O accumulator (stores the real columns)

    // Columns >= kCols (the real head dim) are zero-filled and not read.
    template <int ROWS, int D, int PITCH, int kCols>
    __device__ __forceinline__ static void load_tile(unsigned dst, const float* g, long long stride, int valid,
                                                     const float* safe, int tid) {
        constexpr int CPR = D / 4;
        constexpr int kChunks = ROWS * CPR;
        constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
#pragma unroll
        for (int it = 0; it < kIters; ++it) {
            const int ch = it * kThreads + tid;
            if (kChunks % kThreads == 0 || ch < kChunks) {
                const int row = ch / CPR, c = ch % CPR;
                const bool ok = row < valid && (kCols == D || c < kCols / 4);
                const float* src = ok ? g + row * stride + c * 4 : safe;
                ptx::cp_async_16(dst + (row * PITCH + c * 4) * 4, src, ok);
            }
        }
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run(const Params& p, unsigned char* smem) {
        static_assert(Variant::kScoreConvRows == 0, "the simt loop has no score convolution (sm80/score_conv.cuh)");
        const ForwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int nq = a.q_len, nk = a.kv_len;
        const CtaTile<float, BM> cta(a, kOrderPerHead, (DQK + DV) * 4);
        const int b = cta.b, h = cta.h, m0 = cta.m0;
        const float *qg = cta.q, *kg = cta.k, *vg = cta.v;
        const long long ksn = a.k_stride[2], vsn = a.v_stride[2];

        const unsigned sbase = ptx::smem_addr(smem);
        const float* qs = reinterpret_cast<const float*>(smem + kQOff);
        const float* ks = reinterpret_cast<const float*>(smem + kKOff);
        const float* vs = reinterpret_cast<const float*>(smem + kVOff);
        float* ps = reinterpret_cast<float*>(smem + kPOff) + warp * BN;

        load_tile<BM, DQK, kQP, kDqkReal>(sbase + kQOff, qg, a.q_stride[2], nq - m0, static_cast<const float*>(a.q), tid);
        ptx::cp_async_commit();

        const typename Variant::Head hd = Variant::make_head(p, b, h, cta.kvh);
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        KvCursor<Variant, Params, BN> cursor(nk, m0, cta.last_row(nq));

        const OLayout ol(warp, lane);
        const ScoreHooks<Variant, Params, OLayout::kRows> hooks(p, hd, ol, m0, nq, nk, a.scale);

        float o[kRPW][kC];
        OLayout::clear(o);
        OnlineSoftmax<OLayout::kRows, typename OLayout::RowReduce, Variant::kHasSink> softmax(
            Variant::kHasScoreMod ? kLog2e : a.scale_log2);
        if constexpr (Variant::kHasSink) softmax.set_sink(Variant::sink(p, h));

        TileClass cls;
        for (int tile = cursor.advance(p, hd, ctx, cls); tile >= 0; tile = cursor.advance(p, hd, ctx, cls)) {
            block_sync();  // everyone is done with the previous K, V
            const int k0 = tile * BN;
            load_tile<BN, DQK, kQP, kDqkReal>(sbase + kKOff, kg + (long long)k0 * ksn, ksn, nk - k0, kg, tid);
            load_tile<BN, DV, DV, kDvReal>(sbase + kVOff, vg + (long long)k0 * vsn, vsn, nk - k0, vg, tid);
            ptx::cp_async_commit();
            ptx::cp_async_wait<0>();
            block_sync();

#pragma unroll
            for (int i = 0; i < kRPW; ++i) {
                const float* qrow = qs + (warp * kRPW + i) * kQP;
                float sv[kJ];
#pragma unroll
                for (int jj = 0; jj < kJ; ++jj) {
                    const float* krow = ks + (lane + 32 * jj) * kQP;
                    float acc0 = 0.f, acc1 = 0.f;
#pragma unroll 8
                    for (int d = 0; d < DQK; d += 4) {
                        const Float4 qv = *reinterpret_cast<const Float4*>(qrow + d);
                        const Float4 kv = *reinterpret_cast<const Float4*>(krow + d);
                        acc0 += qv.x * kv.x;
                        acc1 += qv.y * kv.y;
                        acc0 += qv.z * kv.z;
                        acc1 += qv.w * kv.w;
                    }
                    sv[jj] = acc0 + acc1;
                }
                const SRow sr{lane, i, warp * kRPW};
                hooks.template apply<BN>(p, hd, sr, sv, k0, cls);
                softmax.rescale_row(ol, o, i, softmax.update_row(sr, sv, i));
#pragma unroll
                for (int jj = 0; jj < kJ; ++jj) ps[lane + 32 * jj] = sv[jj];
                warp_sync();
#pragma unroll
                for (int c = 0; c < kC; ++c) {
                    float acc = o[i][c];
                    const float* vcol = vs + lane + 32 * c;
#pragma unroll 8
                    for (int j = 0; j < BN; j += 4) {
                        const Float4 pv = *reinterpret_cast<const Float4*>(ps + j);
                        acc += pv.x * vcol[(j + 0) * DV];
                        acc += pv.y * vcol[(j + 1) * DV];
                        acc += pv.z * vcol[(j + 2) * DV];
                        acc += pv.w * vcol[(j + 3) * DV];
                    }
                    o[i][c] = acc;
                }
                warp_sync();
            }
        }

        store_forward_output<float, Variant>(p, hd, hooks, softmax, ol, o, b, h, m0);
    }
};

}  // namespace simt
}  // namespace attnjit
