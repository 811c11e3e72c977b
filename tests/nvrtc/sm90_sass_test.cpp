// The sm90 kernels' machine code holds the Hopper matrix instructions: HGMMA in the SASS that
// cuobjdump prints of their cubins (issue 11's check that wgmma is there where expected), and
// the sm80 loop compiled for the same GPU has none. Needs cuobjdump on PATH: the device
// machine's toolkit has it, CI's has not (there the test skips, and
// Sm90Compile.PtxasKeepsTheWgmmaPipelines stands in). bench/run_device.sh tests runs it there.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "codegen/generate.h"
#include "codegen/kernel_config.h"
#include "dsl/example_specs.h"
#include "runtime/compiler.h"
#include "runtime/cuda_api.h"

namespace attnjit::codegen {
namespace {

// How many lines of the cubin's SASS mention `opcode`, by cuobjdump -sass.
int sass_count(const std::string& cubin, const std::string& opcode) {
    char path[] = "/tmp/attnjit_sass_XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::close(fd);
    std::ofstream(path, std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    const std::string cmd = std::string("cuobjdump -sass ") + path + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (!pipe) throw std::runtime_error("popen failed");
    int count = 0;
    bool any = false;
    char line[4096];
    while (std::fgets(line, sizeof line, pipe)) {
        any = true;
        if (std::string(line).find(opcode) != std::string::npos) ++count;
    }
    const int rc = ::pclose(pipe);
    std::remove(path);
    if (rc != 0 || !any) throw std::runtime_error("cuobjdump -sass failed on the cubin");
    return count;
}

TEST(Sm90Sass, HgmmaInTheSm90KernelsAndNotInTheSm80Ones) {
    if (auto why = runtime::why_no_libnvrtc()) GTEST_SKIP() << *why;
    if (std::system("command -v cuobjdump > /dev/null 2>&1") != 0) GTEST_SKIP() << "no cuobjdump on PATH";
    struct Job {
        const char* spec;
        int d;
        KernelKind kind;
        MainloopKind loop;
    };
    for (const Job& j : {Job{"causal", 128, KernelKind::forward, MainloopKind::sm90},
                         Job{"softcap_sliding_window", 64, KernelKind::forward, MainloopKind::sm90},
                         Job{"bias", 128, KernelKind::forward, MainloopKind::sm90},
                         Job{"causal", 128, KernelKind::backward_fused, MainloopKind::sm90},
                         Job{"causal", 64, KernelKind::backward_dkdv, MainloopKind::sm90},
                         Job{"causal", 128, KernelKind::forward, MainloopKind::sm80}}) {
        const auto spec = dsl::example_spec(j.spec, DType::bf16, j.d);
        const KernelConfig c = make_config(spec, j.kind, "sm_90a", std::nullopt, j.loop);
        const runtime::CompiledKernel k = runtime::compile_kernel(generate(spec, c, "sm_90a"), "sm_90a");
        const int hgmma = sass_count(k.cubin, "HGMMA");
        if (j.loop == MainloopKind::sm90)
            EXPECT_GT(hgmma, 0) << c << ": no HGMMA in its SASS";
        else
            EXPECT_EQ(hgmma, 0) << c << ": HGMMA in an sm80-loop kernel";
    }
}

}  // namespace
}  // namespace attnjit::codegen
