// Bulk tensor copies (TMA, sm_90): a box of a tensor map from global to shared memory,
// completing on an mbarrier (sm90/barrier.cuh). Elements past the tensor's edges arrive as
// zeros and count toward the barrier's bytes like the rest. And bulk reductions from shared
// to global memory, completing in bulk async-groups.
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

// The same for a 2-d map (the bias tile: columns, rows).
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaMap& map, int c0, int c1, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            dst),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// Pulls the descriptor into the copy engine's cache before its first use.
__device__ __forceinline__ void tma_prefetch(const TmaMap& map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&map)) : "memory");
}

// Bulk reduction (sm_90): adds `bytes` (a multiple of 16) of fp32 from shared memory to global
// memory, element by element, in the bulk async-group of the issuing thread.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, unsigned src, unsigned bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst), "r"(src),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Until the group's reads of shared memory are done (the source may be written again).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Until the group's writes are done and visible to this thread.
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Orders this thread's global accesses of the generic proxy and of the async proxy (the bulk
// reductions) with each other, around a flag between CTAs.
__device__ __forceinline__ void fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

}  // namespace sm90
}  // namespace attnjit
