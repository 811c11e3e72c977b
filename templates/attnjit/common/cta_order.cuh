// CTA scheduling: which (query tile, head, batch) a CTA computes. The host grid is always
// (ceil(Nq / block_m), Hq, B); the kernel remaps it so that the order suits the mask:
//   kOrderPerHead: blockIdx.x reversed (heaviest causal tiles of a head first), heads in
//     launch order: the CTAs of one head run together and share K/V in L2.
//   kOrderChunked16/4/1: (head, batch) pairs are taken in chunks whose K and V fit in
//     16, 4 or 1 MiB of L2; inside a chunk the heaviest query tiles go first (for every
//     head of the chunk), so light tiles fill the tail of the grid. Pays off when tiles
//     are skipped (causal, document masks): measured on H100, see the kernel harness
//     (tests/experiments/kernel_harness).
//   kOrderAuto: chunked (16 MiB) when Variant::kCanClassify, else per head
//     (CtaOrder<Variant, kOrder>).
#pragma once

namespace attnjit {

enum : int { kOrderAuto = -1, kOrderPerHead = 0, kOrderChunked16 = 1, kOrderChunked4 = 2, kOrderChunked1 = 3 };

// The order a main loop uses: kOrder, or what kOrderAuto stands for with this Variant.
template <class Variant, int kOrder>
struct CtaOrder {
    static constexpr int value =
        kOrder != kOrderAuto ? kOrder : (Variant::kCanClassify ? kOrderChunked16 : kOrderPerHead);
};

// (m_block, h, b) of this CTA. kv_row_bytes: bytes of one key row of K plus V (the L2
// footprint per key). Uniform across the CTA.
__device__ __forceinline__ void cta_coords(int order, int nk, int kv_row_bytes, int& m_block, int& h, int& b) {
    const int gx = gridDim.x, gy = gridDim.y, gz = gridDim.z;
    if (order == kOrderPerHead) {
        m_block = gx - 1 - blockIdx.x;
        h = blockIdx.y;
        b = blockIdx.z;
        return;
    }
    const int hb_total = gy * gz;
    const long long per_head = (long long)nk * kv_row_bytes;
    const long long budget = order == kOrderChunked16 ? (16LL << 20) : order == kOrderChunked4 ? (4LL << 20) : (1LL << 20);
    const long long g = budget / (per_head > 0 ? per_head : 1);
    const int group = g < 1 ? 1 : (g > hb_total ? hb_total : (int)g);
    const int lin = blockIdx.x + gx * (blockIdx.y + gy * blockIdx.z);
    const int chunk = lin / (group * gx);
    const int first = chunk * group;
    const int gc = hb_total - first < group ? hb_total - first : group;
    const int r = lin - first * gx;
    m_block = gx - 1 - r / gc;
    const int hb = first + r % gc;
    h = hb % gy;
    b = hb / gy;
}

}  // namespace attnjit
