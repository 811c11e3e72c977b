// The libFuzzer entry point (built with -DATTNJIT_LIBFUZZER=ON, clang): the same
// check_document as the standalone run, coverage-guided. A finding prints its report and
// aborts, which libFuzzer turns into a crash-<sha1> file of the input.
//
// NVRTC takes about a second per kernel, so only a sample of the valid specs is compiled:
// every ATTNJIT_FUZZ_NVRTC_EVERY-th (default 500), at most ATTNJIT_FUZZ_NVRTC_MAX per
// process (default 200); 0 turns it off.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "spec_target.h"

namespace {

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atol(v) : fallback;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    attnjit::fuzz::prepare_environment();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const long every = env_long("ATTNJIT_FUZZ_NVRTC_EVERY", 500);
    static const long max = env_long("ATTNJIT_FUZZ_NVRTC_MAX", 200);
    static long generated = 0, compiled = 0;
    const std::string_view doc(reinterpret_cast<const char*>(data), size);
    const attnjit::fuzz::Outcome out = attnjit::fuzz::check_document(doc, [&] {
        if (every <= 0 || compiled >= max || ++generated % every != 0) return false;
        ++compiled;
        return true;
    });
    if (out.finding) {
        std::fputs(attnjit::fuzz::describe(*out.finding, doc).c_str(), stderr);
        std::abort();
    }
    return 0;
}
