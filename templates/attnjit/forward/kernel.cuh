// The forward attention kernel template: ForwardTraits (the compile-time KernelConfig) and
// forward_kernel(), which generated code calls from its __global__ entry point (see
// templates/README.md for the hook contract and the launch geometry).
//
// Main loops are policy types selected by the config's MainloopKind:
//   sm80::Mainloop<...>  fp16 / bf16: cp.async + ldmatrix + mma.sync (sm_80 and newer)
//   sm90::Mainloop<...>  fp16 / bf16: TMA + mbarriers + wgmma, warp-specialised (sm_90a)
//   simt::Mainloop<...>  fp32: plain FFMA, fp32-accurate
// Each has `template <class Variant, class Params> static void run(const Params&, [maps,]
// unsigned char*)`, `kThreads`, `kSmemBytes` and the capability flags check_variant reads
// (kName, kSupportsOutputTransform, kSupportsScoreTileTransform), selected in
// ForwardTraits::Mainloop. The sm90 loop's entry takes the bulk-copy descriptors
// (forward/tma_maps.h) as a second kernel parameter.
#pragma once

#include "attnjit/common/intervals.cuh"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/types.cuh"
#include "attnjit/common/variant.cuh"
#include "attnjit/forward/args.h"
#include "attnjit/simt/mainloop.cuh"
#include "attnjit/sm80/mainloop.cuh"
#include "attnjit/sm90/mainloop.cuh"

namespace attnjit {

// kDqk_, kDv_: the real head dims (the main loops pad their tiles: tile_head_dim).
// kScoreConv_: the score convolution's layout (KernelConfig::score_conv); kBiasTile_: the
// staged bias tile (KernelConfig::bias_tile); kRecipBand_: the reciprocal band's operand tiles
// (KernelConfig::recip_band); kLatent_: the latent dim L of a latent projection
// (KernelConfig::latent; the sm80 loop then runs at head dim L, and kDqk, kDv are Q's and O's).
template <MainloopKind kMainloop_, class Element_, int kDqk_, int kDv_, int kBlockM_, int kBlockN_, int kWarps_,
          int kStages_, bool kScoreConv_ = false, bool kBiasTile_ = false, bool kRecipBand_ = false, int kLatent_ = 0>
struct ForwardTraits {
    using Element = Element_;
    static constexpr MainloopKind kMainloop = kMainloop_;
    static constexpr int kDqk = kDqk_;
    static constexpr int kDv = kDv_;
    static constexpr int kBlockM = kBlockM_;
    static constexpr int kBlockN = kBlockN_;
    static constexpr int kWarps = kWarps_;
    static constexpr int kStages = kStages_;
    static constexpr int kThreads = kWarps * 32;
    static constexpr ElemKind kElem = ElemKindOf<Element>::value;
    static constexpr KernelConfig kConfig{KernelKind::forward, kMainloop, kElem, kDqk, kDv,
                                          TileConfig{kBlockM, kBlockN, kWarps, kStages}, kScoreConv_,
                                          kBiasTile_, kRecipBand_, kLatent_};

    static_assert(config_is_valid(kConfig), "kernel configuration rejected by why_config_invalid() in kernel_config.h");
#ifdef __CUDA_ARCH__
    static_assert(why_config_invalid_on(kConfig, __CUDA_ARCH__ / 10) == nullptr,
                  "kernel configuration does not run on the target arch (why_config_invalid_on in kernel_config.h)");
#endif

    using Mainloop = typename Select<
        kMainloop == MainloopKind::simt, simt::Mainloop<kDqk, kDv, kBlockM, kBlockN, kWarps>,
        typename Select<kMainloop == MainloopKind::sm90, sm90::Mainloop<Element, kDqk, kDv, kBlockM, kBlockN, kStages, kBiasTile_>,
                        sm80::Mainloop<Element, (kLatent_ ? kLatent_ : kDqk), (kLatent_ ? kLatent_ : kDv), kBlockM,
                                       kBlockN, kWarps, kStages, kOrderAuto, kScoreConv_, kBiasTile_, kRecipBand_,
                                       (kLatent_ ? kDqk : 0), (kLatent_ ? kDv : 0)>>::type>::type;
    static constexpr int kSmemBytes = Mainloop::kSmemBytes;
};

// One CTA computes one (query tile, head, batch): grid (ceil(Nq / block_m), Hq, B),
// block Traits::kThreads, dynamic shared memory smem_bytes(Traits::kConfig).
template <class Traits, class Variant, class Params>
__device__ __forceinline__ void forward_kernel(const Params& p) {
    check_variant<Variant, Params, typename Traits::Mainloop>();
    extern __shared__ __align__(128) unsigned char attnjit_forward_smem[];
    Traits::Mainloop::template run<Variant, Params>(p, attnjit_forward_smem);
}

// The sm90 loop's entry: the same, with the bulk-copy descriptors of Q, K and V.
template <class Traits, class Variant, class Params>
__device__ __forceinline__ void forward_kernel(const Params& p, const ForwardTmaMaps& maps) {
    check_variant<Variant, Params, typename Traits::Mainloop>();
    extern __shared__ __align__(1024) unsigned char attnjit_forward_smem_sm90[];
    Traits::Mainloop::template run<Variant, Params>(p, maps, attnjit_forward_smem_sm90);
}

}  // namespace attnjit
