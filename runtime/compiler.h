// NVRTC: KernelSource + architecture -> CompiledKernel (a cubin). Needs only libnvrtc,
// never a GPU, so kernels for any supported architecture can be built anywhere (tests,
// AOT). The embedded templates are handed to NVRTC as in-memory headers.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_source.h"
#include "runtime/compile_failure.h"
#include "runtime/compiled_kernel.h"

namespace attnjit::runtime {

struct NvrtcVersion {
    int major = 0;
    int minor = 0;
};

// Throws EnvironmentError when libnvrtc is missing.
NvrtcVersion nvrtc_version();
// Identifies the compiler for cache keys: "nvrtc 13.0 libnvrtc.so.13 build 65be0d..."
// (the ELF build id tells patch releases apart), or kNvrtcUnavailable.
std::string nvrtc_toolchain_id();
// The toolchain of a process that cannot load NVRTC. A KernelCache with it still serves
// kernels that are on disk, compiled by whichever NVRTC last compiled them.
inline constexpr const char* kNvrtcUnavailable = "nvrtc unavailable";
// The architectures this NVRTC can target, e.g. {75, 80, 86, ..., 120}; empty if NVRTC
// cannot say (older than 11.2).
std::vector<int> nvrtc_supported_archs();

// UserError unless `arch` looks like "sm_80", "sm_90a" or "sm_100f" (codegen::sm_version;
// whether attnjit's kernels support it is codegen::supported_sm_version's to say, when a
// kernel is configured); EnvironmentError when the loaded NVRTC cannot target it. Without NVRTC only the first check is made (cached kernels need no compiler).
void check_arch(const std::string& arch);

// The options every compile uses, before the source's own ones. Part of the cache key.
std::vector<std::string> base_compile_options(const std::string& arch);

// Compiles `source` for `arch`. Throws CompileFailure (with log, options and numbered
// source) when NVRTC rejects the code, EnvironmentError when NVRTC is missing. With
// ATTNJIT_DUMP_DIR set, writes <name>.<hash>.<arch>.{cu,options.txt,log.txt} there.
CompiledKernel compile_kernel(const codegen::KernelSource& source, const std::string& arch);

}  // namespace attnjit::runtime
