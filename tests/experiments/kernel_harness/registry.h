// Registry of the instantiated test kernels (one entry per Traits x Variant).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "attnjit/common/kernel_config.h"

namespace harness {

struct Params;

struct KernelEntry {
    attnjit::ElemKind elem;
    int dqk, dv;
    int variant;
    attnjit::TileConfig tile;
    const void* func;  // the __global__ function
    int smem_bytes;
    // Host-side launch with the grid and block of templates/README.md.
    cudaError_t (*launch)(const Params& p, cudaStream_t s);
    bool bench;  // a timing configuration (also checked once for correctness)
};

std::vector<KernelEntry>& registry();

// Each kernels_*.cu defines one of these; main() calls them all.
void register_f16();
void register_bf16();
void register_f32();
void register_bench();

}  // namespace harness
