// Where one CTA's operands start in global memory: its query tile and its (kv) head's K
// and V. Shared by every main loop so the stride arithmetic (64-bit) is written once.
#pragma once

#include "attnjit/forward/args.h"

namespace attnjit {

template <class E>
struct CtaOperands {
    const E* q;  // row m0 of query head h of batch b
    const E* k;  // row 0 of key head kvh of batch b
    const E* v;  // row 0 of value head kvh of batch b

    __device__ CtaOperands(const ForwardArgs& a, int b, int h, int kvh, int m0)
        : q(static_cast<const E*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1] + m0 * a.q_stride[2]),
          k(static_cast<const E*>(a.k) + b * a.k_stride[0] + kvh * a.k_stride[1]),
          v(static_cast<const E*>(a.v) + b * a.v_stride[0] + kvh * a.v_stride[1]) {}
};

}  // namespace attnjit
