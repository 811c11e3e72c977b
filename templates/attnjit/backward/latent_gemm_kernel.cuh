// latent_gemm's Traits and kernel: the batched products of the latent projection's backward
// (api/latent_backward.h; the main loop is sm80/latent_gemm.cuh). The generated entry
// passes LatentGemmArgs (backward/latent_gemm_args.h) as p.args; the Variant is unused.
// Grid (ceil(N / block_n), ceil(M / block_m), z count).
#pragma once

#include "attnjit/backward/latent_gemm_args.h"
#include "attnjit/common/kernel_config.h"
#include "attnjit/common/types.cuh"
#include "attnjit/common/variant.cuh"  // the generated Variant's base
#include "attnjit/sm80/latent_gemm.cuh"

namespace attnjit {

template <MainloopKind kMainloop_, class Element_, int kDqk_, int kDv_, int kBlockM_, int kBlockN_, int kWarps_,
          int kStages_>
struct LatentGemmTraits {
    using Element = Element_;
    static constexpr MainloopKind kMainloop = kMainloop_;
    static constexpr int kThreads = kWarps_ * 32;
    static constexpr KernelConfig kConfig{KernelKind::latent_gemm, kMainloop, ElemKindOf<Element>::value, kDqk_, kDv_,
                                          TileConfig{kBlockM_, kBlockN_, kWarps_, kStages_}};
    static_assert(config_is_valid(kConfig), "kernel configuration rejected by why_config_invalid() in kernel_config.h");
    using Mainloop = sm80::LatentGemm<Element, kBlockM_, kBlockN_, kWarps_, kStages_>;
    static constexpr int kSmemBytes = Mainloop::kSmemBytes;
    static_assert(kSmemBytes == smem_bytes(kConfig), "latent_gemm's main loop and smem_bytes disagree");
};

template <class Traits, class Variant, class Params>
__device__ __forceinline__ void latent_gemm_kernel(const Params& p) {
    extern __shared__ __align__(128) unsigned char attnjit_latent_gemm_smem[];
    Traits::Mainloop::run(p.args, attnjit_latent_gemm_smem);
}

}  // namespace attnjit
