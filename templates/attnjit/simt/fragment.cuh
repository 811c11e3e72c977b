// Fragment layouts of the simt main loop. Warp w owns query rows [w * kRPW, (w + 1) *
// kRPW) of the CTA tile and computes them one at a time; every row is spread over the 32
// lanes of the warp (WarpRowReduce):
//   SimtScoreRow<kJ>: the scores of the current row slot r, key offset lane + 32 jj in sv[jj];
//   SimtAccLayout<kRPW, kC, kCols>: the output accumulator, column lane + 32 c of row slot r in
//     o[r][c]; store_row writes the columns < kCols (a real head dim below the tile's).
#pragma once

#include "attnjit/common/row_reduce.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {
namespace simt {

template <int kJ>
struct SimtScoreRow {
    using Frag = float[kJ];
    int lane;
    int r;     // the row slot these scores belong to
    int row0;  // w * kRPW

    __device__ __forceinline__ int row(int slot) const { return row0 + slot; }

    template <class Op>
    __device__ __forceinline__ void for_each(Frag& f, Op& op) const {
#pragma unroll
        for (int jj = 0; jj < kJ; ++jj) op(f[jj], r, lane + 32 * jj);
    }
    // op(float& v) for the row's elements (only row slot r is held).
    template <class Op>
    __device__ __forceinline__ void for_each_in_row(Frag& f, int /*r*/, Op& op) const {
#pragma unroll
        for (int jj = 0; jj < kJ; ++jj) op(f[jj]);
    }
};

template <int kRPW, int kC, int kCols = 32 * kC>
struct SimtAccLayout {
    using Frag = float[kRPW][kC];
    using RowReduce = WarpRowReduce;
    static constexpr int kRows = kRPW;

    int row0;  // w * kRPW
    int lane;

    __device__ __forceinline__ SimtAccLayout(int warp, int lane_) : row0(warp * kRPW), lane(lane_) {}

    __device__ __forceinline__ int row(int r) const { return row0 + r; }
    __device__ __forceinline__ bool row_leader() const { return lane == 0; }

    __device__ __forceinline__ static void clear(Frag& f) {
#pragma unroll
        for (int r = 0; r < kRPW; ++r)
#pragma unroll
            for (int c = 0; c < kC; ++c) f[r][c] = 0.f;
    }

    template <class Op>
    __device__ __forceinline__ void for_each_in_row(Frag& f, int r, Op& op) const {
#pragma unroll
        for (int c = 0; c < kC; ++c) op(f[r][c]);
    }

    // This lane's first column in a row: store_row takes the row pointer advanced by it.
    __device__ __forceinline__ int lane_col() const { return lane; }

    template <class E, class Fn>
    __device__ __forceinline__ void store_row(E* lane_row, Frag& f, int r, const Fn& fn) const {
#pragma unroll
        for (int c = 0; c < kC; ++c)
            if (kCols == 32 * kC || lane + 32 * c < kCols)
                lane_row[32 * c] = FromFloat<E>::cvt(fn(f[r][c], lane + 32 * c));
    }
};

}  // namespace simt
}  // namespace attnjit
