// A program with a kernel bundle linked in by attnjit_add_kernel_bundle (tests/aot/CMakeLists.txt):
// for each spec file given, on sm_80 and sm_90a, the kernels a user's Attention and
// AttentionBackward ask for (and the sm80 ones the sm90 kernels fall back to) all come from the
// bundle: no compile, no disk cache read, and NVRTC never mapped into the process.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "support/read_file.h"

#include "api/attnjit.h"
#include "dsl/spec_json.h"
#include "runtime/kernel_bundle.h"
#include "runtime/kernel_cache.h"

namespace {

int fail(const std::string& why) {
    std::fprintf(stderr, "aot consumer FAILED: %s\n", why.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace attnjit;
    if (argc < 2) return fail("usage: aot_consumer SPEC.json...");
    if (runtime::BundleRegistry::global().size() != 1)
        return fail("the linked bundle is not registered (" + runtime::BundleRegistry::global().describe() + ")");
    try {
        for (int i = 1; i < argc; ++i) {
            const AttentionSpec spec = dsl::spec_from_json(attnjit::read_file(argv[i]).value_or(""), argv[i]);
            for (const char* arch : {"sm_80", "sm_90a"}) {
                CompileOptions o;
                o.arch = arch;
                const Attention forward(spec, o);
                CompileOptions sm80 = o;
                sm80.mainloop = MainloopKind::sm80;
                if (forward.config().mainloop == MainloopKind::sm90) Attention fallback(spec, sm80);
                if (!spec.returns_lse()) continue;
                const AttentionBackward backward(spec, o);
                bool sm90 = false;
                for (KernelKind kind : backward.kernel_kinds()) sm90 = sm90 || backward.config(kind).mainloop == MainloopKind::sm90;
                if (sm90) AttentionBackward fallback(spec, sm80);
            }
        }
    } catch (const std::exception& e) {
        return fail(e.what());
    }
    const runtime::CacheStats s = runtime::KernelCache::global().stats();
    std::ostringstream stats;
    stats << s;
    if (s.misses != 0 || s.disk_hits != 0 || s.bundle_hits == 0)
        return fail("kernels did not all come from the bundle: " + stats.str());
    if (attnjit::read_file("/proc/self/maps").value_or("").find("libnvrtc") != std::string::npos) return fail("libnvrtc is mapped");
    std::printf("aot consumer ok: %llu kernels from the linked bundle, NVRTC never loaded (%s)\n",
                static_cast<unsigned long long>(s.bundle_hits), stats.str().c_str());
    return 0;
}
