// Timing configurations (bf16): the defaults and alternatives, plain and top-left causal.
#include "instantiate.cuh"

namespace harness {

// The same tile with a forced CTA order (see cta_coords in mainloop_sm80.cuh).
template <int D, int BM, int BN, int W, int S, int O>
struct OrderTraits : attnjit::ForwardTraits<attnjit::MainloopKind::sm80, attnjit::bf16_t, D, D, BM, BN, W, S> {
    using Mainloop = attnjit::sm80::Mainloop<attnjit::bf16_t, D, D, BM, BN, W, S, O>;
};

template <class Traits, int V>
void add_traits_kernel(int order) {
    using Var = typename VariantOf<V>::type;
    KernelEntry e;
    e.elem = Traits::kElem;
    e.dqk = Traits::kDqk;
    e.dv = Traits::kDv;
    e.variant = V;
    e.tile = Traits::kConfig.tile;
    e.tile.stages += 10 * order;  // tag in reports: stages + 10 * forced order (kOrderPerHead = 1, ...)
    e.func = reinterpret_cast<const void*>(&attnjit_forward<Traits, Var>);
    e.smem_bytes = attnjit::smem_bytes(Traits::kConfig);
    e.launch = &launch_kernel<Traits, V>;
    e.bench = true;
    registry().push_back(e);
}

template <int D, int BM, int BN, int W, int S>
void add_bench_pair() {
    add_kernel<attnjit::bf16_t, D, D, BM, BN, W, S, kPlain>(true);
    add_kernel<attnjit::bf16_t, D, D, BM, BN, W, S, kCausalTL>(true);
}
template <int D, int BM, int BN, int W, int S>
void add_bench_split() {  // timing-only: causal without mask code, uniform half-length CTAs
    add_kernel<attnjit::bf16_t, D, D, BM, BN, W, S, kCausalNoMask>(true);
    add_kernel<attnjit::bf16_t, D, D, BM, BN, W, S, kUniform>(true);
}
template <int D, int BM, int BN, int W, int S, int O>
void add_bench_pair_order() {
    add_traits_kernel<OrderTraits<D, BM, BN, W, S, O>, kPlain>(O);  // the orders start at 1 (kernel_config.h)
    add_traits_kernel<OrderTraits<D, BM, BN, W, S, O>, kCausalTL>(O);
}

void register_bench() {
    // Defaults (kOrderAuto: per head for plain, chunked for causal).
    add_bench_pair<128, 128, 64, 4, 2>();
    add_bench_pair<64, 128, 128, 4, 2>();
    add_bench_pair<256, 128, 64, 8, 1>();
    // What the causal time is made of (NOTES run 4).
    add_bench_split<128, 128, 64, 4, 2>();
    add_bench_split<64, 128, 128, 4, 2>();
    // Forced orders: 1x = per head, 2x = chunk 16 MiB (run 3); per head for causal (run 4).
    add_bench_pair_order<128, 128, 64, 4, 2, attnjit::kOrderPerHead>();
    add_bench_pair_order<64, 128, 128, 4, 2, attnjit::kOrderPerHead>();
}

}  // namespace harness
