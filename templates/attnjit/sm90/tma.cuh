// Bulk tensor copies (TMA, sm_90): a box of a tensor map from global to shared memory,
// completing on an mbarrier (sm90/barrier.cuh). Elements past the tensor's edges arrive as
// zeros and count toward the barrier's bytes like the rest.
#pragma once

#include "attnjit/common/types.cuh"
#include "attnjit/forward/tma_maps.h"

namespace attnjit {
namespace sm90 {

// The map must live in parameter, constant or global memory: here a __grid_constant__
// kernel parameter, whose generic address the instruction takes.
__device__ __forceinline__ void tma_load_4d(unsigned dst, const TmaMap& map, int c0, int c1, int c2, int c3,
                                            unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
}

// Pulls the descriptor into the copy engine's cache before its first use.
__device__ __forceinline__ void tma_prefetch(const TmaMap& map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
}

}  // namespace sm90
}  // namespace attnjit
