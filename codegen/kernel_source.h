// A generated kernel, ready for NVRTC: the last pure, deterministic stage. It carries its
// configuration, its target and the Params layout the launcher packs, so nothing after it
// needs the spec's (dtype, head dims, tile) again.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "attnjit/common/kernel_config.h"
#include "codegen/params_layout.h"

namespace attnjit::codegen {

struct KernelSource {
    std::string name;                  // readable, e.g. "fwd_sm80_bf16_d128x128_m128n64w4s2_<spec hash>"
    std::string entry = "attnjit_forward";  // extern "C" symbol
    std::string source;                // the generated .cu text (includes templates)
    std::vector<std::string> options;  // NVRTC options, without the -arch option
    KernelConfig config{};             // kind, main loop, element type, head dims, tile
    std::string arch;                  // the target, "sm_80", "sm_90a", ...
    ParamsLayout layout;               // the Params struct the entry takes
    int threads = 0;                   // block size
    int smem_bytes = 0;                // dynamic shared memory

    // sha256 over the generator version, templates_hash(), source and options.
    std::string content_hash() const;
};

std::ostream& operator<<(std::ostream& os, const KernelSource& k);

// Bumped whenever the generator changes what it emits for the same spec.
inline constexpr int kGeneratorVersion = 4;

}  // namespace attnjit::codegen
