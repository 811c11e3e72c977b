// Per-query-row work of the backward, by warps over rows of a query tile:
//   backward_row_stats   LSE2 = LSE log2(e) (+inf where LSE = -inf) and
//                        Delta = rowsum(dO * O) of one warp's rows, into shared memory
//                        (when given) and the workspace BackwardArgs::stats;
//   BackwardRows         the two per-row kernels of the fast backward: backward_stats
//                        (the statistics, and the fp32 dQ sums zeroed) and
//                        backward_dq_convert (dQ = scale * the sums, in the dtype of q;
//                        with a reciprocal band also dK and d alpha, finish_band).
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/backward_scores.cuh"
#include "attnjit/common/band_alpha_grad.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/row_reduce.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

// Delta of rows [r0, r0 + kRows) of a tile (rows >= valid give 0), by one warp: each lane
// sums pairs of columns, then a warp reduction. All the loads come first, so they are in
// flight together.
template <class E, int DV, int kRows>
__device__ __forceinline__ void warp_row_dots(float (&out)[kRows], const E* o, long long o_stride, const E* d_o,
                                              long long do_stride, int r0, int valid, int lane) {
    constexpr int kPairs = (DV + 63) / 64;  // column pairs a lane reads per row
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
        const int r = r0 + i;
        float acc = 0.f;
        if (r < valid) {
#pragma unroll
            for (int j = 0; j < kPairs; ++j) {
                const int d = 2 * (lane + 32 * j);
                if (DV % 64 == 0 || d < DV) {
                    const E* op = o + r * o_stride + d;
                    const E* gp = d_o + r * do_stride + d;
                    acc += to_float(op[0]) * to_float(gp[0]) + to_float(op[1]) * to_float(gp[1]);
                }
            }
        }
        out[i] = acc;
    }
#pragma unroll
    for (int i = 0; i < kRows; ++i) out[i] = WarpRowReduce::sum(out[i]);
}

// Rows [r0, r0 + kRows) of query tile m0 of head h (kRows <= 32): lane i handles row
// r0 + i. lse2_s / delta_s (tile-relative, may be null) also get padding rows (+inf, 0).
template <class E, int DV, int kRows>
__device__ __forceinline__ void backward_row_stats(const BackwardArgs& a, float* lse2_s, float* delta_s, int b, int h,
                                                   int m0, int r0, int lane) {
    static_assert(kRows <= 32, "one row per lane");
    const E* o = static_cast<const E*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1] + m0 * a.o_stride[2];
    const E* d_o = static_cast<const E*>(a.delta_d_o) + b * a.delta_do_stride[0] + h * a.delta_do_stride[1] +
                   m0 * a.delta_do_stride[2];
    float delta[kRows];
    warp_row_dots<E, DV, kRows>(delta, o, a.o_stride[2], d_o, a.delta_do_stride[2], r0, a.q_len - m0, lane);
    const long long plane = (long long)a.batch * a.q_heads * a.q_len;
    float* ws = a.stats + ((long long)b * a.q_heads + h) * a.q_len;
    if (lane < kRows) {
        const int r = r0 + lane, q = m0 + r;
        float d = delta[0];
#pragma unroll
        for (int i = 1; i < kRows; ++i) d = lane == i ? delta[i] : d;
        const float l2 = q < a.q_len
                             ? backward_lse2(a.lse[b * a.lse_stride[0] + h * a.lse_stride[1] + q * a.lse_stride[2]])
                             : -neg_inf();
        if (lse2_s) {
            lse2_s[r] = l2;
            delta_s[r] = d;
        }
        if (q < a.q_len) {
            ws[q] = l2;
            ws[plane + q] = d;
        }
    }
}

// The per-row kernels: grid (ceil(Nq / BM), Hq, B), W warps of BM / W rows each.
template <class E, int DQK, int DV, int BM, int W>
struct BackwardRows {
    static constexpr int kThreads = W * 32;
    static constexpr int kWarpRows = BM / W;
    static constexpr int kSmemBytes = 0;
    static_assert(BM % W == 0 && kWarpRows <= 32, "block_m: a multiple of warps, at most 32 rows per warp");

    static constexpr const char* kName = "backward rows";
    static constexpr bool kSupportsOutputTransform = false;
    static constexpr bool kSupportsScoreTileTransform = false;

    __device__ __forceinline__ static float* accum_row(const BackwardArgs& a, int b, int h, int q) {
        return a.dq_accum + (((long long)b * a.q_heads + h) * a.q_len + q) * DQK;
    }

    // Four columns (a multiple of 4 from an aligned row) as E, in two 32-bit stores.
    __device__ __forceinline__ static void store4(E* out, float x, float y, float z, float w) {
        unsigned* o = reinterpret_cast<unsigned*>(out);
        o[0] = FromFloat<E>::pack2(x, y);
        o[1] = FromFloat<E>::pack2(z, w);
    }

    // With an output gate: d_o = delta_d_o * sigmoid(gate) (the workspace every later kernel
    // reads) and d_gate = delta_d_o * o * (1 - sigmoid(gate)) (o being the gated output
    // sigmoid(gate) * O), for the tile's rows.
    __device__ __forceinline__ static void gate_rows(const BackwardArgs& a, int b, int h, int m0, int rows) {
        const E* g = static_cast<const E*>(a.gate) + b * a.gate_stride[0] + h * a.gate_stride[1];
        const E* dout = static_cast<const E*>(a.delta_d_o) + b * a.delta_do_stride[0] + h * a.delta_do_stride[1];
        const E* o = static_cast<const E*>(a.o) + b * a.o_stride[0] + h * a.o_stride[1];
        E* d_o = static_cast<E*>(const_cast<void*>(a.d_o)) + b * a.do_stride[0] + h * a.do_stride[1];
        E* dg = static_cast<E*>(a.d_gate) + b * a.d_gate_stride[0] + h * a.d_gate_stride[1];
        for (int i = threadIdx.x; i < rows * DV; i += kThreads) {
            const int q = m0 + i / DV, d = i % DV;
            const float sig = 1.f / (1.f + __expf(-to_float(g[q * a.gate_stride[2] + d * a.gate_stride[3]])));
            const float up = to_float(dout[q * a.delta_do_stride[2] + d]);
            d_o[q * a.do_stride[2] + d] = FromFloat<E>::cvt(up * sig);
            if (a.d_gate != nullptr)
                dg[q * a.d_gate_stride[2] + d * a.d_gate_stride[3]] =
                    FromFloat<E>::cvt(up * to_float(o[q * a.o_stride[2] + d]) * (1.f - sig));
        }
    }

    // backward_stats: the statistics of the tile's rows, their dQ sums zeroed (fused
    // backward), and the gate's work (common to both backwards: it runs first).
    template <class Variant, class Params>
    __device__ __forceinline__ static void run_stats(const Params& p, unsigned char*) {
        const BackwardArgs& a = p.args;
        const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
        const int m0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
        backward_row_stats<E, DV, kWarpRows>(a, nullptr, nullptr, b, h, m0, warp * kWarpRows, lane);
        const int rows = (a.q_len - m0 < BM ? a.q_len - m0 : BM);
        if (a.gate != nullptr) gate_rows(a, b, h, m0, rows);
        if (a.dq_accum == nullptr) return;  // the two-pass backward
        Float4* z = reinterpret_cast<Float4*>(accum_row(a, b, h, m0));
        for (int i = threadIdx.x; i < rows * DQK / 4; i += kThreads) z[i] = Float4{0.f, 0.f, 0.f, 0.f};
    }

    // backward_dq_convert: dQ = scale * the sums.
    template <class Variant, class Params>
    __device__ __forceinline__ static void run_dq_convert(const Params& p, unsigned char*) {
        const BackwardArgs& a = p.args;
        const int m0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z;
        if constexpr (Variant::kScoreConvRows > 0) {
            if (blockIdx.x == 0 && b == 0) sum_score_conv_grad<Variant>(a, h);
            if (b >= a.batch) return;  // launched for dtheta alone (no batch)
        }
        const int rows = (a.q_len - m0 < BM ? a.q_len - m0 : BM);
        if constexpr (Variant::kRecipBandWidth >= 0) {
            finish_band<Variant>(p, b, h, m0, rows);
            return;
        }
        const Float4* src = reinterpret_cast<const Float4*>(accum_row(a, b, h, m0));
        E* dq = static_cast<E*>(a.dq) + b * a.dq_stride[0] + h * a.dq_stride[1] + m0 * a.dq_stride[2];
        for (int i = threadIdx.x; i < rows * DQK / 4; i += kThreads) {
            const Float4 v = src[i];
            const int r = i / (DQK / 4), c = 4 * (i % (DQK / 4));
            store4(dq + r * a.dq_stride[2] + c, a.scale * v.x, a.scale * v.y, a.scale * v.z, a.scale * v.w);
        }
    }

private:
    // The reciprocal band after backward_fused (backward/args.h), for the tile's rows of head
    // h, four columns a thread at a time: dq = scale (dq_accum + band_dq), and the CTA's sum of
    // <k_i, U_i> for d alpha_h (common/band_alpha_grad.cuh); dk = scale (band_dk_sums + sum_h
    // alpha_h U_h) over the heads of a kv group in order (Nq == Nk), in the same pass without
    // GQA, else by the group's first head.
    template <class Variant, class Params>
    __device__ __forceinline__ static void finish_band(const Params& p, int b, int h, int m0, int rows) {
        const BackwardArgs& a = p.args;
        const int kvh = h / a.group;
        const long long row0 = ((long long)b * a.q_heads + h) * a.q_len + m0;
        const long long sums0 = (((long long)b * a.kv_heads + kvh) * a.kv_len + m0) * DQK;
        const E* k = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1] + m0 * a.k_stride[2];
        E* dq = static_cast<E*>(a.dq) + b * a.dq_stride[0] + h * a.dq_stride[1] + m0 * a.dq_stride[2];
        E* dk = static_cast<E*>(a.dk) + b * a.dk_stride[0] + kvh * a.dk_stride[1] + m0 * a.dk_stride[2];
        const Float4* accum = reinterpret_cast<const Float4*>(a.dq_accum + row0 * DQK);
        const Float4* band_dq = reinterpret_cast<const Float4*>(a.band_dq + row0 * DQK);
        const Float4* u = reinterpret_cast<const Float4*>(a.band_dk + row0 * DQK);
        const Float4* sums = reinterpret_cast<const Float4*>(a.band_dk_sums + sums0);
        const bool mha = a.group == 1, want_alpha = a.d_alpha != nullptr;  // K is read for d alpha only
        const float alpha = Variant::recip_band_alpha(p, h), scale = a.scale;
        float alpha_part = 0.f;
        const int n = rows * DQK / 4;
        // kBatch chunks a thread at a time: every load of the batch first, so they are in flight together.
        constexpr int kBatch = 4;
        for (int i0 = threadIdx.x; i0 < n; i0 += kBatch * kThreads) {
            Float4 s[kBatch], t[kBatch], uu[kBatch], d[kBatch];
            unsigned kp[kBatch][2];
#pragma unroll
            for (int x = 0; x < kBatch; ++x) {
                const int i = i0 + x * kThreads;
                if (i < n) {
                    const int r = i / (DQK / 4), c = 4 * (i % (DQK / 4));
                    s[x] = accum[i];
                    t[x] = band_dq[i];
                    uu[x] = u[i];
                    if (mha) d[x] = sums[i];
                    if (want_alpha) {
                        const unsigned* kr = reinterpret_cast<const unsigned*>(k + r * a.k_stride[2] + c);
                        kp[x][0] = kr[0];
                        kp[x][1] = kr[1];
                    }
                }
            }
#pragma unroll
            for (int x = 0; x < kBatch; ++x) {
                const int i = i0 + x * kThreads;
                if (i < n) {
                    const int r = i / (DQK / 4), c = 4 * (i % (DQK / 4));
                    store4(dq + r * a.dq_stride[2] + c, scale * (s[x].x + t[x].x), scale * (s[x].y + t[x].y),
                           scale * (s[x].z + t[x].z), scale * (s[x].w + t[x].w));
                    if (want_alpha)
                        alpha_part += unpack_lo<E>(kp[x][0]) * uu[x].x + unpack_hi<E>(kp[x][0]) * uu[x].y +
                                      unpack_lo<E>(kp[x][1]) * uu[x].z + unpack_hi<E>(kp[x][1]) * uu[x].w;
                    if (mha)
                        store4(dk + r * a.dk_stride[2] + c, scale * (d[x].x + alpha * uu[x].x),
                               scale * (d[x].y + alpha * uu[x].y), scale * (d[x].z + alpha * uu[x].z),
                               scale * (d[x].w + alpha * uu[x].w));
                }
            }
        }
        if (!mha && h % a.group == 0) {
            const long long head = (long long)a.q_len * DQK / 4;  // one head's U, in Float4
            for (int i = threadIdx.x; i < rows * DQK / 4; i += kThreads) {
                const int r = i / (DQK / 4), c = 4 * (i % (DQK / 4));
                Float4 d = sums[i];
                for (int g = 0; g < a.group; ++g) {
                    const float al = Variant::recip_band_alpha(p, h + g);
                    const Float4 ug = u[i + g * head];
                    d.x += al * ug.x;
                    d.y += al * ug.y;
                    d.z += al * ug.z;
                    d.w += al * ug.w;
                }
                store4(dk + r * a.dk_stride[2] + c, scale * d.x, scale * d.y, scale * d.z, scale * d.w);
            }
        }
        if (want_alpha) {
            __shared__ __align__(16) unsigned char scratch[4 * (4 + W)];
            store_band_alpha_sum<W>(a, scratch, alpha_part, b, h);
        }
    }

    // The score convolution's dtheta for head h: the per-(batch, key tile) sums of
    // backward_fused added in that order, times the softmax scale (the fused loop's dC is
    // the gradient of the scaled scores).
    template <class Variant>
    __device__ __forceinline__ static void sum_score_conv_grad(const BackwardArgs& a, int h) {
        constexpr int kTaps = Variant::kScoreConvRows * Variant::kScoreConvCols;
        if (a.d_score_conv == nullptr) return;
        for (int e = threadIdx.x; e < kTaps; e += kThreads) {
            float s = 0.f;
            for (int b = 0; b < a.batch; ++b) {
                const float* part = a.score_conv_partials + ((long long)b * a.q_heads + h) * a.score_conv_key_tiles * kTaps;
                for (int t = 0; t < a.score_conv_key_tiles; ++t) s += part[t * kTaps + e];
            }
            const int ta = e / Variant::kScoreConvCols, tb = e - ta * Variant::kScoreConvCols;
            using T = typename Variant::ScoreConvElement;
            static_cast<T*>(a.d_score_conv)[h * a.d_score_conv_stride[0] + ta * a.d_score_conv_stride[1] +
                                            tb * a.d_score_conv_stride[2]] = FromFloat<T>::cvt(a.scale * s);
        }
    }
};

}  // namespace attnjit
