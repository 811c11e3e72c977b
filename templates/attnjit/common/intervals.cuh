// Block-collective range helpers for Variant::classify (data-dependent masks such as
// document masks). Codegen emits calls to exactly these names:
//
//   attnjit::IntRange   r = ctx.int_range(base, stride, first, last);   // T = int, long long
//   attnjit::FloatRange f = ctx.float_range(base, stride, first, last); // T = half_t, bf16_t, float
//
// Each returns the min (lo) and max (hi) of base[i * stride] for i in [first, last]
// (inclusive). int_range reads each element through to_int (types.cuh), exactly as the
// generated point loads do: an int element of a captured tensor (i32 or i64) is an int32,
// an i64 one truncated like a C cast, everywhere (codegen/README.md). Every thread of the CTA must make the same call with the same arguments
// (they are collectives: shared scratch and two __syncthreads). An empty range
// (first > last) returns lo > hi (lo = +max, hi = -max). float_range ignores NaNs; a range
// of only NaNs returns lo = +inf, hi = -inf.
#pragma once

#include "attnjit/common/range_read.cuh"
#include "attnjit/common/types.cuh"

namespace attnjit {

struct IntRange {
    long long lo, hi;
};
struct FloatRange {
    float lo, hi;
};

__device__ __forceinline__ IntRange range_union(IntRange a, IntRange b) {
    return IntRange{a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}
__device__ __forceinline__ FloatRange range_union(FloatRange a, FloatRange b) {
    return FloatRange{a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
}
// True when the two ranges share at least one value.
__device__ __forceinline__ bool ranges_overlap(IntRange a, IntRange b) { return a.lo <= b.hi && b.lo <= a.hi; }
__device__ __forceinline__ bool ranges_overlap(FloatRange a, FloatRange b) { return a.lo <= b.hi && b.lo <= a.hi; }
// True when both ranges hold one and the same single value.
__device__ __forceinline__ bool ranges_single_equal(IntRange a, IntRange b) {
    return a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
}

// The Ctx handed to Variant::classify. `scratch` is a CTA-private shared-memory area of
// at least 16 * warps bytes that nothing else uses while classify runs.
struct BlockCtx {
    long long* scratch;
    int tid;
    int nthreads;
    // 0: the whole CTA takes part (__syncthreads); else the named barrier of that id among the
    // nthreads threads (the sm90 loop's producer warp classifies alone).
    int barrier = 0;

    __device__ __forceinline__ void sync() const {
        if (barrier == 0) block_sync();
        else asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(nthreads) : "memory");
    }

    template <class T>
    __device__ IntRange int_range(const T* base, long long stride, int first, int last) {
        const long long kMax = 0x7fffffffffffffffLL;
        long long lo = kMax, hi = -kMax;
        for (int i = first + tid; i <= last; i += nthreads) {
            const long long v = to_int(base[(long long)i * stride]);  // int32, as the point loads read it
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            long long l2 = shfl_xor(lo, o), h2 = shfl_xor(hi, o);
            lo = l2 < lo ? l2 : lo;
            hi = h2 > hi ? h2 : hi;
        }
        const int warp = tid >> 5, nwarps = nthreads >> 5;
        if ((tid & 31) == 0) {
            scratch[2 * warp] = lo;
            scratch[2 * warp + 1] = hi;
        }
        sync();
        lo = scratch[0];
        hi = scratch[1];
        for (int w = 1; w < nwarps; ++w) {
            long long l2 = scratch[2 * w], h2 = scratch[2 * w + 1];
            lo = l2 < lo ? l2 : lo;
            hi = h2 > hi ? h2 : hi;
        }
        sync();
        return IntRange{lo, hi};
    }

    template <class T>
    __device__ FloatRange float_range(const T* base, long long stride, int first, int last) {
        const float kInf = bits_to_float(0x7f800000u);
        float lo = kInf, hi = -kInf;
        for (int i = first + tid; i <= last; i += nthreads) {
            float v = to_float(base[(long long)i * stride]);
            lo = v < lo ? v : lo;  // NaN compares false: ignored
            hi = v > hi ? v : hi;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float l2 = shfl_xor(lo, o), h2 = shfl_xor(hi, o);
            lo = l2 < lo ? l2 : lo;
            hi = h2 > hi ? h2 : hi;
        }
        const int warp = tid >> 5, nwarps = nthreads >> 5;
        float* fs = reinterpret_cast<float*>(scratch);
        if ((tid & 31) == 0) {
            fs[2 * warp] = lo;
            fs[2 * warp + 1] = hi;
        }
        sync();
        lo = fs[0];
        hi = fs[1];
        for (int w = 1; w < nwarps; ++w) {
            float l2 = fs[2 * w], h2 = fs[2 * w + 1];
            lo = l2 < lo ? l2 : lo;
            hi = h2 > hi ? h2 : hi;
        }
        sync();
        return FloatRange{lo, hi};
    }
};

// The Ctx of a classify() that one thread runs alone for a tile of its own (the batched
// cursor of kv_schedule.cuh): the same ranges, read serially, with no collectives, 16 bytes
// a load where the range is contiguous (range_read.cuh); the query-side range is the same for
// every thread of a CTA, so its loads hit L1 after the first.
struct ThreadCtx {
    template <class T>
    __device__ IntRange int_range(const T* base, long long stride, int first, int last) const {
        const long long kMax = 0x7fffffffffffffffLL;
        long long lo = kMax, hi = -kMax;
        fold_range(base, stride, first, last, [&](const T& x) {
            const long long v = to_int(x);  // int32, as the point loads read it
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        });
        return IntRange{lo, hi};
    }

    template <class T>
    __device__ FloatRange float_range(const T* base, long long stride, int first, int last) const {
        const float kInf = bits_to_float(0x7f800000u);
        float lo = kInf, hi = -kInf;
        fold_range(base, stride, first, last, [&](const T& x) {
            const float v = to_float(x);
            lo = v < lo ? v : lo;  // NaN compares false: ignored
            hi = v > hi ? v : hi;
        });
        return FloatRange{lo, hi};
    }
};

}  // namespace attnjit
