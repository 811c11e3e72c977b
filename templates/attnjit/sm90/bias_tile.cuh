// The sm90 forward's staged bias tile (KernelConfig::bias_tile, common/bias_tile.cuh): the
// producer copies rows [m0, m0 + BM) x keys [k0, k0 + BN) of score_mod's bias into a stage
// beside K and V with bulk tensor copies (ForwardTmaMaps::bias: the tensor as rows of keys),
// in 64-key blocks of BM rows x 128 bytes, 128-byte swizzled as the K tiles are: the 8 rows of
// an accumulator fragment read 8 different 16-byte bank groups. Keys past the tensor's key dim
// and rows past its last row arrive as zeros; rows past Nq of a (batch, head) are the next
// plane's, read only by rows that are never stored.
#pragma once

#include "attnjit/common/bias_tile.cuh"

namespace attnjit {
namespace sm90 {

template <class T, int BM>
struct TmaBias {
    const unsigned* tile;  // the stage, as 32-bit words (16-bit elements: staged_bias_at)

    // Byte offset of element (row, col) in the stage.
    __device__ __forceinline__ static int offset(int row, int col) {
        return (col >> 6) * BM * 128 + row * 128 + ((((col & 63) >> 3) ^ (row & 7)) << 4) + (col & 7) * 2;
    }
    __device__ __forceinline__ float value(int, int, int row, int col) const {
        return staged_bias_at<T>(tile, offset(row, col));
    }
};

// The first row of a (batch, head)'s bias among the rows of the whole tensor (the host checked
// every leading stride a whole number of rows: api/tma_maps.cpp).
template <class T>
__device__ __forceinline__ int bias_plane_row(const BiasTileRef<T>& ref) {
    return static_cast<int>((ref.ptr - ref.tensor) / ref.row_stride);
}

}  // namespace sm90
}  // namespace attnjit
