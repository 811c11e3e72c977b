// Forward main loop for fp32 inputs: plain FFMA (SIMT) arithmetic, no tensor cores, so
// the result is fp32-accurate (TF32 would not be). Correctness, not speed, is the goal.
//
// Warp w owns query rows [w * RPW, (w + 1) * RPW) of the CTA tile and processes them one
// at a time: lane j computes the scores of keys j, j + 32, ...; the warp reduces the row
// max; the probabilities go through a per-warp shared row P; lane c accumulates output
// columns c, c + 32, ...
// Shared memory (see smem_bytes in common/kernel_config.h):
//   scratch | Q [BM x (DQK+4)] | K [BN x (DQK+4)] | V [BN x DV] | P [W x BN]   (floats)
#pragma once

#include "attnjit/cta_operands.cuh"
#include "attnjit/forward/args.h"
#include "attnjit/intervals.cuh"
#include "attnjit/kv_schedule.cuh"
#include "attnjit/ptx.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/types.cuh"

namespace attnjit {

template <int DQK, int DV, int BM, int BN, int W>
struct MainloopSimt {
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
    static_assert(kSmemBytes == smem_bytes(KernelConfig{KernelKind::forward, MainloopKind::simt, ElemKind::f32, DQK,
                                                        DV, TileConfig{BM, BN, W, 1}}),
                  "MainloopSimt shared-memory layout disagrees with smem_bytes in common/kernel_config.h");
    static_assert(BM % W == 0, "fp32: block_m must be a multiple of warps");
    static_assert(BN % 32 == 0, "fp32: block_n must be a multiple of 32");

    template <int ROWS, int D, int PITCH>
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
                const bool ok = row < valid;
                const float* src = ok ? g + row * stride + c * 4 : safe;
                ptx::cp_async_16(dst + (row * PITCH + c * 4) * 4, src, ok);
            }
        }
    }

    template <class Variant, class Params>
    __device__ __forceinline__ static void run(const Params& p, unsigned char* smem) {
        const ForwardArgs& a = p.args;
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int m_block = gridDim.x - 1 - blockIdx.x;
        const int h = blockIdx.y, b = blockIdx.z;
        const int kvh = h / a.group;
        const int nq = a.q_len, nk = a.kv_len;
        const int m0 = m_block * BM;

        const CtaOperands<float> ops(a, b, h, kvh, m0);
        const float *qg = ops.q, *kg = ops.k, *vg = ops.v;
        const long long ksn = a.k_stride[2], vsn = a.v_stride[2];

        const unsigned sbase = ptx::smem_addr(smem);
        const float* qs = reinterpret_cast<const float*>(smem + kQOff);
        const float* ks = reinterpret_cast<const float*>(smem + kKOff);
        const float* vs = reinterpret_cast<const float*>(smem + kVOff);
        float* ps = reinterpret_cast<float*>(smem + kPOff) + warp * BN;

        load_tile<BM, DQK, kQP>(sbase + kQOff, qg, a.q_stride[2], nq - m0, static_cast<const float*>(a.q), tid);
        ptx::cp_async_commit();

        const typename Variant::Head hd = Variant::make_head(p, b, h, kvh);
        BlockCtx ctx{reinterpret_cast<long long*>(smem), tid, kThreads};
        KvCursor<Variant, Params, BN> cursor(nk, m0, (m0 + BM < nq ? m0 + BM : nq) - 1);

        int qc[kRPW];
        typename Variant::Row rw[kRPW];
#pragma unroll
        for (int i = 0; i < kRPW; ++i) {
            const int q = m0 + warp * kRPW + i;
            qc[i] = q < nq ? q : nq - 1;
            rw[i] = Variant::make_row(p, hd, qc[i]);
        }

        float o[kRPW][kC], m_run[kRPW], l_run[kRPW];
#pragma unroll
        for (int i = 0; i < kRPW; ++i) {
            m_run[i] = neg_inf();
            l_run[i] = 0.f;
#pragma unroll
            for (int c = 0; c < kC; ++c) o[i][c] = 0.f;
        }
        const float scl = Variant::kHasScoreMod ? kLog2e : a.scale_log2;

        TileClass cls;
        for (int tile = cursor.advance(p, hd, ctx, cls); tile >= 0; tile = cursor.advance(p, hd, ctx, cls)) {
            block_sync();  // everyone is done with the previous K, V
            const int k0 = tile * BN;
            load_tile<BN, DQK, kQP>(sbase + kKOff, kg + (long long)k0 * ksn, ksn, nk - k0, kg, tid);
            load_tile<BN, DV, DV>(sbase + kVOff, vg + (long long)k0 * vsn, vsn, nk - k0, vg, tid);
            ptx::cp_async_commit();
            ptx::cp_async_wait<0>();
            block_sync();

            const bool edge = k0 + BN > nk;
            const bool need_mask = Variant::kHasMask && cls == TileClass::kPartial;
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
#pragma unroll
                for (int jj = 0; jj < kJ; ++jj) {
                    const int k = k0 + lane + 32 * jj;
                    if constexpr (Variant::kHasScoreMod) {
                        const int kc = k < nk ? k : nk - 1;
                        sv[jj] = Variant::score_mod(p, hd, rw[i], sv[jj] * a.scale, qc[i], kc);
                    }
                    if (edge || need_mask) {
                        bool keep = k < nk;
                        if constexpr (Variant::kHasMask) {
                            if (keep && need_mask) keep = Variant::mask(p, hd, rw[i], qc[i], k);
                        }
                        if (!keep) sv[jj] = neg_inf();
                    }
                }
                float mx = m_run[i];
#pragma unroll
                for (int jj = 0; jj < kJ; ++jj) mx = fmax_(mx, sv[jj]);
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) mx = fmax_(mx, shfl_xor(mx, off));
                const float ms = mx == neg_inf() ? 0.f : mx * scl;
                const float alpha = fast_exp2(m_run[i] * scl - ms);
                m_run[i] = mx;
                float rs = 0.f;
#pragma unroll
                for (int jj = 0; jj < kJ; ++jj) {
                    const float pv = fast_exp2(sv[jj] * scl - ms);
                    ps[lane + 32 * jj] = pv;
                    rs += pv;
                }
                l_run[i] = l_run[i] * alpha + rs;  // per-lane partial sum; reduced at the end
                warp_sync();
#pragma unroll
                for (int c = 0; c < kC; ++c) {
                    float acc = o[i][c] * alpha;
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

        float* og = static_cast<float*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1];
#pragma unroll
        for (int i = 0; i < kRPW; ++i) {
            float l = l_run[i];
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) l += shfl_xor(l, off);
            const float inv = l > 0.f ? 1.f / l : 0.f;
            const int q = m0 + warp * kRPW + i;
            if (q < nq) {
                float* orow = og + q * a.o_stride[2];
#pragma unroll
                for (int c = 0; c < kC; ++c) orow[lane + 32 * c] = o[i][c] * inv;
                if (a.lse != nullptr && lane == 0)
                    a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + q * a.lse_stride[2]] =
                        l > 0.f ? (m_run[i] * scl + fast_log2(l)) * kLn2 : neg_inf();
            }
        }
    }
};

}  // namespace attnjit
