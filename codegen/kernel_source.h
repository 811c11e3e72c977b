// A generated kernel, ready for NVRTC: the last pure, deterministic stage.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "attnjit/tile_config.h"

namespace attnjit::codegen {

struct KernelSource {
    std::string name;                  // readable, e.g. "fwd_bf16_d128x128_causal"
    std::string entry = "attnjit_forward";  // extern "C" symbol
    std::string source;                // the generated .cu text (includes templates)
    std::vector<std::string> options;  // NVRTC options, without the -arch option
    TileConfig tile{};
    int threads = 0;                   // block size
    int smem_bytes = 0;                // dynamic shared memory

    // sha256 over the generator version, templates_hash(), source and options.
    std::string content_hash() const;
};

std::ostream& operator<<(std::ostream& os, const KernelSource& k);

// Bumped whenever the generator changes what it emits for the same spec.
inline constexpr int kGeneratorVersion = 2;

}  // namespace attnjit::codegen
