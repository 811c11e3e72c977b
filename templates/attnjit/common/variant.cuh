// The Variant contract: what generated code provides to every kernel (templates/README.md
// lists the hooks). Generated Variants derive from VariantDefaults, which holds every flag
// and the structural hooks a plain pointwise variant leaves off, at no cost: each is
// behind `if constexpr` in the shared components. check_variant<Variant, Params,
// Mainloop>() states the rest of the contract at compile time, with English messages.
#pragma once

#include "attnjit/common/types.cuh"

namespace attnjit {

// Query head h's latent projections (Variant::latent_weights): W_qlat[h] [Dqk x L] and
// W_vup[h] [L x Dv], row-major with these row strides (elements; columns contiguous).
template <class E>
struct LatentWeights {
    const E* w_qlat;
    long long w_qlat_row;
    const E* w_vup;
    long long w_vup_row;
};

struct VariantDefaults {
    // ---- element hooks (generated) ------------------------------------------------------
    static constexpr bool kHasScoreMod = false;          // score_mod(p, hd, row, s, q, k) -> float
    // score_mod's bias tile (common/bias_tile.cuh): score_mod takes one more argument, the
    // bias at (q, k), which the main loop reads (staged tile by tile, or gathered):
    //   using BiasTileElement = half_t / bf16_t;
    //   static BiasTileRef<BiasTileElement> bias_tile(const Params&, const Head&);
    //   static float score_mod(p, hd, row, s, q, k, float tile_bias);
    static constexpr bool kHasBiasTile = false;
    static constexpr bool kBiasTileBatchInvariant = false;  // bias_tile does not depend on the batch row
    static constexpr bool kHasMask = false;              // mask(p, hd, row, q, k) -> bool
    static constexpr bool kCanClassify = false;          // classify(p, hd, q0, q1, k0, k1, ctx)
    static constexpr bool kClassifyReadsMemory = false;  // classify reads captured tensors
    // Backward kernels only: d score_mod / d s (1 when false; codegen/autodiff.h):
    //   static float d_score(const Params&, const Head&, const Row&, float s, int q, int k);
    static constexpr bool kHasScoreGrad = false;
    // backward_dq only, when gradients of captured tensors or runtime scalars are asked
    // for: input_grads(p, hd, row, s, q, k, dt, acc) at every in-range element, and the
    // hooks of common/input_grads.cuh (which says what each one does).
    static constexpr bool kInputGrads = false;
    static constexpr bool kInputGradZeroFill = false;  // input_grads_zero(p, hd, q, k) before the main loop
    static constexpr int kInputGradAccums = 0;         // sites summed per CTA, then across CTAs
    static constexpr int kInputGradOutputs = 0;        // gradient outputs those sites write
    // The output of the one table site (one varying index: table[h][clamp(k - q, -m, m) + m],
    // t[h][doc[k]]), -1: none;
    // its hooks grad_table_len(p), grad_table_dense(p, hd, x) (common/input_grads.cuh).
    static constexpr int kInputGradTableOutput = -1;
    // Per-query sites (q_bias[b][h][q]): input_grads adds into acc.row_add(n, c), the
    // thread's sum of the query row it is at; input_grads_query_store(p, hd, n, q, v).
    static constexpr int kInputGradQuerySites = 0;
    // The only site is stored elementwise: backward_dq's batch-sum launch
    // (sm80/backward_dq.cuh run_batch_sum) adds input_grad_batch_value(p, hd, row, s, q, k,
    // dt) over the batch and stores the sum with input_grads_batch_store(p, hd, q, k, v).
    static constexpr bool kInputGradBatchSum = false;
    // backward_dkdv only: finish_input_grad_planes(p, first, step) sums the planes of
    // elementwise and per-query gradients (backward/grad_args.h) over a grid-stride range.
    static constexpr bool kInputGradPlanes = false;
    // backward_dkdv only, per-key sites (kv_bias[h][k]): input_grads_key(p, hd, row, s, q,
    // k, dt, acc), input_grads_key_store(p, hd, n, k, v), finish_key_grad_planes(p, first,
    // step) (common/input_grads.cuh).
    static constexpr int kInputGradKeySites = 0;
    // Attention sinks: the sink logit of query head h (natural-log units), read from the
    // spec's sinks tensor [Hq], and that tensor's element type (for its gradient):
    //   static float sink(const Params&, int h);   using SinkElement = float;  // or half_t, bf16_t
    // It joins each row's softmax denominator (OnlineSoftmax::set_sink) and takes no value.
    static constexpr bool kHasSink = false;
    // Reciprocal band (RA, sm80/reciprocal_band.cuh), forward: T_ij = s_ij + alpha_h s_ji inside
    // the band 0 <= i - j <= W (kRecipBandCausal) or |i - j| <= W, before score_mod; -1: none.
    //   static float recip_band_alpha(const Params&, int h);
    static constexpr int kRecipBandWidth = -1;
    static constexpr bool kRecipBandCausal = true;
    // Latent projection (MLA, sm80/latent.cuh), forward: the main loop runs at head dim
    // kLatentDim over the latent K, V; 0: none.
    //   static LatentWeights<E> latent_weights(const Params&, int h);
    static constexpr int kLatentDim = 0;

    // ---- structural hooks (the next features; off by default) ---------------------------
    // Output transform, applied in the epilogue to every output element of a written row,
    // after the normalisation and before the conversion to the element type (a gate):
    //   static float transform_output(const Params&, const Head&, const Row&, float o, int q, int d);
    static constexpr bool kHasOutputTransform = false;
    // Whole-score-tile transform, called once per KV tile on S = Q K^T (unscaled), before
    // score_mod and the mask (score convolution, the reciprocal band):
    //   template <class Tile> static void transform_score_tile(const Params&, const Head&, Tile&);
    // Tile is a ScoreTileView (common/score_hooks.cuh).
    static constexpr bool kHasScoreTileTransform = false;
    // Score convolution (Multi-Token Attention): the kernel's query and key extents (0:
    // none), and its weights theta[h][a][b], a < kScoreConvRows, b < kScoreConvCols:
    //   static float score_conv_weight(const Params&, int h, int a, int b);
    // The sm80 forward convolves the causally zero-masked scores (sm80/score_conv.cuh).
    static constexpr int kScoreConvRows = 0;
    static constexpr int kScoreConvCols = 0;
    // A convolution under the spec's own mask, which also gates its taps
    // (docs/score_convolution.md); mask() is then that mask and the causal one, and
    //   static bool score_conv_mask(const Params&, const Head&, const Row&, int q, int k);
    // is the spec's mask alone.
    static constexpr bool kScoreConvMask = false;
};

namespace detail {

template <class T> struct AlwaysVoid { using type = void; };
template <class T> T&& declval_() noexcept;
template <class A, class B> struct SameType { static constexpr bool value = false; };
template <class A> struct SameType<A, A> { static constexpr bool value = true; };

template <class V, class = void> struct HasHead { static constexpr bool value = false; };
template <class V> struct HasHead<V, typename AlwaysVoid<typename V::Head>::type> { static constexpr bool value = true; };
template <class V, class = void> struct HasRow { static constexpr bool value = false; };
template <class V> struct HasRow<V, typename AlwaysVoid<typename V::Row>::type> { static constexpr bool value = true; };

template <class V, class P, class = void> struct MakeHeadOk { static constexpr bool value = false; };
template <class V, class P>
struct MakeHeadOk<V, P, typename AlwaysVoid<decltype(V::make_head(declval_<const P&>(), 0, 0, 0))>::type> {
    static constexpr bool value =
        SameType<decltype(V::make_head(declval_<const P&>(), 0, 0, 0)), typename V::Head>::value;
};
template <class V, class P, class = void> struct MakeRowOk { static constexpr bool value = false; };
template <class V, class P>
struct MakeRowOk<V, P, typename AlwaysVoid<decltype(V::make_row(declval_<const P&>(),
                                                                declval_<const typename V::Head&>(), 0))>::type> {
    static constexpr bool value = SameType<decltype(V::make_row(declval_<const P&>(), declval_<const typename V::Head&>(), 0)),
                                           typename V::Row>::value;
};
template <class V, class P, class = void> struct ScoreModOk { static constexpr bool value = false; };
template <class V, class P>
struct ScoreModOk<V, P, typename AlwaysVoid<decltype(V::score_mod(declval_<const P&>(), declval_<const typename V::Head&>(),
                                                                  declval_<const typename V::Row&>(), 0.f, 0, 0))>::type> {
    static constexpr bool value = SameType<decltype(V::score_mod(declval_<const P&>(), declval_<const typename V::Head&>(),
                                                                 declval_<const typename V::Row&>(), 0.f, 0, 0)),
                                           float>::value;
};
template <class V, class P, class = void> struct BiasScoreModOk { static constexpr bool value = false; };
template <class V, class P>
struct BiasScoreModOk<V, P, typename AlwaysVoid<decltype(V::score_mod(
                                declval_<const P&>(), declval_<const typename V::Head&>(),
                                declval_<const typename V::Row&>(), 0.f, 0, 0, 0.f) +
                            V::bias_tile(declval_<const P&>(), declval_<const typename V::Head&>()).at(0, 0))>::type> {
    static constexpr bool value = true;
};
// Main loops that implement the latent projection say so with kSupportsLatent = true.
template <class M, class = void> struct SupportsLatent { static constexpr bool value = false; };
template <class M>
struct SupportsLatent<M, typename AlwaysVoid<decltype(M::kSupportsLatent)>::type> {
    static constexpr bool value = M::kSupportsLatent;
};
// Main loops that implement the reciprocal band say so with kSupportsRecipBand = true.
template <class M, class = void> struct SupportsRecipBand { static constexpr bool value = false; };
template <class M>
struct SupportsRecipBand<M, typename AlwaysVoid<decltype(M::kSupportsRecipBand)>::type> {
    static constexpr bool value = M::kSupportsRecipBand;
};
template <class V, class P, class = void> struct RecipBandAlphaOk { static constexpr bool value = false; };
template <class V, class P>
struct RecipBandAlphaOk<V, P, typename AlwaysVoid<decltype(V::recip_band_alpha(declval_<const P&>(), 0))>::type> {
    static constexpr bool value = SameType<decltype(V::recip_band_alpha(declval_<const P&>(), 0)), float>::value;
};
template <class V, class P, class = void> struct MaskOk { static constexpr bool value = false; };
template <class V, class P>
struct MaskOk<V, P, typename AlwaysVoid<decltype(V::mask(declval_<const P&>(), declval_<const typename V::Head&>(),
                                                         declval_<const typename V::Row&>(), 0, 0))>::type> {
    static constexpr bool value = SameType<decltype(V::mask(declval_<const P&>(), declval_<const typename V::Head&>(),
                                                            declval_<const typename V::Row&>(), 0, 0)),
                                           bool>::value;
};
template <class V, class P, class = void> struct ScoreGradOk { static constexpr bool value = false; };
template <class V, class P>
struct ScoreGradOk<V, P, typename AlwaysVoid<decltype(V::d_score(declval_<const P&>(), declval_<const typename V::Head&>(),
                                                                 declval_<const typename V::Row&>(), 0.f, 0, 0))>::type> {
    static constexpr bool value = SameType<decltype(V::d_score(declval_<const P&>(), declval_<const typename V::Head&>(),
                                                                declval_<const typename V::Row&>(), 0.f, 0, 0)),
                                           float>::value;
};
template <class V, class P, class = void> struct SinkOk { static constexpr bool value = false; };
template <class V, class P>
struct SinkOk<V, P, typename AlwaysVoid<decltype(V::sink(declval_<const P&>(), 0))>::type> {
    static constexpr bool value = SameType<decltype(V::sink(declval_<const P&>(), 0)), float>::value;
};
template <class V, class P, class = void> struct TransformOutputOk { static constexpr bool value = false; };
template <class V, class P>
struct TransformOutputOk<V, P, typename AlwaysVoid<decltype(V::transform_output(
                                   declval_<const P&>(), declval_<const typename V::Head&>(),
                                   declval_<const typename V::Row&>(), 0.f, 0, 0))>::type> {
    static constexpr bool value = true;
};

// Flags read with a default, so that a Variant that does not derive from VariantDefaults
// gets a message about the missing member rather than a wall of template errors.
template <class V, class = void> struct HasFlags { static constexpr bool value = false; };
template <class V>
struct HasFlags<V, typename AlwaysVoid<decltype(V::kHasScoreMod + V::kHasMask + V::kCanClassify +
                                                V::kClassifyReadsMemory + V::kHasScoreGrad + V::kHasOutputTransform +
                                                V::kHasScoreTileTransform + V::kHasBiasTile)>::type> {
    static constexpr bool value = true;
};

}  // namespace detail

// The contract, checked where a kernel instantiates a main loop with a Variant. Produces
// no code. Mainloop declares what it implements: kName, kSupportsOutputTransform,
// kSupportsScoreTileTransform.
template <class V, class Params, class Mainloop>
__device__ __forceinline__ void check_variant() {
    static_assert(detail::HasFlags<V>::value,
                  "Variant must declare every flag of VariantDefaults (derive it from attnjit::VariantDefaults)");
    static_assert(detail::HasHead<V>::value, "Variant must declare a nested type Head (per (batch, head) terms)");
    static_assert(detail::HasRow<V>::value, "Variant must declare a nested type Row (per query row terms)");
    if constexpr (detail::HasFlags<V>::value && detail::HasHead<V>::value && detail::HasRow<V>::value) {
        static_assert(detail::MakeHeadOk<V, Params>::value,
                      "Variant must declare `static Head make_head(const Params&, int b, int h, int kvh)`");
        static_assert(detail::MakeRowOk<V, Params>::value,
                      "Variant must declare `static Row make_row(const Params&, const Head&, int q)`");
        static_assert(!V::kHasScoreMod || V::kHasBiasTile || detail::ScoreModOk<V, Params>::value,
                      "Variant must declare `static float score_mod(const Params&, const Head&, const Row&, float s, "
                      "int q, int k)` when kHasScoreMod");
        static_assert(!V::kHasBiasTile || (V::kHasScoreMod && detail::BiasScoreModOk<V, Params>::value),
                      "Variant: kHasBiasTile requires kHasScoreMod, `static float score_mod(const Params&, const Head&, "
                      "const Row&, float s, int q, int k, float tile_bias)` and `static BiasTileRef<BiasTileElement> "
                      "bias_tile(const Params&, const Head&)`");
        static_assert(!V::kHasMask || detail::MaskOk<V, Params>::value,
                      "Variant must declare `static bool mask(const Params&, const Head&, const Row&, int q, int k)` "
                      "when kHasMask");
        static_assert(!V::kHasScoreGrad || detail::ScoreGradOk<V, Params>::value,
                      "Variant must declare `static float d_score(const Params&, const Head&, const Row&, float s, "
                      "int q, int k)` when kHasScoreGrad");
        static_assert(!V::kHasSink || detail::SinkOk<V, Params>::value,
                      "Variant must declare `static float sink(const Params&, int h)` when kHasSink");
        static_assert(V::kRecipBandWidth < 0 || detail::RecipBandAlphaOk<V, Params>::value,
                      "Variant must declare `static float recip_band_alpha(const Params&, int h)` when "
                      "kRecipBandWidth >= 0");
        static_assert(V::kRecipBandWidth < 0 || detail::SupportsRecipBand<Mainloop>::value,
                      "Variant declares a reciprocal band (kRecipBandWidth) but this main loop does not support it");
        static_assert(V::kLatentDim == 0 || detail::SupportsLatent<Mainloop>::value,
                      "Variant declares a latent projection (kLatentDim) but this main loop does not run one");
        static_assert(!V::kClassifyReadsMemory || V::kCanClassify,
                      "Variant: kClassifyReadsMemory requires kCanClassify (it says how classify runs)");
        static_assert(!V::kHasOutputTransform || detail::TransformOutputOk<V, Params>::value,
                      "Variant: kHasOutputTransform requires `static float transform_output(const Params&, const "
                      "Head&, const Row&, float o, int q, int d)`");
        static_assert(!V::kHasOutputTransform || Mainloop::kSupportsOutputTransform,
                      "Variant declares kHasOutputTransform (output transform) but this main loop does not support "
                      "it");
        static_assert(!V::kHasScoreTileTransform || Mainloop::kSupportsScoreTileTransform,
                      "Variant declares kHasScoreTileTransform (whole-score-tile transform: score convolution, "
                      "reciprocal band) but this main loop does not support it yet (the tile must be staged in "
                      "shared memory)");
    }
}

}  // namespace attnjit
