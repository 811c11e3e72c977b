// score_mod's bias tile: a captured tensor that score_mod reads at [..., q_idx, kv_idx], the
// leading indices fixed per (batch, head) (a pair bias, an additive mask tensor). Codegen
// (codegen/bias_tile.h) gives such a Variant
//   static constexpr bool kHasBiasTile = true;   using BiasTileElement = half_t / bf16_t;
//   static BiasTileRef<BiasTileElement> bias_tile(const Params&, const Head&);
//   static float score_mod(const Params&, const Head&, const Row&, float s, int q, int k,
//                          float tile_bias);   // tile_bias = bias[..., q, k]
// and the main loop says where tile_bias comes from: a BiasSource. GatheredBias reads it
// from global memory element by element (every main loop can); the sm80 forward stages
// the tile in shared memory with the K/V pipeline (sm80/bias_tile.cuh: StagedBias), the sm90
// forward by bulk copies (sm90/bias_tile.cuh: TmaBias).
#pragma once

#include "attnjit/common/types.cuh"

namespace attnjit {

// Where a (batch, head)'s bias starts, and its strides over (q, k) in elements; `tensor`, where
// the tensor starts (the sm90 loop's bulk copies address rows of the whole tensor).
template <class T>
struct BiasTileRef {
    const T* ptr;
    long long row_stride, col_stride;
    const T* tensor;
    __device__ __forceinline__ float at(int q, int k) const { return to_float(ptr[q * row_stride + k * col_stride]); }
};

// A BiasSource answers value(q, k, row, col): the bias at query q, key k, which sit at
// (row, col) of the CTA's current score tile.
struct NoBias {
    __device__ __forceinline__ float value(int, int, int, int) const { return 0.f; }
};

template <class T>
struct GatheredBias {
    BiasTileRef<T> ref;
    __device__ __forceinline__ float value(int q, int k, int, int) const { return ref.at(q, k); }
};

// The source for main loops that do not stage the tile: gathered when the Variant has one.
template <class Variant, bool = Variant::kHasBiasTile>
struct GatheredBiasOf {
    using type = NoBias;
    template <class Params, class Head>
    __device__ __forceinline__ static NoBias make(const Params&, const Head&) { return NoBias(); }
};
template <class Variant>
struct GatheredBiasOf<Variant, true> {
    using type = GatheredBias<typename Variant::BiasTileElement>;
    template <class Params, class Head>
    __device__ __forceinline__ static type make(const Params& p, const Head& hd) { return type{Variant::bias_tile(p, hd)}; }
};

// The 16-bit element at `byte_offset` of a staged bias tile seen as 32-bit words: a fragment's
// pair of columns shares a word, one load the compiler merges (a plain load, not asm: the main
// loop's barriers order it).
template <class T>
__device__ __forceinline__ float staged_bias_at(const unsigned* tile, int byte_offset) {
    static_assert(sizeof(T) == 2, "a staged bias tile holds 16-bit elements");
    const unsigned w = tile[byte_offset >> 2];
    T x;
    x.bits = static_cast<unsigned short>((byte_offset & 2) ? w >> 16 : w & 0xffffu);
    return to_float(x);
}

// The Variant's BiasTileElement; half_t for a Variant without a bias tile (never read).
template <class Variant, bool = Variant::kHasBiasTile>
struct BiasTileElementOf {
    using type = half_t;
};
template <class Variant>
struct BiasTileElementOf<Variant, true> {
    using type = typename Variant::BiasTileElement;
};

// score_mod at (q, k) with its bias (if the Variant has one) from `bias`.
template <class Variant, class Params, class Head, class Row, class Bias>
__device__ __forceinline__ float call_score_mod(const Params& p, const Head& hd, const Row& row, float s, int q, int k,
                                                const Bias& bias, int r, int c) {
    if constexpr (Variant::kHasBiasTile) return Variant::score_mod(p, hd, row, s, q, k, bias.value(q, k, r, c));
    else return Variant::score_mod(p, hd, row, s, q, k);
}

// score_mod at (q, k), its bias read from global memory (kernels that evaluate single
// elements: the backward's recomputation).
template <class Variant, class Params, class Head, class Row>
__device__ __forceinline__ float score_mod_at(const Params& p, const Head& hd, const Row& row, float s, int q, int k) {
    if constexpr (Variant::kHasBiasTile) return Variant::score_mod(p, hd, row, s, q, k, Variant::bias_tile(p, hd).at(q, k));
    else return Variant::score_mod(p, hd, row, s, q, k);
}

}  // namespace attnjit
