// Correctness instantiations for f32.
#include "instantiate.cuh"

namespace harness {

void register_f32() {
    using E = float;
    add_all_variants<E, 64>();
    add_all_variants<E, 128>();
    add_pc<E, 32, 32>();
    add_pc<E, 96, 96>();
    add_pc<E, 256, 256>();
    add_pc<E, 64, 128>();
    add_pc<E, 256, 64>();
    add_pc<E, 32, 256>();
}

}  // namespace harness
