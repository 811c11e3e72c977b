// The backward kernel templates: BackwardTraits (the compile-time KernelConfig, with
// BackwardDkdvTraits / BackwardDqTraits, the names generated code uses) and the two
// kernels generated code calls from its __global__ entry points, backward_dq_kernel
// (grid (ceil(Nq / block_m), Hq, B), launched first) and backward_dkdv_kernel (grid
// (ceil(Nk / block_n), Hkv, B)); both take BackwardArgs (backward/args.h) and the
// Variant's hooks, with d_score (d score_mod / d s) when Variant::kHasScoreGrad.
//
// Main loops are policy types selected by the config's MainloopKind:
//   simt::Backward<...>       every element type, fp32 FFMA, both kinds (simt/backward.cuh)
//   sm80::BackwardDq<...>     fp16 / bf16, mma.sync, head dims up to 128
//   sm80::BackwardDkdv<...>   (sm80/backward_dq.cuh, sm80/backward_dkdv.cuh)
//   sm90::BackwardDkdv<...>   fp16 / bf16 backward_dkdv and backward_fused (with dQ) on sm_90a:
//                             TMA + wgmma, warp-specialised (sm90/backward_dkdv.cuh)
//   sm80::BackwardFused<...>  backward_fused (sm80/backward_fused.cuh; with kScoreConv, the
//                             score convolution's backward, sm80/score_conv_backward.cuh)
//   BackwardRows<...>         backward_stats, backward_dq_convert (common/backward_rows.cuh)
//   BackwardSinkGrad<...>     backward_sink_grad, two launches (common/backward_sink_grad.cuh)
// Each has run_dkdv or run_dq, kThreads, kSmemBytes and the capability flags
// check_variant reads.
#pragma once

#include "attnjit/backward/args.h"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/types.cuh"
#include "attnjit/common/variant.cuh"
#include "attnjit/common/backward_rows.cuh"
#include "attnjit/common/backward_sink_grad.cuh"
#include "attnjit/simt/backward.cuh"
#include "attnjit/sm80/backward_dkdv.cuh"
#include "attnjit/sm80/backward_dq.cuh"
#include "attnjit/sm80/backward_fused.cuh"
#include "attnjit/sm90/backward_dkdv.cuh"

namespace attnjit {

// kDqk_, kDv_: the real head dims. The sm80 kinds pad their tiles (tile_head_dim); the simt
// backward, BackwardRows and BackwardSinkGrad work element by element at the real dims.
template <KernelKind kKind_, MainloopKind kMainloop_, class Element_, int kDqk_, int kDv_, int kBlockM_,
          int kBlockN_, int kWarps_, int kStages_, bool kScoreConv_ = false, bool kRecipBand_ = false>
struct BackwardTraits {
    using Element = Element_;
    static constexpr MainloopKind kMainloop = kMainloop_;
    static constexpr int kThreads = kWarps_ * 32;
    static constexpr KernelConfig kConfig{kKind_, kMainloop, ElemKindOf<Element>::value, kDqk_,
                                          kDv_, TileConfig{kBlockM_, kBlockN_, kWarps_, kStages_}, kScoreConv_,
                                          false, kRecipBand_};

    static_assert(config_is_valid(kConfig), "kernel configuration rejected by why_config_invalid() in kernel_config.h");
#ifdef __CUDA_ARCH__
    static_assert(why_config_invalid_on(kConfig, __CUDA_ARCH__ / 10) == nullptr,
                  "kernel configuration does not run on the target arch (why_config_invalid_on in kernel_config.h)");
#endif

    using Mainloop = typename Select<
        kKind_ == KernelKind::backward_sink_grad, BackwardSinkGrad<Element, kDqk_, kDv_, kWarps_>,
        typename Select<
        is_backward_rows(kKind_), BackwardRows<Element, kDqk_, kDv_, kBlockM_, kWarps_>,
        typename Select<
        kMainloop == MainloopKind::sm90,
        sm90::BackwardDkdv<Element, kDqk_, kDv_, kBlockM_, kBlockN_, kStages_, kKind_ == KernelKind::backward_fused>,
        typename Select<kMainloop == MainloopKind::sm80,
                        typename Select<kKind_ == KernelKind::backward_fused,
                                        sm80::BackwardFused<Element, kDqk_, kDv_, kBlockM_, kBlockN_, kWarps_, kStages_, kScoreConv_,
                                                            kRecipBand_>,
                                        typename Select<owns_keys(kKind_),
                                                        sm80::BackwardDkdv<Element, kDqk_, kDv_, kBlockM_, kBlockN_,
                                                                           kWarps_, kRecipBand_>,
                                                        sm80::BackwardDq<Element, kDqk_, kDv_, kBlockM_, kBlockN_,
                                                                         kWarps_, kScoreConv_, kRecipBand_>>::type>::type,
                        simt::Backward<Element, kDqk_, kDv_, kBlockM_, kBlockN_, kWarps_>>::type>::type>::type>::type;
    static constexpr int kSmemBytes = Mainloop::kSmemBytes;
    static_assert(kSmemBytes == smem_bytes(kConfig), "backward main loop and smem_bytes disagree");
};

template <MainloopKind M, class E, int Dqk, int Dv, int BM, int BN, int W, int S, bool kRecipBand = false>
using BackwardDkdvTraits = BackwardTraits<KernelKind::backward_dkdv, M, E, Dqk, Dv, BM, BN, W, S, false, kRecipBand>;
template <MainloopKind M, class E, int Dqk, int Dv, int BM, int BN, int W, int S, bool kScoreConv = false,
          bool kRecipBand = false>
using BackwardDqTraits = BackwardTraits<KernelKind::backward_dq, M, E, Dqk, Dv, BM, BN, W, S, kScoreConv, kRecipBand>;
template <MainloopKind M, class E, int Dqk, int Dv, int BM, int BN, int W, int S>
using BackwardStatsTraits = BackwardTraits<KernelKind::backward_stats, M, E, Dqk, Dv, BM, BN, W, S>;
template <MainloopKind M, class E, int Dqk, int Dv, int BM, int BN, int W, int S, bool kScoreConv = false,
          bool kRecipBand = false>
using BackwardFusedTraits = BackwardTraits<KernelKind::backward_fused, M, E, Dqk, Dv, BM, BN, W, S, kScoreConv,
                                           kRecipBand>;
template <MainloopKind M, class E, int Dqk, int Dv, int BM, int BN, int W, int S>
using BackwardDqConvertTraits = BackwardTraits<KernelKind::backward_dq_convert, M, E, Dqk, Dv, BM, BN, W, S>;

template <class Traits, class Variant, class Params>
__device__ __forceinline__ void backward_dkdv_kernel(const Params& p) {
    check_variant<Variant, Params, typename Traits::Mainloop>();
    extern __shared__ __align__(128) unsigned char attnjit_backward_smem[];
    Traits::Mainloop::template run_dkdv<Variant, Params>(p, attnjit_backward_smem);
}

// The sm90 backward_dkdv's entry: the same, with the bulk-copy descriptors (backward/tma_maps.h).
template <class Traits, class Variant, class Params>
__device__ __forceinline__ void backward_dkdv_kernel(const Params& p, const BackwardTmaMaps& maps) {
    check_variant<Variant, Params, typename Traits::Mainloop>();
    extern __shared__ __align__(1024) unsigned char attnjit_backward_smem_sm90[];
    Traits::Mainloop::template run_dkdv<Variant, Params>(p, maps, attnjit_backward_smem_sm90);
}

template <class Traits, class Variant, class Params>
__device__ __forceinline__ void backward_dq_kernel(const Params& p) {
    check_variant<Variant, Params, typename Traits::Mainloop>();
    extern __shared__ __align__(128) unsigned char attnjit_backward_smem[];
    Traits::Mainloop::template run_dq<Variant, Params>(p, attnjit_backward_smem);
}

template <class Traits, class Variant, class Params>
__device__ __forceinline__ void backward_stats_kernel(const Params& p) {
    Traits::Mainloop::template run_stats<Variant, Params>(p, nullptr);
}

template <class Traits, class Variant, class Params>
__device__ __forceinline__ void backward_dq_convert_kernel(const Params& p) {
    Traits::Mainloop::template run_dq_convert<Variant, Params>(p, nullptr);
}

template <MainloopKind M, class E, int Dqk, int Dv, int BM, int BN, int W, int S>
using BackwardSinkGradTraits = BackwardTraits<KernelKind::backward_sink_grad, M, E, Dqk, Dv, BM, BN, W, S>;

template <class Traits, class Variant, class Params>
__device__ __forceinline__ void backward_sink_grad_kernel(const Params& p) {
    check_variant<Variant, Params, typename Traits::Mainloop>();
    Traits::Mainloop::template run_sink_grad<Variant, Params>(p, nullptr);
}

}  // namespace attnjit
