// The bulk tensor copy descriptors of the sm90 backward_dkdv (sm90/backward_dkdv.cuh), its
// kernel's second __grid_constant__ parameter, encoded on the host like the forward's
// (forward/tma_maps.h). Plain C++: the host and NVRTC compile this same header.
#pragma once

#include "attnjit/forward/tma_maps.h"

namespace attnjit {

// K [B, Hkv, Nk, Dqk] and V [B, Hkv, Nk, Dv] in boxes of 64 columns x block_n rows; Q [B, Hq,
// Nq, Dqk] and dO [B, Hq, Nq, Dv] in boxes of 64 columns x block_m rows; 128-byte swizzle.
struct BackwardTmaMaps {
    TmaMap q, k, v, d_o;
};

}  // namespace attnjit
