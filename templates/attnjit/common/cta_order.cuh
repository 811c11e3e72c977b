// CTA scheduling: which (query tile, head, batch) a CTA computes. The logical grid is always
// (ceil(Nq / block_m), Hq, B); the host launches it as such, one work item a CTA, or for the
// sm90 loop with more items than SMs a persistent grid that hands the item indices out in
// order through a counter (sm90/mainloop.cuh). The item index is remapped so that the order
// suits the mask:
//   kOrderPerHead: blockIdx.x reversed (heaviest causal tiles of a head first), heads in
//     launch order: the CTAs of one head run together and share K/V in L2.
//   kOrderChunked16/4/1: (head, batch) pairs are taken in chunks whose K and V fit in
//     16, 4 or 1 MiB of L2; inside a chunk the heaviest query tiles go first (for every
//     head of the chunk), so light tiles fill the tail of the grid. Pays off when tiles
//     are skipped (causal, document masks): measured on H100, see the kernel harness
//     (tests/experiments/kernel_harness).
//   kOrderAuto: chunked (16 MiB) when Variant::kCanClassify, else per head
//     (CtaOrder<Variant, kOrder>).
//   | kOrderBatchInner: the (head, batch) pairs with the batch innermost, so the batch rows of
//     a head run together: a bias that every batch row shares (a [1, H, N, N] pair bias seen
//     through a batch stride of 0) can be read from memory once and from L2 by the other rows,
//     where head-innermost runs through several heads' planes (32 MiB each at N 4096) before
//     the next batch row comes back to the first.
// The values are kernel_config.h's (the host names them); ForwardArgs::cta_order, when not
// kOrderAuto, overrides the kernel's own at launch (CtaSchedule: the autotuner's choice).
#pragma once

#include "attnjit/common/kernel_config.h"
#include "attnjit/forward/args.h"

namespace attnjit {

// The order a main loop uses: kOrder, or what kOrderAuto stands for with this Variant.
template <class Variant, int kOrder>
struct CtaOrder {
    static constexpr int value =
        kOrder != kOrderAuto ? kOrder : (Variant::kCanClassify ? kOrderChunked16 : kOrderPerHead);
};

// The order of this launch: the host's (ForwardArgs::cta_order) where it chose one, else the
// kernel's.
template <class Variant, int kOrder>
__device__ __forceinline__ int launch_cta_order(const ForwardArgs& a) {
    return a.cta_order != kOrderAuto ? a.cta_order : CtaOrder<Variant, kOrder>::value;
}

// The logical grid: (query tiles, Hq, B). A CTA of a one-tile-per-CTA launch is the
// work item blockIdx.x + gx * (blockIdx.y + gy * blockIdx.z); a persistent CTA takes several.
struct WorkGrid {
    int gx, gy, gz;
    __device__ __forceinline__ int size() const { return gx * gy * gz; }
    __device__ __forceinline__ static WorkGrid launched() {
        return WorkGrid{(int)gridDim.x, (int)gridDim.y, (int)gridDim.z};
    }
    __device__ __forceinline__ static int this_block() {
        return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    }
};

// (m_block, h, b) of work item `lin` of grid g, in the order `order`. kv_row_bytes: bytes of
// one key row of K plus V (the L2 footprint per key). Uniform across the CTA.
__device__ __forceinline__ void cta_coords(int order, int nk, int kv_row_bytes, int lin, WorkGrid g, int& m_block,
                                           int& h, int& b) {
    const int gx = g.gx, gy = g.gy;
    const bool batch_inner = (order & kOrderBatchInner) != 0;
    order &= ~kOrderBatchInner;
    if (order == kOrderPerHead) {
        const int hb = lin / gx;
        m_block = gx - 1 - (lin - hb * gx);
        h = batch_inner ? hb / g.gz : hb % gy;
        b = batch_inner ? hb % g.gz : hb / gy;
        return;
    }
    const int hb_total = gy * g.gz;
    const long long per_head = (long long)nk * kv_row_bytes;
    const long long budget = order == kOrderChunked16 ? (16LL << 20) : order == kOrderChunked4 ? (4LL << 20) : (1LL << 20);
    const long long gl = budget / (per_head > 0 ? per_head : 1);
    const int group = gl < 1 ? 1 : (gl > hb_total ? hb_total : (int)gl);
    const int chunk = lin / (group * gx);
    const int first = chunk * group;
    const int gc = hb_total - first < group ? hb_total - first : group;
    const int r = lin - first * gx;
    m_block = gx - 1 - r / gc;
    const int hb = first + r % gc;
    h = batch_inner ? hb / g.gz : hb % gy;
    b = batch_inner ? hb % g.gz : hb / gy;
}

}  // namespace attnjit
