// What one CTA works on: its (query tile, head, batch) in the order cta_order.cuh chooses,
// its kv head, and where its Q tile and its kv head's K and V start in global memory.
// Shared by every main loop so the scheduling and the 64-bit stride arithmetic are
// written once.
#pragma once

#include "attnjit/common/cta_order.cuh"
#include "attnjit/forward/args.h"

namespace attnjit {

template <class E, int BM>
struct CtaTile {
    int b, h, kvh;
    int m0;      // first query row of the tile
    const E* q;  // row m0 of query head h of batch b
    const E* k;  // row 0 of key head kvh of batch b
    const E* v;  // row 0 of value head kvh of batch b

    // order: a kOrder* value; kv_row_bytes: bytes of one key row of K plus V. This CTA's tile
    // of a one-tile-per-CTA launch.
    __device__ __forceinline__ CtaTile(const ForwardArgs& a, int order, int kv_row_bytes)
        : CtaTile(a, order, kv_row_bytes, WorkGrid::this_block(), WorkGrid::launched()) {}

    // Work item `lin` of the logical grid g (a persistent CTA's current tile).
    __device__ __forceinline__ CtaTile(const ForwardArgs& a, int order, int kv_row_bytes, int lin, WorkGrid g) {
        int m_block;
        cta_coords(order, a.kv_len, kv_row_bytes, lin, g, m_block, h, b);
        kvh = h / a.group;
        m0 = m_block * BM;
        q = static_cast<const E*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1] + m0 * a.q_stride[2];
        k = static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1];
        v = static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1];
    }

    // The last query row of the tile that exists (rows >= Nq are padding).
    __device__ __forceinline__ int last_row(int nq) const { return (m0 + BM < nq ? m0 + BM : nq) - 1; }
};

}  // namespace attnjit
