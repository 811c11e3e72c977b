// Instantiation helper for kernels_*.cu.
#pragma once

#include "registry.h"
#include "variants.cuh"

namespace harness {

template <class Traits, class Variant>
__global__ void __launch_bounds__(Traits::kThreads) attnjit_forward(const __grid_constant__ Params p) {
    attnjit::forward_kernel<Traits, Variant>(p);
}

template <class Traits, int V>
cudaError_t launch_kernel(const Params& p, cudaStream_t s) {
    using Var = typename VariantOf<V>::type;
    dim3 grid((p.args.q_len + Traits::kBlockM - 1) / Traits::kBlockM, p.args.q_heads, p.args.batch);
    const int smem = attnjit::smem_bytes(Traits::kConfig);
    attnjit_forward<Traits, Var><<<grid, Traits::kThreads, smem, s>>>(p);
    return cudaGetLastError();
}

template <class E, int DQK, int DV, int BM, int BN, int W, int S, int V>
void add_kernel(bool bench = false) {
    using Traits = attnjit::ForwardTraits<attnjit::default_mainloop(attnjit::KernelKind::forward, attnjit::ElemKindOf<E>::value, DQK, DV, 90), E, DQK, DV, BM,
                                          BN, W, S>;
    using Var = typename VariantOf<V>::type;
    KernelEntry e;
    e.elem = Traits::kElem;
    e.dqk = DQK;
    e.dv = DV;
    e.variant = V;
    e.tile = Traits::kConfig.tile;
    e.func = reinterpret_cast<const void*>(&attnjit_forward<Traits, Var>);
    e.smem_bytes = attnjit::smem_bytes(Traits::kConfig);
    e.launch = &launch_kernel<Traits, V>;
    e.bench = bench;
    registry().push_back(e);
}

// The default tile of common/kernel_config.h for (E, DQK, DV) on sm_90.
template <class E, int DQK, int DV, int V>
void add_default() {
    constexpr attnjit::ElemKind ek = attnjit::ElemKindOf<E>::value;
    constexpr attnjit::TileConfig t =
        attnjit::default_tile(attnjit::KernelKind::forward, attnjit::default_mainloop(attnjit::KernelKind::forward, ek, DQK, DV, 90), DQK, DV, 90);
    add_kernel<E, DQK, DV, t.block_m, t.block_n, t.warps, t.stages, V>();
}

// Plain and top-left causal at one head-dim pair.
template <class E, int DQK, int DV>
void add_pc() {
    add_default<E, DQK, DV, kPlain>();
    add_default<E, DQK, DV, kCausalTL>();
}
template <class E, int D>
void add_all_variants() {
    add_default<E, D, D, kPlain>();
    add_default<E, D, D, kCausalTL>();
    add_default<E, D, D, kSoftcap>();
    add_default<E, D, D, kDoc>();
    add_default<E, D, D, kCausalBR>();
    add_default<E, D, D, kThresh>();
}

}  // namespace harness
