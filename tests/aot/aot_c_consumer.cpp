// A program on libattnjit_c with a kernel bundle linked in by attnjit_add_kernel_bundle(... C_API)
// (tests/aot/CMakeLists.txt): the bundle registers with the C library at start-up, and
// attnjit_compile for sm_90a (the default loop and the sm80 one) finds every spec's forward in
// it with NVRTC unloadable and no disk cache, and never maps NVRTC.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "support/read_file.h"

#include "attnjit/attnjit_c.h"

namespace {

int fail(const std::string& why) {
    std::fprintf(stderr, "aot c consumer FAILED: %s (last error: %s)\n", why.c_str(), attnjit_last_error());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return fail("usage: aot_c_consumer SPEC.json...");
    if (attnjit_num_bundles() != 1) return fail("the linked bundle is not registered");
    int kernels = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string json = attnjit::read_file(argv[i]).value_or("");
        attnjit_spec* spec = nullptr;
        if (attnjit_spec_from_json(json.c_str(), json.size(), &spec) != ATTNJIT_OK) return fail(argv[i]);
        for (int32_t loop : {ATTNJIT_MAINLOOP_AUTO, ATTNJIT_MAINLOOP_SM80}) {
            attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
            o.arch = "sm_90a";
            o.mainloop = loop;
            attnjit_kernel* k = nullptr;
            if (attnjit_compile(spec, &o, &k) != ATTNJIT_OK) return fail(std::string("attnjit_compile of ") + argv[i]);
            attnjit_kernel_destroy(k);
            ++kernels;
        }
        attnjit_spec_destroy(spec);
    }
    if (attnjit::read_file("/proc/self/maps").value_or("").find("libnvrtc") != std::string::npos) return fail("libnvrtc is mapped");
    std::printf("aot c consumer ok: %d kernels from the linked bundle, NVRTC never loaded\n", kernels);
    return 0;
}
