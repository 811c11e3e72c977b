// Element types, conversions and small enums shared by every forward main loop.
// NVRTC-clean: no host or toolkit headers; 16-bit types are plain structs and every
// conversion is inline PTX or bit manipulation.
#pragma once

#include "attnjit/common/kernel_config.h"
#include "attnjit/common/math_constants.h"
#include "attnjit/common/tile_class.h"

namespace attnjit {

// 16-bit storage types (IEEE binary16 and bfloat16), bit patterns only.
struct alignas(2) half_t { unsigned short bits; };
struct alignas(2) bf16_t { unsigned short bits; };

struct alignas(16) Float4 { float x, y, z, w; };


// ---- bit casts ---------------------------------------------------------------------
__device__ __forceinline__ float bits_to_float(unsigned u) {
    float f;
    asm("mov.b32 %0, %1;" : "=f"(f) : "r"(u));
    return f;
}
__device__ __forceinline__ unsigned float_to_bits(float f) {
    unsigned u;
    asm("mov.b32 %0, %1;" : "=r"(u) : "f"(f));
    return u;
}

// ---- reading captured tensors -------------------------------------------------------
__device__ __forceinline__ float to_float(half_t x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    return f;
}
__device__ __forceinline__ float to_float(bf16_t x) { return bits_to_float(((unsigned)x.bits) << 16); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ int to_int(int x) { return x; }
__device__ __forceinline__ int to_int(long long x) { return (int)x; }
__device__ __forceinline__ int to_int(unsigned char x) { return (int)x; }
__device__ __forceinline__ bool to_bool(unsigned char x) { return x != 0; }

// The two 16-bit elements of a 32-bit word as floats (lo: bits 0..15, as pack2 puts them).
template <class E>
__device__ __forceinline__ float unpack_lo(unsigned w) {
    E e;
    e.bits = static_cast<unsigned short>(w & 0xffffu);
    return to_float(e);
}
template <class E>
__device__ __forceinline__ float unpack_hi(unsigned w) {
    E e;
    e.bits = static_cast<unsigned short>(w >> 16);
    return to_float(e);
}

// ---- float -> storage -----------------------------------------------------------------
template <class T> struct FromFloat;
template <> struct FromFloat<float> {
    __device__ __forceinline__ static float cvt(float x) { return x; }
};
template <> struct FromFloat<half_t> {
    __device__ __forceinline__ static half_t cvt(float x) {
        half_t h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
        return h;
    }
    // Two floats into one 32-bit register: lo in bits 0..15, hi in bits 16..31.
    __device__ __forceinline__ static unsigned pack2(float lo, float hi) {
        unsigned d;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
        return d;
    }
};
template <> struct FromFloat<bf16_t> {
    __device__ __forceinline__ static bf16_t cvt(float x) {
        bf16_t h;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
        return h;
    }
    __device__ __forceinline__ static unsigned pack2(float lo, float hi) {
        unsigned d;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
        return d;
    }
};

// ElemKind of a storage type (the host's name for it in common/kernel_config.h).
template <class T> struct ElemKindOf;
template <> struct ElemKindOf<half_t> { static constexpr ElemKind value = ElemKind::f16; };
template <> struct ElemKindOf<bf16_t> { static constexpr ElemKind value = ElemKind::bf16; };
template <> struct ElemKindOf<float> { static constexpr ElemKind value = ElemKind::f32; };

// Compile-time selection without <type_traits>.
template <bool C, class A, class B> struct Select { using type = A; };
template <class A, class B> struct Select<false, A, B> { using type = B; };

// ---- small math --------------------------------------------------------------------

__device__ __forceinline__ float neg_inf() { return bits_to_float(0xff800000u); }
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float fast_log2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float fmax_(float a, float b) { return a > b ? a : b; }
__device__ __forceinline__ int imin_(int a, int b) { return a < b ? a : b; }

__device__ __forceinline__ unsigned shfl_xor(unsigned v, int lane_mask) {
    unsigned r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(lane_mask));
    return r;
}
__device__ __forceinline__ float shfl_xor(float v, int lane_mask) {
    return bits_to_float(shfl_xor(float_to_bits(v), lane_mask));
}
__device__ __forceinline__ long long shfl_xor(long long v, int lane_mask) {
    unsigned lo = (unsigned)(unsigned long long)v, hi = (unsigned)((unsigned long long)v >> 32);
    lo = shfl_xor(lo, lane_mask);
    hi = shfl_xor(hi, lane_mask);
    return (long long)(((unsigned long long)hi << 32) | lo);
}

__device__ __forceinline__ void block_sync() { asm volatile("bar.sync 0;" ::: "memory"); }
__device__ __forceinline__ void warp_sync() { asm volatile("bar.warp.sync 0xffffffff;" ::: "memory"); }

}  // namespace attnjit
