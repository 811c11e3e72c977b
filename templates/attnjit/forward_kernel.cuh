// The forward attention kernel template: ForwardTraits (compile-time tile and dtype) and
// forward_kernel(), which generated code calls from its __global__ entry point (see
// templates/README.md for the hook contract and the launch geometry).
//
// Main loops are policy types selected by the traits:
//   MainloopSm80<...>  fp16 / bf16: cp.async + ldmatrix + mma.sync (sm_80 and newer)
//   MainloopSimt<...>  fp32: plain FFMA, fp32-accurate
// A further policy (e.g. Hopper wgmma + TMA) plugs in beside them with the same
// `template <class Variant, class Params> static void run(const Params&, unsigned char*)`
// and `kThreads`, `kSmemBytes`, selected in ForwardTraits::Mainloop.
#pragma once

#include "attnjit/forward_args.h"
#include "attnjit/intervals.cuh"
#include "attnjit/kv_schedule.cuh"
#include "attnjit/mainloop_simt.cuh"
#include "attnjit/mainloop_sm80.cuh"
#include "attnjit/ptx.cuh"
#include "attnjit/tile_config.h"
#include "attnjit/types.cuh"

namespace attnjit {

__host__ __device__ constexpr bool tile_is_valid(ElemKind e, int dqk, int dv, TileConfig t) {
    return why_tile_invalid(e, dqk, dv, t) == nullptr;
}

template <class Element_, int kDqk_, int kDv_, int kBlockM_, int kBlockN_, int kWarps_, int kStages_>
struct ForwardTraits {
    using Element = Element_;
    static constexpr int kDqk = kDqk_;
    static constexpr int kDv = kDv_;
    static constexpr int kBlockM = kBlockM_;
    static constexpr int kBlockN = kBlockN_;
    static constexpr int kWarps = kWarps_;
    static constexpr int kStages = kStages_;
    static constexpr int kThreads = kWarps * 32;
    static constexpr ElemKind kElem = ElemKindOf<Element>::value;
    static constexpr TileConfig kTile{kBlockM, kBlockN, kWarps, kStages};

    static_assert(head_dim_supported(kDqk), "Dqk must be one of 32, 64, 96, 128, 256");
    static_assert(head_dim_supported(kDv), "Dv must be one of 32, 64, 96, 128, 256");
    static_assert(kWarps >= 1 && kWarps <= 16, "warps must be in [1, 16]");
    static_assert(kElem == ElemKind::f32 || kBlockM % (16 * kWarps) == 0,
                  "block_m must be a multiple of 16 rows per warp (16-bit types)");
    static_assert(kElem == ElemKind::f32 || kBlockN % 16 == 0, "block_n must be a multiple of 16 (16-bit types)");
    static_assert(kElem != ElemKind::f32 || kBlockN % 32 == 0, "block_n must be a multiple of 32 (fp32)");
    static_assert(kElem != ElemKind::f32 || kStages == 1, "fp32 uses one stage");
    static_assert(kStages >= 1 && kStages <= 3, "stages must be 1, 2 or 3");
    static_assert(forward_smem_bytes(kElem, kDqk, kDv, kTile) <= 227 * 1024,
                  "tile needs more than 227 KiB of shared memory");
    static_assert(tile_is_valid(kElem, kDqk, kDv, kTile),
                  "tile configuration rejected by why_tile_invalid() in tile_config.h");

    using Mainloop = typename Select<kElem == ElemKind::f32,
                                     MainloopSimt<kDqk, kDv, kBlockM, kBlockN, kWarps>,
                                     MainloopSm80<Element, kDqk, kDv, kBlockM, kBlockN, kWarps, kStages>>::type;
    static constexpr int kSmemBytes = Mainloop::kSmemBytes;
};

// One CTA computes one (query tile, head, batch): grid (ceil(Nq / block_m), Hq, B),
// block Traits::kThreads, dynamic shared memory forward_smem_bytes(...).
template <class Traits, class Variant, class Params>
__device__ __forceinline__ void forward_kernel(const Params& p) {
    extern __shared__ __align__(128) unsigned char attnjit_forward_smem[];
    Traits::Mainloop::template run<Variant, Params>(p, attnjit_forward_smem);
}

}  // namespace attnjit
