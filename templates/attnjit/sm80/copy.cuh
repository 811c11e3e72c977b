// Global -> shared tile copies of the sm80 main loops: cp.async, 16 bytes a thread, into
// the XOR-swizzled layout of sm80/swizzle.cuh.
#pragma once

#include "attnjit/common/ptx.cuh"
#include "attnjit/sm80/swizzle.cuh"

namespace attnjit {
namespace sm80 {

// Copy rows [0, ROWS) x [0, D) of a row-major global tile (row stride `stride`
// elements) into a swizzled shared tile; rows >= valid are zero-filled and not read, and
// with kClipFront so are rows < first (a tile that starts before the tensor: the score
// convolution's halo rows). Columns >= kCols (a real head dim below the tile's D, a
// multiple of 8) are zero-filled and not read either.
template <class E, int kThreads, int ROWS, int D, bool kClipFront = false, int kCols = D>
__device__ __forceinline__ void copy_tile(unsigned dst, const E* g, long long stride, int valid, const E* safe,
                                      int tid, int first = 0) {
    constexpr int CPR = D / 8;
    constexpr int kChunks = ROWS * CPR;
    constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
    if constexpr (kThreads % CPR == 0 && (kThreads / CPR) % 8 == 0) {
        // Each thread keeps one chunk column and one row phase (row & 7): the shared
        // offset of its k-th chunk is a constant step; the global one a pointer bump.
        constexpr int kRowStep = kThreads / CPR;
        const int row0 = tid / CPR, c = tid % CPR;
        const bool col_ok = kCols == D || c < kCols / 8;
        const unsigned d0 = dst + (row0 * CPR + swz_chunk<CPR>(c, row0 & 7)) * 16;
        const E* src = g + row0 * stride + c * 8;
        const long long step = kRowStep * stride;
#pragma unroll
        for (int it = 0; it < kIters; ++it) {
            const int row = row0 + it * kRowStep;
            if (kChunks % kThreads == 0 || row < ROWS) {
                const bool ok = (!kClipFront || row >= first) && row < valid && col_ok;
                ptx::cp_async_16(d0 + it * kRowStep * CPR * 16, ok ? src : safe, ok);
            }
            src += step;
        }
    } else {
#pragma unroll
        for (int it = 0; it < kIters; ++it) {
            const int ch = it * kThreads + tid;
            if (kChunks % kThreads == 0 || ch < kChunks) {
                const int row = ch / CPR, c = ch % CPR;
                const bool ok = (!kClipFront || row >= first) && row < valid && (kCols == D || c < kCols / 8);
                const E* src = ok ? g + row * stride + c * 8 : safe;
                ptx::cp_async_16(dst + (row * CPR + swz_chunk<CPR>(c, row & 7)) * 16, src, ok);
            }
        }
    }
}

}  // namespace sm80
}  // namespace attnjit
