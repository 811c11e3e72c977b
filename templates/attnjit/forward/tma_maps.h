// The bulk tensor copy descriptors of the sm90 forward (CUtensorMap, encoded on the host by
// cuTensorMapEncodeTiled, api/tma_maps.cpp), its kernel's second __grid_constant__
// parameter. Plain C++ with no includes: the host and NVRTC compile this same header.
#pragma once

namespace attnjit {

// An opaque CUtensorMap: 128 bytes, 128-byte aligned (as cuda.h declares it).
struct alignas(128) TmaMap {
    unsigned long long opaque[16];
};

// Q [B, Hq, Nq, Dqk], K [B, Hkv, Nk, Dqk], V [B, Hkv, Nk, Dv] as 4-d maps (the head dim
// innermost), boxes of 64 columns x (block_m or block_n) rows, 128-byte swizzle. With a
// staged bias tile (KernelConfig::bias_tile), `bias`: score_mod's bias tensor as one 2-d map of
// rows (its key dim innermost, every leading dim folded into rows), boxes of 64 keys x block_m
// rows, 128-byte swizzle; otherwise unused.
struct ForwardTmaMaps {
    TmaMap q, k, v, bias;
};

}  // namespace attnjit
