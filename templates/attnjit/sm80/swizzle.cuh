// The XOR swizzle of the sm80 shared-memory tiles. Every tile row is a run of 16-byte
// chunks; chunk c of a row is stored at swz_chunk(c, row & 7), so that the 8 rows an
// ldmatrix phase reads, and the chunks a cp.async phase writes, fall in 8 different
// 16-byte bank groups.
#pragma once

namespace attnjit {
namespace sm80 {

// Physical chunk (16 bytes) of logical chunk c in a row whose (row & 7) is r7, for a row
// of CPR chunks. CPR is a multiple of 4: chunks in whole groups of 8 are XORed with
// (row & 7); a trailing group of 4 (D = 32, 96) with (row >> 1) & 3.
template <int CPR>
__device__ __forceinline__ int swz_chunk(int c, int r7) {
    constexpr int kFull = (CPR / 8) * 8;
    if constexpr (CPR % 8 == 0) {
        return c ^ r7;
    } else {
        return c < kFull ? (c ^ r7) : kFull + ((c & 3) ^ (r7 >> 1));
    }
}

// Per-lane physical chunk offsets (in bytes) of logical chunks 2i + hi of a row with
// (row & 7) == r7: the four XOR patterns of whole 8-chunk groups, and the two of a
// trailing 4-chunk group. chunk_bytes<CPR, I>(lc) then needs no run-time arithmetic.
struct LaneChunks {
    int xa[4];
    int xb[2];
    __device__ __forceinline__ LaneChunks(int hi, int r7) {
#pragma unroll
        for (int j = 0; j < 4; ++j) xa[j] = ((2 * j + hi) ^ r7) * 16;
#pragma unroll
        for (int j = 0; j < 2; ++j) xb[j] = ((2 * j + hi) ^ (r7 >> 1)) * 16;
    }
};
template <int CPR, int I>
__device__ __forceinline__ int chunk_bytes(const LaneChunks& lc) {
    constexpr int kFull = (CPR / 8) * 8;
    if constexpr (2 * I < kFull)
        return (I / 4) * 128 + lc.xa[I % 4];
    else
        return kFull * 16 + lc.xb[I - kFull / 2];
}

}  // namespace sm80
}  // namespace attnjit
