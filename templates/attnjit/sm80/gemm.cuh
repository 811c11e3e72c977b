// Warp-level tile products of the sm80 backward main loops, on mma.sync m16n8k16 with fp32
// accumulators in the MmaCLayout of sm80/fragment.cuh. Operands in shared memory are
// row-major tiles of 16-byte chunks, XOR-swizzled by sm80/swizzle.cuh; the per-lane
// ldmatrix row addresses are those of LaneRows below.
//
//   gemm_nt:  C[16 kMF x 8 kNT] += A B^T, A's rows (this warp's 16 kMF) and B's rows
//             (kNT * 8) both K-contiguous in shared memory (S = Q K^T, dP = dO V^T, ...)
//   gemm_rn:  C[16 kMF x 8 kNT] += A B, A in registers (a C fragment packed by
//             pack_a, or load_a_trans), B a [K x 8 kNT] tile, N-contiguous in shared
//             memory, read through ldmatrix.trans (dV += P^T dO, dQ += dS K, ...)
//   gemm_nn:  C[16 kMF x 8 kNT] += A B, A's rows K-contiguous as in gemm_nt, B as in
//             gemm_rn (dQ = dS K with dS in shared memory)
//   load_a_trans: the A fragments of X^T for a tile X [K x M] stored M-contiguous
//             (P^T, dS^T from P, dS)
#pragma once

#include "attnjit/common/ptx.cuh"
#include "attnjit/common/types.cuh"
#include "attnjit/sm80/swizzle.cuh"

namespace attnjit {
namespace sm80 {

// The byte offset of a lane's first ldmatrix row in a tile of CPR chunks per row, and the
// lane's chunk pattern. An A operand (and a B operand read transposed) is read as
// matrices (rows 0-7, chunk lo) (rows 8-15, lo) (0-7, hi) (8-15, hi); a B operand read
// as it is as (n 0-7, k lo) (n 0-7, hi) (n 8-15, lo) (n 8-15, hi).
struct LaneRows {
    __device__ __forceinline__ static int a_row(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
    __device__ __forceinline__ static LaneChunks a_chunks(int lane) { return LaneChunks(lane >> 4, lane & 7); }
    __device__ __forceinline__ static int b_row(int lane) { return (lane & 7) + (lane >> 4) * 8; }
    __device__ __forceinline__ static LaneChunks b_chunks(int lane) { return LaneChunks((lane >> 3) & 1, lane & 7); }
};

template <class E, int kMF, int kNT, int kKS, int kCprA, int kCprB, int KK = 0>
__device__ __forceinline__ void gemm_nt(float (&c)[kMF][kNT][4], unsigned a_ld, unsigned b_ld, const LaneChunks& la,
                                        const LaneChunks& lb) {
    static_assert(kNT % 2 == 0, "gemm_nt: B rows in pairs of n8 tiles");
    if constexpr (KK < kKS) {
        unsigned a[kMF][4];
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
            ptx::ldmatrix_x4(a_ld + mf * 16 * kCprA * 16 + chunk_bytes<kCprA, KK>(la), a[mf][0], a[mf][1], a[mf][2],
                             a[mf][3]);
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
            unsigned b0, b1, b2, b3;
            ptx::ldmatrix_x4(b_ld + np * 16 * kCprB * 16 + chunk_bytes<kCprB, KK>(lb), b0, b1, b2, b3);
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf) {
                ptx::Mma16816<E>::run(c[mf][2 * np], a[mf], b0, b1);
                ptx::Mma16816<E>::run(c[mf][2 * np + 1], a[mf], b2, b3);
            }
        }
        gemm_nt<E, kMF, kNT, kKS, kCprA, kCprB, KK + 1>(c, a_ld, b_ld, la, lb);
    }
}

// A C fragment of 16 kMF x 8 kNT floats as mma A operands (k16 steps of it).
template <class E, int kMF, int kNT>
__device__ __forceinline__ void pack_a(const float (&c)[kMF][kNT][4], unsigned (&a)[kMF][kNT / 2][4]) {
#pragma unroll
    for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
        for (int kc = 0; kc < kNT / 2; ++kc) {
            a[mf][kc][0] = FromFloat<E>::pack2(c[mf][2 * kc][0], c[mf][2 * kc][1]);
            a[mf][kc][1] = FromFloat<E>::pack2(c[mf][2 * kc][2], c[mf][2 * kc][3]);
            a[mf][kc][2] = FromFloat<E>::pack2(c[mf][2 * kc + 1][0], c[mf][2 * kc + 1][1]);
            a[mf][kc][3] = FromFloat<E>::pack2(c[mf][2 * kc + 1][2], c[mf][2 * kc + 1][3]);
        }
}

// kPair0: B's first pair of column chunks (16 columns a pair): C holds B's columns
// [16 kPair0, 16 kPair0 + 8 kNT).
template <class E, int kMF, int kNT, int kKS, int kCprB, int kPair0 = 0, int DP = 0>
__device__ __forceinline__ void gemm_rn(float (&c)[kMF][kNT][4], const unsigned (&a)[kMF][kKS][4], unsigned b_ld,
                                        const LaneChunks& lb) {
    static_assert(kNT % 2 == 0, "gemm_rn: B columns in pairs of n8 tiles");
    if constexpr (DP < kNT / 2) {
#pragma unroll
        for (int kc = 0; kc < kKS; ++kc) {
            unsigned b0, b1, b2, b3;
            ptx::ldmatrix_x4_trans(b_ld + kc * 16 * kCprB * 16 + chunk_bytes<kCprB, kPair0 + DP>(lb), b0, b1, b2, b3);
#pragma unroll
            for (int mf = 0; mf < kMF; ++mf) {
                ptx::Mma16816<E>::run(c[mf][2 * DP], a[mf][kc], b0, b1);
                ptx::Mma16816<E>::run(c[mf][2 * DP + 1], a[mf][kc], b2, b3);
            }
        }
        gemm_rn<E, kMF, kNT, kKS, kCprB, kPair0, DP + 1>(c, a, b_ld, lb);
    }
}

// The mma A fragments [kMF][kKS] of X^T, where X is a [16 kKS x M] tile of kCprA chunks a
// row (swizzled): fragment (mf, ks) holds X^T rows 16 (frag0 + mf) .. + 15, columns
// 16 ks .. + 15.
template <class E, int kMF, int kKS, int kCprA>
__device__ __forceinline__ void load_a_trans(unsigned (&a)[kMF][kKS][4], unsigned tile, int frag0, int lane) {
    const int b_row = LaneRows::b_row(lane), b_hi = (lane >> 3) & 1, r7 = lane & 7;
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks)
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
            ptx::ldmatrix_x4_trans(tile + (ks * 16 + b_row) * kCprA * 16 +
                                       swz_chunk<kCprA>(2 * (frag0 + mf) + b_hi, r7) * 16,
                                   a[mf][ks][0], a[mf][ks][1], a[mf][ks][2], a[mf][ks][3]);
}

// One k step of gemm_nn: the B columns in pairs (DP), each pair's ldmatrix.trans shared
// by the kMF fragments.
template <class E, int kMF, int kNT, int kCprB, int KK, int DP = 0>
__device__ __forceinline__ void gemm_nn_b(float (&c)[kMF][kNT][4], const unsigned (&a)[kMF][4], unsigned b_ld,
                                          const LaneChunks& lb) {
    if constexpr (DP < kNT / 2) {
        unsigned b0, b1, b2, b3;
        ptx::ldmatrix_x4_trans(b_ld + KK * 16 * kCprB * 16 + chunk_bytes<kCprB, DP>(lb), b0, b1, b2, b3);
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf) {
            ptx::Mma16816<E>::run(c[mf][2 * DP], a[mf], b0, b1);
            ptx::Mma16816<E>::run(c[mf][2 * DP + 1], a[mf], b2, b3);
        }
        gemm_nn_b<E, kMF, kNT, kCprB, KK, DP + 1>(c, a, b_ld, lb);
    }
}

// A: as gemm_nt's (a_ld: the lane's row of the warp's first fragment); B: as gemm_rn's
// (b_ld: the lane's row of k step 0, at the warp's first column chunk).
template <class E, int kMF, int kNT, int kKS, int kCprA, int kCprB, int KK = 0>
__device__ __forceinline__ void gemm_nn(float (&c)[kMF][kNT][4], unsigned a_ld, unsigned b_ld, const LaneChunks& la,
                                        const LaneChunks& lb) {
    static_assert(kNT % 2 == 0, "gemm_nn: B columns in pairs of n8 tiles");
    if constexpr (KK < kKS) {
        unsigned a[kMF][4];
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
            ptx::ldmatrix_x4(a_ld + mf * 16 * kCprA * 16 + chunk_bytes<kCprA, KK>(la), a[mf][0], a[mf][1], a[mf][2],
                             a[mf][3]);
        gemm_nn_b<E, kMF, kNT, kCprB, KK>(c, a, b_ld, lb);
        gemm_nn<E, kMF, kNT, kKS, kCprA, kCprB, KK + 1>(c, a_ld, b_ld, la, lb);
    }
}

}  // namespace sm80
}  // namespace attnjit
