// NVRTC compiles with no GPU: real cubins for sm_80 and sm_90a, embedded templates as
// headers, readable failures, architecture checks, dumps.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "runtime/kernel_cache.h"
#include "runtime_test_util.h"
#include "support/sha256.h"

namespace attnjit::runtime {
namespace {

using testing::files_under;
using testing::ScopedEnv;
using testing::TempDir;
using testing::tiny_source;

#define REQUIRE_NVRTC()                                               \
    do {                                                              \
        if (auto why = why_no_libnvrtc()) GTEST_SKIP() << *why;       \
    } while (0)

bool is_elf(const std::string& bytes) { return bytes.compare(0, 4, "\x7f" "ELF") == 0; }

class CompilerForArch : public ::testing::TestWithParam<const char*> {};

TEST_P(CompilerForArch, CompilesATinyKernelWithoutAGpu) {
    REQUIRE_NVRTC();
    const std::string arch = GetParam();
    CompiledKernel k = compile_kernel(tiny_source(), arch);
    EXPECT_TRUE(is_elf(k.cubin)) << "not a cubin";
    EXPECT_EQ(k.arch, arch);
    EXPECT_EQ(k.entry, "tiny_add");
    EXPECT_EQ(k.name, "tiny_add_0");
    EXPECT_EQ(k.threads, 128);
    EXPECT_GT(k.compile_seconds, 0);
    const std::vector<std::string> expected = {"-std=c++17", "--gpu-architecture=" + arch,
                                               "-default-device", "-lineinfo"};
    EXPECT_EQ(k.options, expected);
    // Deterministic: the same source gives the same cubin (cache entries written by
    // racing processes are interchangeable).
    EXPECT_EQ(compile_kernel(tiny_source(), arch).cubin, k.cubin);
}

INSTANTIATE_TEST_SUITE_P(Archs, CompilerForArch, ::testing::Values("sm_80", "sm_90a"));

TEST(Compiler, EmbeddedTemplatesAreIncludableHeaders) {
    REQUIRE_NVRTC();
    codegen::KernelSource s;
    s.name = "uses_forward_args";
    s.entry = "k";
    s.source = R"(
#include "attnjit/forward/args.h"
#include "attnjit/common/kernel_config.h"
static_assert(attnjit::head_dim_supported(128), "kernel_config.h is the host's too");
struct Params { attnjit::ForwardArgs args; };
extern "C" __global__ void k(const __grid_constant__ Params p) {
    if (p.args.o) static_cast<float*>(p.args.o)[0] = p.args.scale;
}
)";
    CompiledKernel k = compile_kernel(s, "sm_80");
    EXPECT_TRUE(is_elf(k.cubin));
}

TEST(Compiler, SyntaxErrorShowsLogOptionsAndNumberedSource) {
    REQUIRE_NVRTC();
    codegen::KernelSource s = tiny_source();
    s.name = "broken kernel";  // spaces become '_' in the program name
    s.source = "// line 1\n"
               "struct Params { int n; };\n"
               "extern \"C\" __global__ void tiny_add(const __grid_constant__ Params p) {\n"
               "    int x = p.n + undefined_thing;  // user expression lands here\n"
               "}\n";
    try {
        compile_kernel(s, "sm_80");
        FAIL() << "expected CompileFailure";
    } catch (const CompileFailure& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("generated code for kernel 'broken kernel' failed to compile for sm_80"),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("NVRTC_ERROR_COMPILATION"), std::string::npos) << what;
        EXPECT_NE(what.find("report"), std::string::npos) << what;
        EXPECT_NE(what.find("ATTNJIT_DUMP_DIR"), std::string::npos) << what;
        EXPECT_NE(what.find("identifier \"undefined_thing\" is undefined"), std::string::npos)
            << what;
        EXPECT_NE(what.find("--gpu-architecture=sm_80"), std::string::npos) << what;
        EXPECT_NE(what.find("> 4 |     int x = p.n + undefined_thing;"), std::string::npos)
            << what;
        EXPECT_NE(what.find("  1 | // line 1"), std::string::npos) << what;
        EXPECT_NE(e.log().find("broken_kernel.cu(4)"), std::string::npos) << e.log();
        EXPECT_EQ(e.source(), s.source);
        EXPECT_EQ(e.arch(), "sm_80");
        EXPECT_EQ(e.options().at(1), "--gpu-architecture=sm_80");
    }
    // It is an EnvironmentError for callers that only distinguish the three kinds.
    EXPECT_THROW(compile_kernel(s, "sm_80"), EnvironmentError);
}

TEST(Compiler, ArchitectureIsChecked) {
    REQUIRE_NVRTC();
    EXPECT_THROW(compile_kernel(tiny_source(), "sm80"), UserError);
    EXPECT_THROW(compile_kernel(tiny_source(), "compute_80"), UserError);
    try {
        compile_kernel(tiny_source(), "sm_35");
        FAIL() << "sm_35 should not be supported by a current NVRTC";
    } catch (const EnvironmentError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot compile for sm_35"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
    }
    auto archs = nvrtc_supported_archs();
    EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
    EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
}

TEST(Compiler, VersionAndToolchainId) {
    REQUIRE_NVRTC();
    NvrtcVersion v = nvrtc_version();
    EXPECT_GE(v.major, 12);
    const std::string id = nvrtc_toolchain_id();
    EXPECT_EQ(id.rfind("nvrtc " + std::to_string(v.major) + "." + std::to_string(v.minor), 0), 0u)
        << id;
    EXPECT_NE(id.find("libnvrtc"), std::string::npos) << id;
    EXPECT_NE(id.find(" build "), std::string::npos) << "NVRTC ships with an ELF build id: " << id;
    std::cout << "[ info ] " << id << " from " << nvrtc().library << "\n";
}

TEST(Compiler, DumpDirGetsSourceOptionsAndLog) {
    REQUIRE_NVRTC();
    TempDir tmp;
    ScopedEnv dump("ATTNJIT_DUMP_DIR", tmp.path() + "/dumps");
    compile_kernel(tiny_source(), "sm_80");
    auto files = files_under(tmp.path() + "/dumps");
    ASSERT_EQ(files.size(), 3u);
    std::sort(files.begin(), files.end());
    const std::string stem =
        "tiny_add_0." + tiny_source().content_hash().substr(0, 16) + ".sm_80";
    EXPECT_EQ(files[0], stem + ".cu");
    EXPECT_EQ(files[1], stem + ".log.txt");
    EXPECT_EQ(files[2], stem + ".options.txt");
    std::ifstream opts(tmp.path() + "/dumps/" + stem + ".options.txt");
    std::string first;
    std::getline(opts, first);
    EXPECT_EQ(first, "-std=c++17");
}

TEST(Compiler, KernelCacheWithNvrtcHitsDiskInAFreshCache) {
    REQUIRE_NVRTC();
    TempDir tmp;
    std::string cubin;
    {
        KernelCache cache(KernelCache::Options::with_disk_root(tmp.path()));
        cubin = cache.get_compiled(tiny_source(), "sm_90a")->cubin;
        EXPECT_EQ(cache.stats().misses, 1u);
        EXPECT_GT(cache.stats().compile_seconds, 0);
    }
    KernelCache cache(KernelCache::Options::with_disk_root(tmp.path()));
    EXPECT_EQ(cache.get_compiled(tiny_source(), "sm_90a")->cubin, cubin);
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(cache.stats().misses, 0u);
}

// A process that cannot load NVRTC still runs the kernels a process with NVRTC put in
// the disk cache (issue 13): this test compiles a kernel, then re-runs this binary with
// ATTNJIT_LIBNVRTC=/nonexistent, where NoNvrtcChild.ServesTheWarmCache loads it.
constexpr const char* kChildRootVar = "ATTNJIT_TEST_NO_NVRTC_ROOT";
constexpr const char* kChildOutVar = "ATTNJIT_TEST_NO_NVRTC_OUT";

TEST(Compiler, WarmDiskCacheServesAProcessWithoutNvrtc) {
    REQUIRE_NVRTC();
    if (getenv(kChildRootVar)) GTEST_SKIP() << "in the child";
    TempDir tmp;
    const std::string root = tmp.path() + "/cache", out = tmp.path() + "/child.txt";
    std::string cubin;
    {
        KernelCache cache(KernelCache::Options::with_disk_root(root));
        cubin = cache.get_compiled(tiny_source(11), "sm_80")->cubin;
        ASSERT_EQ(cache.stats().misses, 1u);
    }
    std::fflush(nullptr);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        setenv("ATTNJIT_LIBNVRTC", "/nonexistent/libnvrtc.so", 1);
        setenv(kChildRootVar, root.c_str(), 1);
        setenv(kChildOutVar, out.c_str(), 1);
        const char* argv[] = {"/proc/self/exe", "--gtest_filter=NoNvrtcChild.*", nullptr};
        ::execv("/proc/self/exe", const_cast<char* const*>(argv));
        ::_exit(127);
    }
    auto code = testing::wait_child(pid, std::chrono::seconds(120));
    ASSERT_TRUE(code) << "the child was killed or crashed";
    std::ifstream in(out);
    std::string child_hash, disk_hits;
    in >> child_hash >> disk_hits;
    EXPECT_EQ(*code, 0) << "the child's test failed (run it with " << kChildRootVar << " set to see why)";
    EXPECT_EQ(child_hash, sha256_hex(cubin)) << "the child got another cubin";
    EXPECT_EQ(disk_hits, "1");
}

// Runs only in the child above (skips otherwise).
TEST(NoNvrtcChild, ServesTheWarmCache) {
    const char* root = getenv(kChildRootVar);
    const char* out = getenv(kChildOutVar);
    if (!root || !out) GTEST_SKIP() << "runs in the child of Compiler.WarmDiskCacheServesAProcessWithoutNvrtc";
    ASSERT_FALSE(libnvrtc_available()) << "ATTNJIT_LIBNVRTC should point nowhere";
    EXPECT_EQ(nvrtc_toolchain_id(), kNvrtcUnavailable);
    EXPECT_NO_THROW(check_arch("sm_80")) << "the arch check must not need NVRTC";
    KernelCache cache(KernelCache::Options::with_disk_root(root));
    auto k = cache.get_compiled(tiny_source(11), "sm_80");
    EXPECT_TRUE(is_elf(k->cubin));
    EXPECT_EQ(cache.stats().misses, 0u);
    std::ofstream(out) << sha256_hex(k->cubin) << " " << cache.stats().disk_hits << "\n";
    // A kernel nobody compiled: the error says what, why and how to fix it.
    try {
        cache.get_compiled(tiny_source(12), "sm_80");
        ADD_FAILURE() << "compiled without NVRTC?";
    } catch (const EnvironmentError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("cannot get kernel tiny_add_12 for sm_80: it is not in a kernel bundle (none is loaded or linked) nor in the kernel cache"),
                  std::string::npos)
            << msg;
        EXPECT_NE(msg.find("/nonexistent/libnvrtc.so"), std::string::npos) << msg;
        EXPECT_NE(msg.find("set ATTNJIT_LIBNVRTC"), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace attnjit::runtime
