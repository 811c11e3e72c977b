// The accumulator (C) fragment layout of mma.sync m16n8k16, for a warp that owns kMF
// 16-row fragments of the CTA tile and kNT n8 tiles of columns: the one place that says
// which (row, column) each register holds. Used for the score tile S (kNT = block_n / 8)
// and the output accumulator O (kNT = head_dim_v / 8).
//
// Lane = 4 g + t4. Element e of n8 tile nt in m-fragment mf of warp w is at
//   row  w * 16 * kMF + 16 mf + g + 8 (e >> 1)     (row slot r = 2 mf + (e >> 1))
//   col  8 nt + 2 t4 + (e & 1)
// so a row is spread over the 4 lanes of a quad (QuadRowReduce), in pairs (e, e + 1).
// With kWarpsN > 1 the warps form a grid, kWarpsN warps across: warp w owns rows from
// (w / kWarpsN) * 16 * kMF and columns from (w % kWarpsN) * 8 * kNT. kCols (a multiple of
// 8, at most kWarpsN * 8 * kNT): the columns store_row writes (a real head dim below the
// tile's; the columns past it are padding). With kRowShare > 1, kRowShare consecutive warps
// (or warp columns) hold the same rows: warp w's rows start at (w / (kWarpsN kRowShare)) 16 kMF
// (the score tile of a loop that splits the head dim's columns across warps, sm80/mainloop.cuh).
// kFirstWarp: the CTA's first warp holding the tile (warp w counts as w - kFirstWarp): the
// sm90 loop's consumer warpgroups start after its producer warpgroup. A warpgroup's wgmma
// accumulator is this layout with kMF = 1 per warp.
#pragma once

#include "attnjit/common/ptx.cuh"
#include "attnjit/common/row_reduce.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {
namespace sm80 {

template <int kMF_, int kNT_, int kWarpsN = 1, int kCols = kWarpsN * 8 * kNT_, int kRowShare = 1, int kFirstWarp = 0>
struct MmaCLayout {
    static constexpr int kMF = kMF_, kNT = kNT_;
    static_assert(kCols % 8 == 0 && kCols <= kWarpsN * 8 * kNT, "kCols: a multiple of 8 within the tile");
    using Frag = float[kMF][kNT][4];
    using RowReduce = QuadRowReduce;
    static constexpr int kRows = 2 * kMF;  // row slots per thread

    // The lane's coordinates are recomputed from threadIdx where used, not held in members:
    // these kernels sit at 255 registers, and two more live values moved the document-mask
    // kernel (d128, sm_90a) from 120 to 164 bytes of spill stores and made it 3-4% slower.
    __device__ __forceinline__ MmaCLayout() {}
    __device__ __forceinline__ static int row0() {  // (w / (kWarpsN kRowShare)) * 16 * kMF + g
        return ((threadIdx.x >> 5) - kFirstWarp) / (kWarpsN * kRowShare) * 16 * kMF + ((threadIdx.x & 31) >> 2);
    }
    __device__ __forceinline__ static int col0() {  // (w % kWarpsN) * 8 * kNT + 2 * t4
        return ((threadIdx.x >> 5) - kFirstWarp) % kWarpsN * 8 * kNT + 2 * (threadIdx.x & 3);
    }

    __device__ __forceinline__ int row(int r) const { return row0() + 16 * (r >> 1) + 8 * (r & 1); }
    __device__ __forceinline__ int col(int nt, int e) const { return 8 * nt + col0() + (e & 1); }
    // Whether n8 tile nt holds real columns (< kCols); warp-uniform.
    __device__ __forceinline__ static bool stored(int nt) {
        return kCols == kWarpsN * 8 * kNT || ((threadIdx.x >> 5) - kFirstWarp) % kWarpsN * 8 * kNT + 8 * nt < kCols;
    }
    __device__ __forceinline__ bool row_leader() const { return col0() == 0; }

    __device__ __forceinline__ static void clear(Frag& f) {
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) f[mf][nt][e] = 0.f;
    }

    // op(float& v, int r, int col) for every element.
    template <class Op>
    __device__ __forceinline__ void for_each(Frag& f, Op& op) const {
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) op(f[mf][nt][e], 2 * mf + (e >> 1), col(nt, e));
    }

    // op(float& a, float& b, int r, int col) for the elements at the same place of two
    // fragments.
    template <class Op>
    __device__ __forceinline__ void for_each2(Frag& a, Frag& b, Op& op) const {
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) op(a[mf][nt][e], b[mf][nt][e], 2 * mf + (e >> 1), col(nt, e));
    }

    // op(float& a, float& b, float& c, int r, int col): three fragments.
    template <class Op>
    __device__ __forceinline__ void for_each3(Frag& a, Frag& b, Frag& c, Op& op) const {
#pragma unroll
        for (int mf = 0; mf < kMF; ++mf)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    op(a[mf][nt][e], b[mf][nt][e], c[mf][nt][e], 2 * mf + (e >> 1), col(nt, e));
    }

    // op(float& v0, float& v1) for the pairs (columns col, col + 1) of row slot r.
    template <class Op>
    __device__ __forceinline__ void for_each_in_row(Frag& f, int r, Op& op) const {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) op(f[r >> 1][nt][2 * (r & 1)], f[r >> 1][nt][2 * (r & 1) + 1]);
    }

    // This lane's first column in a row: store_row takes the row pointer advanced by it.
    __device__ __forceinline__ int lane_col() const { return col0(); }

    // Row slot r to global memory: lane_row[col - lane_col()] = E(fn(v, col)) for the
    // thread's columns col < kCols and < limit (a multiple of 8, known at run time), one
    // 32-bit store per pair (col, col + 1).
    template <class E, class Fn>
    __device__ __forceinline__ void store_row(E* lane_row, Frag& f, int r, const Fn& fn, int limit = kCols) const {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
            if (stored(nt) && (limit >= kCols || col(nt, 0) < limit))
                ptx::st_global_b32(lane_row + 8 * nt, FromFloat<E>::pack2(fn(f[r >> 1][nt][2 * (r & 1)], col(nt, 0)),
                                                                          fn(f[r >> 1][nt][2 * (r & 1) + 1], col(nt, 1))));
    }
};

}  // namespace sm80
}  // namespace attnjit
