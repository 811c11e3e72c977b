// Warpgroup matrix products on sm_90a: shared-memory matrix descriptors for tiles in the
// 128-byte swizzled layout the bulk tensor copy writes (sm90/tma.cuh), the ordering
// instructions around wgmma.mma_async, and setmaxnreg. The products themselves are in
// sm90/wgmma_ops.cuh.
//
// Tile layout (SWIZZLE_128B): a tile of R rows and D columns of 16-bit elements is stored as
// D / 64 column blocks, each R rows of 128 bytes (64 elements), block after block; inside a
// block the 16-byte chunk c of row r sits at chunk c ^ (r & 7). A block starts on a 1024-byte
// boundary, so the swizzle the hardware applies from the address bits matches the copy's.
#pragma once

#include "attnjit/common/types.cuh"

namespace attnjit {
namespace sm90 {

// A wgmma shared-memory descriptor for a 128-byte-swizzled operand at shared address `addr`:
// start address, leading and stride byte offsets (16-byte units), layout type 1 (SWIZZLE_128B).
//   K-contiguous (A = Q, B = K): stride = 1024 (eight 128-byte rows), leading unused (1).
//   N-contiguous (B = V, kTransB): leading = the distance between 64-column blocks, stride =
//   1024 (eight rows of the reduction dim).
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned leading_bytes, unsigned stride_bytes) {
    unsigned long long d = 0;
    d |= (unsigned long long)((addr & 0x3FFFFu) >> 4);
    d |= (unsigned long long)((leading_bytes >> 4) & 0x3FFFu) << 16;
    d |= (unsigned long long)((stride_bytes >> 4) & 0x3FFFu) << 32;
    d |= 1ull << 62;
    return d;
}

// Orders this warpgroup's earlier register writes (accumulators, A fragments) before the
// wgmma that follows reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Orders this thread's earlier shared-memory stores (the generic proxy) before the async
// proxy's reads of them (a wgmma operand written by threads, not by a bulk copy); a barrier
// after it publishes them to the warpgroups that issue the product.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// The accumulators of a running wgmma are written behind the compiler's back: this empty
// volatile asm ties every register of `f` to its place in the instruction stream, so no read
// or write of them moves across the wait before it (or the product after it).
__device__ __forceinline__ void fence_reg(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void fence_reg(unsigned& x) { asm volatile("" : "+r"(x)::"memory"); }
template <class T, int kN>
__device__ __forceinline__ void fence_regs(T (&f)[kN][4]) {
#pragma unroll
    for (int i = 0; i < kN; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) fence_reg(f[i][e]);
}

// Gives this warpgroup's registers back (the producer) or takes them (the consumers). The
// kernel needs a register cap at entry (__launch_bounds__(threads, 1)).
template <int kRegs>
__device__ __forceinline__ void release_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void claim_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace sm90
}  // namespace attnjit
