// latent_gemm's main loop (backward/latent_gemm_args.h): C[z] = sum_k A[z] B[z] on mma.sync
// m16n8k16, fp32 sums in registers, rounded once to the element type on the store. The CTA
// owns a BM x BN tile of C and runs the whole sum (fixed order: the bits depend on the
// shapes only); kStages cp.async stages of BK = 64 along k. Each operand is staged with its
// unit-stride index as the 16-byte chunks of a swizzled row (sm80/swizzle.cuh):
//   A k-contiguous: [BM x BK], read by ldmatrix      A m-contiguous: [BK x BM], ldmatrix.trans
//   B k-contiguous: [BN x BK], read by ldmatrix      B n-contiguous: [BK x BN], ldmatrix.trans
// which of them is a run-time choice (the args block), uniform over the grid. The warps
// form a (kWarps / 2) x 2 grid of 32 x 64 C tiles.
#pragma once

#include "attnjit/backward/latent_gemm_args.h"
#include "attnjit/common/ptx.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/fragment.cuh"
#include "attnjit/sm80/gemm.cuh"
#include "attnjit/sm80/swizzle.cuh"

namespace attnjit {
namespace sm80 {

template <class E, int BM, int BN, int kWarps, int kStages>
struct LatentGemm {
    static constexpr int BK = 64;
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kWarpsM = kWarps / 2, WM = BM / kWarpsM, WN = BN / 2;
    static constexpr int kMF = WM / 16, kNT = WN / 8;
    static constexpr int kABytes = BM * BK * 2, kStageBytes = (BM + BN) * BK * 2;
    static constexpr int kSmemBytes = kStages * kStageBytes;
    static_assert(WN == 64 && WM % 16 == 0, "latent_gemm: warp tiles of 16 kMF x 64 (a warp's columns start on a swizzle group)");
    static_assert(BM % 8 == 0 && BN % 8 == 0 && kStages >= 2, "latent_gemm: tiles of whole chunks, two stages or more");

    __device__ static void run(const LatentGemmArgs& p, unsigned char* smem) {
        const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
        const int warp_m = warp / 2, warp_n = warp % 2;
        const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
        const int z_hi = blockIdx.z / p.z_lo_count, z_lo = blockIdx.z % p.z_lo_count;
        const E* a = static_cast<const E*>(p.a.data) + z_hi * p.a.z_hi + z_lo * p.a.z_lo;
        const E* b = static_cast<const E*>(p.b.data) + z_hi * p.b.z_hi + z_lo * p.b.z_lo;
        const unsigned base = ptx::smem_addr(smem);
        const int k_tiles = (p.k_lo_count + BK - 1) / BK, total = k_tiles * p.k_hi_count;

        auto load = [&](int t) {
            const int kh = t / k_tiles, k0 = (t % k_tiles) * BK;
            const unsigned st = base + (t % kStages) * kStageBytes;
            copy_operand<BM>(st, p.a, a, kh, k0, m0, p.m, p.k_lo_count, tid);
            copy_operand<BN>(st + kABytes, p.b, b, kh, k0, n0, p.n, p.k_lo_count, tid);
        };
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
            if (s < total) load(s);
            ptx::cp_async_commit();
        }

        float c[kMF][kNT][4];
        MmaCLayout<kMF, kNT>::clear(c);

        for (int t = 0; t < total; ++t) {
            ptx::cp_async_wait<kStages - 2>();
            block_sync();  // tile t is in; every warp is done with the stage tile t - 1 used
            if (t + kStages - 1 < total) load(t + kStages - 1);
            ptx::cp_async_commit();
            const unsigned st = base + (t % kStages) * kStageBytes;
            multiply(c, st, st + kABytes, p.a.k_contiguous != 0, p.b.k_contiguous != 0, warp_m, warp_n, lane);
        }
        ptx::cp_async_wait<0>();
        store(c, p, m0 + warp_m * WM, n0 + warp_n * WN, z_hi, z_lo, lane);
    }

private:
    // Rows [r0, r0 + R) of an operand (m of A, n of B; `count` of them exist) x k
    // [k0, k0 + BK) of k_hi run kh, zero-filled past either end.
    template <int R>
    __device__ __forceinline__ static void copy_operand(unsigned dst, const LatentGemmOperand& o, const E* g, int kh,
                                                        int k0, int r0, int count, int k_count, int tid) {
        g += kh * o.k_hi;
        if (o.k_contiguous)  // [R x BK]: rows are the operand's rows
            copy_chunks<R, BK / 8>(dst, g + r0 * o.row + k0, o.row, count - r0, (k_count - k0) / 8, g, tid);
        else  // [BK x R]: rows are k
            copy_chunks<BK, R / 8>(dst, g + k0 * o.k_lo + r0, o.k_lo, k_count - k0, (count - r0) / 8, g, tid);
    }

    // A ROWS x CPR-chunk tile at g (row stride `stride` elements) into the swizzled tile at
    // dst; chunks of rows >= rows or at columns >= chunks are zero-filled and not read.
    template <int ROWS, int CPR>
    __device__ __forceinline__ static void copy_chunks(unsigned dst, const E* g, long long stride, int rows, int chunks,
                                                       const E* safe, int tid) {
        constexpr int kChunks = ROWS * CPR;
        static_assert(kChunks % kThreads == 0, "latent_gemm: whole copy rounds");
#pragma unroll
        for (int it = 0; it < kChunks / kThreads; ++it) {
            const int ch = it * kThreads + tid, row = ch / CPR, col = ch % CPR;
            const bool ok = row < rows && col < chunks;
            ptx::cp_async_16(dst + (row * CPR + swz_chunk<CPR>(col, row & 7)) * 16, ok ? g + row * stride + col * 8 : safe,
                             ok);
        }
    }

    // c += the stage's A B over its BK columns of k, four k16 steps.
    __device__ __forceinline__ static void multiply(float (&c)[kMF][kNT][4], unsigned a_s, unsigned b_s, bool a_k,
                                                    bool b_k, int warp_m, int warp_n, int lane) {
        const LaneChunks la(lane >> 4, lane & 7), lb((lane >> 3) & 1, lane & 7);
        const int b_hi = (lane >> 3) & 1, r7 = lane & 7;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            unsigned af[kMF][4];
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf) {
                const int frag = warp_m * kMF + mf;  // 16-row fragment of the CTA tile
                if (a_k)
                    ptx::ldmatrix_x4(a_s + (frag * 16 + LaneRows::a_row(lane)) * (BK / 8) * 16 + pair_bytes<BK / 8>(la, kk),
                                     af[mf][0], af[mf][1], af[mf][2], af[mf][3]);
                else
                    ptx::ldmatrix_x4_trans(a_s + (kk * 16 + LaneRows::b_row(lane)) * (BM / 8) * 16 +
                                               swz_chunk<BM / 8>(2 * frag + b_hi, r7) * 16,
                                           af[mf][0], af[mf][1], af[mf][2], af[mf][3]);
            }
#pragma unroll
            for (int np = 0; np < kNT / 2; ++np) {
                unsigned b0, b1, b2, b3;
                if (b_k)
                    ptx::ldmatrix_x4(b_s + (warp_n * WN + np * 16 + LaneRows::b_row(lane)) * (BK / 8) * 16 +
                                         pair_bytes<BK / 8>(lb, kk),
                                     b0, b1, b2, b3);
                else
                    ptx::ldmatrix_x4_trans(b_s + (kk * 16 + LaneRows::a_row(lane)) * (BN / 8) * 16 + warp_n * 128 +
                                               pair_bytes<BN / 8>(la, np),
                                           b0, b1, b2, b3);
#pragma unroll
                for (int mf = 0; mf < kMF; ++mf) {
                    ptx::Mma16816<E>::run(c[mf][2 * np], af[mf], b0, b1);
                    ptx::Mma16816<E>::run(c[mf][2 * np + 1], af[mf], b2, b3);
                }
            }
        }
    }

    // The physical byte offset of logical chunk pair i (chunks 2i + hi) for a lane of row
    // phase r7, in a row of CPR chunks (whole groups of 8).
    template <int CPR>
    __device__ __forceinline__ static int pair_bytes(const LaneChunks& lc, int i) {
        static_assert(CPR % 8 == 0, "latent_gemm: rows of whole 8-chunk swizzle groups");
        return (i / 4) * 128 + lc.xa[i % 4];
    }

    // The warp's C tile, rounded to E, rows from m and columns from n (both in range checks:
    // n is a multiple of 8, so a pair never straddles the end).
    __device__ __forceinline__ static void store(const float (&c)[kMF][kNT][4], const LatentGemmArgs& p, int m, int n,
                                                 int z_hi, int z_lo, int lane) {
        E* out = static_cast<E*>(p.c) + z_hi * p.c_z_hi + z_lo * p.c_z_lo;
        const int g = lane >> 2, col = 2 * (lane & 3);
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int row = m + mf * 16 + hi * 8 + g;
                if (row >= p.m) continue;
#pragma unroll
                for (int nt = 0; nt < kNT; ++nt) {
                    const int cn = n + nt * 8 + col;
                    if (cn < p.n)
                        *reinterpret_cast<unsigned*>(out + row * p.c_row + cn) =
                            FromFloat<E>::pack2(c[mf][nt][2 * hi], c[mf][nt][2 * hi + 1]);
                }
            }
    }
};

}  // namespace sm80
}  // namespace attnjit
