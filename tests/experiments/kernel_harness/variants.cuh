// Hand-written Variant structs that follow templates/README.md's hook contract exactly,
// standing in for generated code while codegen is written. Shared by the device
// instantiations (kernels_*.cu) and, through the VariantId enum, by the CPU reference.
#pragma once

#include "attnjit/forward/kernel.cuh"

namespace harness {

enum VariantId : int {
    kPlain = 0,     // (a) no mod, no mask
    kCausalTL = 1,  // (b) causal, top-left (k <= q), classify by corners
    kSoftcap = 2,   // (c) score_mod cap * tanh(s / cap)
    kDoc = 3,       // (d) document mask doc[b][q] == doc[b][k], classify by ctx.int_range
    kCausalBR = 4,  // (e) causal, bottom-right (k <= q + Nk - Nq): rows with no key when Nq > Nk
    kThresh = 5,    // (f) keep iff w[b][k] > 0 (bf16 tensor), classify by ctx.float_range
    kNumVariants = 6,
    // Timing-only variants (wrong outputs; never checked): what the causal time is made of.
    kCausalNoMask = 6,  // causal's tile skipping, but diagonal tiles run as kFull (no mask code)
    kUniform = 7        // every CTA visits the first ceil(Nk/2 / BN) + 1 tiles, as kFull
};

struct Params {
    attnjit::ForwardArgs args;
    float scalar_cap;
    attnjit::TensorArg<int, 2> tensor_doc;       // [B, max(Nq, Nk)]
    attnjit::TensorArg<attnjit::bf16_t, 2> tensor_w;  // [B, Nk]
};

#ifdef __CUDACC__
struct HeadBase {
    int b, h, kvh;
};
struct NoRow {};

struct VPlain : attnjit::VariantDefaults {
    static constexpr bool kHasScoreMod = false, kHasMask = false, kCanClassify = false, kClassifyReadsMemory = false;
    using Head = HeadBase;
    using Row = NoRow;
    __device__ static Head make_head(const Params&, int b, int h, int kvh) { return Head{b, h, kvh}; }
    __device__ static Row make_row(const Params&, const Head&, int) { return Row{}; }
    __device__ static float score_mod(const Params&, const Head&, const Row&, float s, int, int) { return s; }
    __device__ static bool mask(const Params&, const Head&, const Row&, int, int) { return true; }
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params&, const Head&, int, int, int, int, Ctx&) {
        return attnjit::TileClass::kFull;
    }
};

struct VCausalTL : VPlain {
    static constexpr bool kHasScoreMod = false, kHasMask = true, kCanClassify = true, kClassifyReadsMemory = false;
    __device__ static bool mask(const Params&, const Head&, const Row&, int q, int k) { return k <= q; }
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params&, const Head&, int q0, int q1, int k0, int k1, Ctx&) {
        if (k0 > q1) return attnjit::TileClass::kSkip;
        if (k1 <= q0) return attnjit::TileClass::kFull;
        return attnjit::TileClass::kPartial;
    }
};

struct VCausalBR : VPlain {
    static constexpr bool kHasScoreMod = false, kHasMask = true, kCanClassify = true, kClassifyReadsMemory = false;
    struct Head {
        int b, h, kvh, shift;
    };
    __device__ static Head make_head(const Params& p, int b, int h, int kvh) {
        return Head{b, h, kvh, p.args.kv_len - p.args.q_len};
    }
    __device__ static Row make_row(const Params&, const Head&, int) { return Row{}; }
    __device__ static bool mask(const Params&, const Head& hd, const Row&, int q, int k) { return k <= q + hd.shift; }
    __device__ static float score_mod(const Params&, const Head&, const Row&, float s, int, int) { return s; }
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params&, const Head& hd, int q0, int q1, int k0, int k1,
                                                  Ctx&) {
        if (k0 > q1 + hd.shift) return attnjit::TileClass::kSkip;
        if (k1 <= q0 + hd.shift) return attnjit::TileClass::kFull;
        return attnjit::TileClass::kPartial;
    }
};

struct VSoftcap : VPlain {
    static constexpr bool kHasScoreMod = true, kHasMask = false, kCanClassify = false;
    __device__ static float score_mod(const Params& p, const Head&, const Row&, float s, int, int) {
        return p.scalar_cap * tanhf(s / p.scalar_cap);
    }
};

struct VDoc : attnjit::VariantDefaults {
    static constexpr bool kHasScoreMod = false, kHasMask = true, kCanClassify = true, kClassifyReadsMemory = false;
    struct Head {
        int b, h, kvh;
        const int* doc;  // doc[b]
    };
    struct Row {
        int doc_q;
    };
    __device__ static Head make_head(const Params& p, int b, int h, int kvh) {
        return Head{b, h, kvh, p.tensor_doc.ptr + b * p.tensor_doc.stride[0]};
    }
    __device__ static Row make_row(const Params& p, const Head& hd, int q) {
        return Row{attnjit::to_int(hd.doc[q * p.tensor_doc.stride[1]])};
    }
    __device__ static float score_mod(const Params&, const Head&, const Row&, float s, int, int) { return s; }
    __device__ static bool mask(const Params& p, const Head& hd, const Row& r, int, int k) {
        return attnjit::to_int(hd.doc[k * p.tensor_doc.stride[1]]) == r.doc_q;
    }
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params& p, const Head& hd, int q0, int q1, int k0, int k1,
                                                  Ctx& ctx) {
        const attnjit::IntRange rq = ctx.int_range(hd.doc, p.tensor_doc.stride[1], q0, q1);
        const attnjit::IntRange rk = ctx.int_range(hd.doc, p.tensor_doc.stride[1], k0, k1);
        if (rq.hi < rk.lo || rk.hi < rq.lo) return attnjit::TileClass::kSkip;
        if (rq.lo == rq.hi && rk.lo == rk.hi && rq.lo == rk.lo) return attnjit::TileClass::kFull;
        return attnjit::TileClass::kPartial;
    }
};

struct VThresh : VPlain {
    static constexpr bool kHasScoreMod = false, kHasMask = true, kCanClassify = true, kClassifyReadsMemory = false;
    __device__ static bool mask(const Params& p, const Head& hd, const Row&, int, int k) {
        return attnjit::to_float(p.tensor_w.ptr[hd.b * p.tensor_w.stride[0] + k * p.tensor_w.stride[1]]) > 0.f;
    }
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params& p, const Head& hd, int, int, int k0, int k1,
                                                  Ctx& ctx) {
        const attnjit::FloatRange r =
            ctx.float_range(p.tensor_w.ptr + hd.b * p.tensor_w.stride[0], p.tensor_w.stride[1], k0, k1);
        if (r.hi <= 0.f) return attnjit::TileClass::kSkip;
        if (r.lo > 0.f) return attnjit::TileClass::kFull;
        return attnjit::TileClass::kPartial;
    }
};

struct VCausalNoMask : VCausalTL {
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params&, const Head&, int q0, int q1, int k0, int k1, Ctx&) {
        return k0 > q1 ? attnjit::TileClass::kSkip : attnjit::TileClass::kFull;
    }
};
struct VUniform : VCausalTL {
    template <class Ctx>
    __device__ static attnjit::TileClass classify(const Params& p, const Head&, int, int, int k0, int k1, Ctx&) {
        const int bn = k1 - k0 + 1, half = (p.args.kv_len / 2 + bn - 1) / bn;
        return k0 / bn > half ? attnjit::TileClass::kSkip : attnjit::TileClass::kFull;
    }
};

template <int V> struct VariantOf;
template <> struct VariantOf<kCausalNoMask> { using type = VCausalNoMask; };
template <> struct VariantOf<kUniform> { using type = VUniform; };
template <> struct VariantOf<kPlain> { using type = VPlain; };
template <> struct VariantOf<kCausalTL> { using type = VCausalTL; };
template <> struct VariantOf<kSoftcap> { using type = VSoftcap; };
template <> struct VariantOf<kDoc> { using type = VDoc; };
template <> struct VariantOf<kCausalBR> { using type = VCausalBR; };
template <> struct VariantOf<kThresh> { using type = VThresh; };
#endif

}  // namespace harness
