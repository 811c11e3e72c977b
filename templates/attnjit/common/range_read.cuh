// Reads the elements base[i * stride], i in [first, last], for one thread: the ranges of
// Variant::classify in the batched cursors (intervals.cuh, ThreadCtx), where one lane of the
// producer warp reads a whole tile's range of a captured tensor, e.g. 128 document ids. That
// read is latency-bound (docs/sm90.md, the document mask), so with stride 1 the elements
// between the first and the last 16-byte boundary are read 16 bytes at a time, several loads
// in flight: 128 int32 ids take 32 loads, not 128. Elements before and after, and every
// element of a strided range, are read one by one. Host and device alike
// (tests/codegen/range_read_test.cpp runs it on the host).
#pragma once

#include "attnjit/common/kernel_config.h"  // ATTNJIT_HD_INLINE

// #pragma unroll where a CUDA compiler reads it (the host compiler would warn).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_PRAGMA(text) _Pragma(#text)
#define ATTNJIT_UNROLL(n) ATTNJIT_PRAGMA(unroll n)
#else
#define ATTNJIT_UNROLL(n)
#endif

namespace attnjit {

// 16 bytes of elements, loaded at once: an aggregate of T may alias T, so reading the elements
// out of it is well defined (a byte buffer read back as T would not be).
template <class T>
struct alignas(16) Chunk16 {
    T e[16 / sizeof(T)];
};

// Calls fold(base[i * stride]) once for each i in [first, last], in no promised order; nothing
// when first > last. T is an element type whose size divides 16 (every captured tensor's),
// and base is aligned to it (the launch checks captured tensors for that).
template <class T, class Fold>
ATTNJIT_HD_INLINE void fold_range(const T* base, long long stride, int first, int last, Fold&& fold) {
    if (stride != 1) {
ATTNJIT_UNROLL(8)
        for (int i = first; i <= last; ++i) fold(base[(long long)i * stride]);
        return;
    }
    constexpr int kPerLoad = 16 / static_cast<int>(sizeof(T));
    static_assert(kPerLoad * sizeof(T) == 16, "an element size that divides 16");
    // 32-bit indices, not pointers: the producer warp that runs this has few registers.
    int i = first;
    for (; i <= last && (reinterpret_cast<unsigned long long>(base + i) & 15) != 0; ++i) fold(base[i]);
    const int loads = i <= last ? (last + 1 - i) / kPerLoad : 0;
    const Chunk16<T>* v = reinterpret_cast<const Chunk16<T>*>(base + i);
ATTNJIT_UNROLL(4)
    for (int j = 0; j < loads; ++j) {
        const Chunk16<T> chunk = v[j];
ATTNJIT_UNROLL()
        for (int t = 0; t < kPerLoad; ++t) fold(chunk.e[t]);
    }
    for (i += loads * kPerLoad; i <= last; ++i) fold(base[i]);
}

}  // namespace attnjit
