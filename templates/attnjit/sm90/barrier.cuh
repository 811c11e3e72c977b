// Shared-memory mbarriers (sm_90): the completion signal of the bulk tensor copies and the
// hand-back of pipeline stages between the producer and consumer warpgroups.
//
// A barrier goes through phases 0, 1, 0, ...; a phase completes when its expected arrivals
// have arrived and, with expect_tx, the expected bytes have landed. wait(parity) returns once
// the phase of that parity has completed.
#pragma once

#include "attnjit/common/types.cuh"

namespace attnjit {
namespace sm90 {

__device__ __forceinline__ void mbar_init(unsigned bar, int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the copy engine (before the block barrier that
// publishes them).
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// One arrival that also expects `bytes` more bytes of copies to land in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, int parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "wait_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// A position in a ring of S stages that full / empty barrier pairs guard: the stage, the
// parity of its current use, and how many uses went before (`reused`: every stage has been
// through once, so a stage is free only once its empty barrier completes the last phase).
template <int S>
struct RingPos {
    int stage = 0, phase = 0, uses = 0;
    __device__ __forceinline__ bool reused() const { return uses >= S; }
    __device__ __forceinline__ void advance() {
        ++uses;
        if (++stage == S) {
            stage = 0;
            phase ^= 1;
        }
    }
};

// Named barriers (bar.sync / bar.arrive): `threads` counts every thread of the rendezvous,
// those that wait and those that only arrive; a multiple of 32.
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace sm90
}  // namespace attnjit
