// The sm80 forward's staged bias tile (KernelConfig::bias_tile, common/bias_tile.cuh): the
// block_m x block_n tile of score_mod's bias for the next KV tile is copied into one
// shared-memory buffer as soon as the score hooks of the current one are done, so it lands
// while P V and the next Q K^T run. Rows are runs of 16-byte chunks, XOR-swizzled like the
// K/V tiles (sm80/swizzle.cuh): the 8 rows of an accumulator fragment read 8 different
// bank groups.
#pragma once

#include "attnjit/common/bias_tile.cuh"
#include "attnjit/common/ptx.cuh"
#include "attnjit/sm80/swizzle.cuh"

namespace attnjit {
namespace sm80 {

template <class T, int BN>
struct StagedBias {
    static_assert(sizeof(T) == 2, "the staged bias tile holds 16-bit elements");
    static_assert(BN % 32 == 0, "the staged bias tile needs block_n a multiple of 32");
    static constexpr int kCpr = BN / 8;  // 16-byte chunks per row
    const unsigned* tile;                // the shared buffer, as 32-bit words

    // Byte offset of element (row, col) in the buffer.
    __device__ __forceinline__ static int offset(int row, int col) {
        return (row * kCpr + swz_chunk<kCpr>(col >> 3, row & 7)) * 16 + (col & 7) * 2;
    }
    __device__ __forceinline__ float value(int, int, int row, int col) const {
        return staged_bias_at<T>(tile, offset(row, col));
    }

    // Copies rows [m0, m0 + BM) x keys [n0, n0 + BN) of the bias into the buffer at `dst`
    // (its shared address); rows >= nq and keys >= nk are zero-filled and not read. With a
    // contiguous key dimension and 16-byte aligned rows: cp.async (the caller commits the
    // group); otherwise, and for a row's last chunk when it holds fewer than 8 keys, element by
    // element, synchronously (the caller's barrier publishes it): a 16-byte read there would
    // run past the row's last key, where the tensor may end (compute-sanitizer's memcheck
    // counts the whole 16 bytes even with a smaller source size).
    template <int kThreads, int BM>
    __device__ __forceinline__ static void copy(unsigned dst, const BiasTileRef<T>& b, int m0, int n0, int nq, int nk,
                                                bool vector, int tid) {
        constexpr int kChunks = BM * kCpr;
        const int rows = nq - m0, cols = nk - n0;
        constexpr int kRowStep = kThreads / kCpr;
        if constexpr (kThreads % kCpr == 0 && kRowStep % 8 == 0 && kChunks % kThreads == 0) {
            if (vector) {
                // Each thread keeps one chunk column and one row phase (row & 7): its shared
                // offsets are a constant step apart, its source a pointer bump (keys are
                // contiguous here), as in copy_tile.
                const int row0 = tid / kCpr, c = tid % kCpr;
                const int n = 2 * min(max(cols - 8 * c, 0), 8);  // bytes of the chunk to read
                const unsigned d = dst + (row0 * kCpr + swz_chunk<kCpr>(c, row0 & 7)) * 16;
                const T* src = b.ptr + (long long)(m0 + row0) * b.row_stride + n0 + 8 * c;
                const long long step = (long long)kRowStep * b.row_stride;
#pragma unroll
                for (int i = 0; i < kChunks / kThreads; ++i) {
                    const int bytes = row0 + i * kRowStep < rows ? n : 0;
                    const unsigned di = d + i * kRowStep * kCpr * 16;
                    if (bytes == 0 || bytes == 16)
                        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(di), "l"(bytes ? src : b.ptr),
                                     "r"(bytes)
                                     : "memory");
                    else
                        store_chunk(di, src, bytes / 2, 1);
                    src += step;
                }
                return;
            }
        }
#pragma unroll 4
        for (int ch = tid; ch < kChunks; ch += kThreads) {
            const int row = ch / kCpr, c = ch % kCpr;
            const unsigned d = dst + (row * kCpr + swz_chunk<kCpr>(c, row & 7)) * 16;
            const int valid = row < rows ? min(max(cols - 8 * c, 0), 8) : 0;  // elements to read
            const T* src = b.ptr + (long long)(m0 + row) * b.row_stride + (long long)(n0 + 8 * c) * b.col_stride;
            if (vector && (valid == 0 || valid == 8)) {
                const int n = 2 * valid;
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(n ? src : b.ptr), "r"(n)
                             : "memory");
            } else {
                store_chunk(d, src, valid, b.col_stride);
            }
        }
    }

    // The chunk at `d` from `valid` (at most 8) keys at src, col_stride apart, zeros after
    // them, through registers.
    __device__ __forceinline__ static void store_chunk(unsigned d, const T* src, int valid, long long col_stride) {
        unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int e = 0; e < 8; ++e)
            if (e < valid) w[e >> 1] |= static_cast<unsigned>(src[e * col_stride].bits) << (16 * (e & 1));
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(d), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
    }
    // Whether copy() may use cp.async for this (batch, head): keys contiguous, rows and the
    // start 16-byte aligned (block-uniform).
    __device__ __forceinline__ static bool vectorizable(const BiasTileRef<T>& b) {
        return b.col_stride == 1 && (b.row_stride * 2) % 16 == 0 && (reinterpret_cast<unsigned long long>(b.ptr) % 16) == 0;
    }
};

}  // namespace sm80
}  // namespace attnjit
