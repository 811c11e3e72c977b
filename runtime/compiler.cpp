#include "runtime/compiler.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>

#include "codegen/kernel_config.h"
#include "codegen/template_library.h"
#include "runtime/compile_dump.h"
#include "runtime/cuda_api.h"
#include "support/debug.h"
#include "support/env.h"
#include "support/error.h"

namespace attnjit::runtime {
namespace {

// NVRTC names the main file in its log; a readable name makes the log readable.
std::string program_name(const std::string& kernel_name) {
    std::string out;
    for (char c : kernel_name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
    return (out.empty() ? "kernel" : out) + ".cu";
}

// Destroys the NVRTC program on every path out of compile_kernel.
struct ProgramGuard {
    nvrtcProgram prog = nullptr;
    ~ProgramGuard() {
        if (prog) nvrtc().nvrtcDestroyProgram(&prog);
    }
};

}  // namespace

NvrtcVersion nvrtc_version() {
    NvrtcVersion v;
    check_nvrtc(nvrtc().nvrtcVersion(&v.major, &v.minor), "nvrtcVersion");
    return v;
}

std::string nvrtc_toolchain_id() {
    if (!libnvrtc_available()) return kNvrtcUnavailable;
    auto v = nvrtc_version();
    std::string file = nvrtc().library;
    file = file.substr(file.find_last_of('/') + 1);
    // nvrtcVersion has no patch level; the build id tells patch releases apart.
    std::string id = "nvrtc " + std::to_string(v.major) + "." + std::to_string(v.minor) + " " + file;
    if (!nvrtc().build_id.empty()) id += " build " + nvrtc().build_id;
    return id;
}

std::vector<int> nvrtc_supported_archs() {
    const auto& api = nvrtc();
    if (!api.nvrtcGetNumSupportedArchs || !api.nvrtcGetSupportedArchs) return {};
    int n = 0;
    check_nvrtc(api.nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> archs(n);
    if (n > 0) check_nvrtc(api.nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
    return archs;
}

void check_arch(const std::string& arch) {
    const int number = codegen::sm_version(arch);
    if (!libnvrtc_available()) return;  // compile_kernel says so if a kernel is not cached
    auto supported = nvrtc_supported_archs();
    if (supported.empty()) return;
    if (std::find(supported.begin(), supported.end(), number) != supported.end()) return;
    std::string list;
    for (int a : supported) list += " sm_" + std::to_string(a);
    auto v = nvrtc_version();
    environment_error << "NVRTC " << v.major << "." << v.minor << " (" << nvrtc().library
                      << ") cannot compile for " << arch << "; it supports" << list
                      << ". Use a CUDA toolkit that supports " << arch
                      << " (set ATTNJIT_LIBNVRTC to its libnvrtc.so).";
}

std::vector<std::string> base_compile_options(const std::string& arch) {
    // -default-device: generated code and templates need no __device__ on every helper.
    std::vector<std::string> options{"-std=c++17", "--gpu-architecture=" + arch, "-default-device"};
    // Part of every kernel key (kernel_key.cpp): a cached kernel without line info is not reused.
    if (env::lineinfo()) options.push_back("-lineinfo");
    return options;
}

CompiledKernel compile_kernel(const codegen::KernelSource& src, const std::string& arch) {
    const auto& api = nvrtc();
    check_arch(arch);
    auto options = base_compile_options(arch);
    options.insert(options.end(), src.options.begin(), src.options.end());
    internal_check(src.arch.empty() || src.arch == arch)
        << "kernel " << src.name << " was generated for " << src.arch << " but is being compiled for " << arch;
    const std::string prog_name = program_name(src.name);

    const auto& headers = codegen::embedded_templates();
    std::vector<const char*> header_texts, header_names;
    for (const auto& h : headers) {
        header_names.push_back(h.name);
        header_texts.push_back(h.text);
    }
    std::vector<const char*> option_ptrs;
    for (const auto& o : options) option_ptrs.push_back(o.c_str());

    auto start = std::chrono::steady_clock::now();
    ProgramGuard guard;
    check_nvrtc(api.nvrtcCreateProgram(&guard.prog, src.source.c_str(), prog_name.c_str(),
                                       static_cast<int>(headers.size()), header_texts.data(),
                                       header_names.data()),
                "nvrtcCreateProgram");
    nvrtcResult result = api.nvrtcCompileProgram(guard.prog, static_cast<int>(option_ptrs.size()),
                                                 option_ptrs.data());
    std::string log;
    size_t log_size = 0;
    if (api.nvrtcGetProgramLogSize(guard.prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
        log.resize(log_size);
        api.nvrtcGetProgramLog(guard.prog, log.data());
        while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    dump_compile_if_requested(src, prog_name, arch, options, log);
    if (result != NVRTC_SUCCESS)
        throw CompileFailure(src.name, prog_name, arch, nvrtc_error_name(result), log, options,
                             src.source);

    CompiledKernel k;
    size_t cubin_size = 0;
    check_nvrtc(api.nvrtcGetCUBINSize(guard.prog, &cubin_size), "nvrtcGetCUBINSize");
    internal_check(cubin_size > 0) << "NVRTC produced no cubin for " << src.name << " (" << arch
                                   << ") although check_arch accepted the architecture";
    k.cubin.resize(cubin_size);
    check_nvrtc(api.nvrtcGetCUBIN(guard.prog, k.cubin.data()), "nvrtcGetCUBIN");
    k.compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    k.name = src.name;
    k.entry = src.entry;
    k.arch = arch;
    k.log = std::move(log);
    k.options = std::move(options);
    k.config = src.config;
    k.threads = src.threads;
    k.smem_bytes = src.smem_bytes;
    debug(1) << "compiled " << k;
    return k;
}

}  // namespace attnjit::runtime
