// A downstream program with a kernel bundle linked in (attnjit_add_kernel_bundle from the
// installed package): the forward and backward of spec.json for sm_80 come from the bundle,
// which check_install.cmake checks with NVRTC unloadable and no disk cache.
#include <attnjit/attnjit.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "dsl/spec_json.h"
#include "runtime/kernel_cache.h"

int main(int argc, char** argv) {
    using namespace attnjit;
    if (argc != 2) return 2;
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    try {
        const AttentionSpec spec = dsl::spec_from_json(text.str(), argv[1]);
        CompileOptions options;
        options.arch = "sm_80";
        Attention forward(spec, options);
        AttentionBackward backward(spec, options);
    } catch (const std::exception& e) {
        std::cout << "bundled consumer failed: " << e.what() << "\n";
        return 1;
    }
    std::cout << "bundled consumer ok: " << runtime::KernelCache::global().stats() << "\n";
    return runtime::KernelCache::global().stats().misses == 0 ? 0 : 1;
}
