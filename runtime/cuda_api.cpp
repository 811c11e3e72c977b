#include "runtime/cuda_api.h"

#include <mutex>
#include <sstream>

#include "runtime/dynamic_library.h"
#include "support/debug.h"
#include "support/env.h"
#include "support/error.h"

namespace attnjit::runtime {
namespace {

// Two-level stringification so a macro-renamed function (cuMemAlloc -> cuMemAlloc_v2)
// is looked up under the symbol the header would have linked against.
#define ATTNJIT_STR2(x) #x
#define ATTNJIT_STR(x) ATTNJIT_STR2(x)

template <class Api>
struct Loaded {
    Api api;
    std::optional<std::string> error;  // set when unusable
};

template <class Fn>
bool bind(const DynamicLibrary& lib, Fn& fn, const char* name, std::string& missing) {
    fn = reinterpret_cast<Fn>(lib.symbol(name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    return fn != nullptr;
}

const Loaded<CudaDriverApi>& loaded_cuda() {
    static const Loaded<CudaDriverApi> loaded = [] {
        Loaded<CudaDriverApi> r;
        auto candidates = libcuda_candidates();
        DynamicLibrary lib = DynamicLibrary::open_first(candidates);
        if (!lib.ok()) {
            r.error = "libcuda (the NVIDIA driver) could not be loaded; dlopen said:" +
                      lib.error() +
                      "\n  Install the NVIDIA driver, or set ATTNJIT_LIBCUDA to the full path "
                      "of libcuda.so.1.";
            return r;
        }
        std::string missing;
#define ATTNJIT_BIND(fn) bind(lib, r.api.fn, ATTNJIT_STR(fn), missing);
        ATTNJIT_CUDA_DRIVER_FUNCTIONS(ATTNJIT_BIND)
#undef ATTNJIT_BIND
        r.api.cuFuncGetParamInfo =
            reinterpret_cast<decltype(r.api.cuFuncGetParamInfo)>(lib.symbol("cuFuncGetParamInfo"));
        r.api.cuTensorMapEncodeTiled =
            reinterpret_cast<decltype(r.api.cuTensorMapEncodeTiled)>(lib.symbol("cuTensorMapEncodeTiled"));
        r.api.library = lib.resolved_path();
        if (!missing.empty()) {
            r.error = "libcuda at " + r.api.library + " lacks " + missing +
                      "; the driver is too old for attnjit. Update the NVIDIA driver.";
        }
        debug(1) << "libcuda: " << (r.error ? *r.error : r.api.library);
        return r;
    }();
    return loaded;
}

const Loaded<NvrtcApi>& loaded_nvrtc() {
    static const Loaded<NvrtcApi> loaded = [] {
        Loaded<NvrtcApi> r;
        DynamicLibrary lib = DynamicLibrary::open_first(libnvrtc_candidates());
        if (!lib.ok()) {
            r.error = "libnvrtc (the CUDA runtime compiler, needed to compile kernels) could "
                      "not be loaded; dlopen said:" +
                      lib.error() +
                      "\n  Install the CUDA toolkit's NVRTC (12.x or 13.x), or set "
                      "ATTNJIT_LIBNVRTC to the full path of libnvrtc.so.";
            return r;
        }
        std::string missing;
#define ATTNJIT_BIND(fn) bind(lib, r.api.fn, ATTNJIT_STR(fn), missing);
        ATTNJIT_NVRTC_FUNCTIONS(ATTNJIT_BIND)
#undef ATTNJIT_BIND
        r.api.nvrtcGetNumSupportedArchs = reinterpret_cast<decltype(r.api.nvrtcGetNumSupportedArchs)>(
            lib.symbol("nvrtcGetNumSupportedArchs"));
        r.api.nvrtcGetSupportedArchs = reinterpret_cast<decltype(r.api.nvrtcGetSupportedArchs)>(
            lib.symbol("nvrtcGetSupportedArchs"));
        r.api.library = lib.resolved_path();
        r.api.build_id = lib.build_id();
        if (!missing.empty()) {
            r.error = "libnvrtc at " + r.api.library + " lacks " + missing +
                      "; it is too old for attnjit. Install NVRTC 12.x or 13.x, or point "
                      "ATTNJIT_LIBNVRTC at one.";
        }
        debug(1) << "libnvrtc: " << (r.error ? *r.error : r.api.library);
        return r;
    }();
    return loaded;
}

struct InitState {
    std::optional<std::string> error;
};

const InitState& init_state() {
    static const InitState state = [] {
        InitState s;
        if (auto why = why_no_libcuda()) {
            s.error = *why;
            return s;
        }
        CUresult r = loaded_cuda().api.cuInit(0);
        if (r != CUDA_SUCCESS) {
            s.error = "cuInit failed: " + cu_error_name(r) +
                      (r == CUDA_ERROR_NO_DEVICE
                           ? " (the driver sees no CUDA device; check CUDA_VISIBLE_DEVICES)"
                           : " (check the driver installation with nvidia-smi)");
        }
        return s;
    }();
    return state;
}

}  // namespace

std::vector<std::string> libcuda_candidates() {
    if (auto p = env::libcuda_path()) return {*p};
    return {"libcuda.so.1", "libcuda.so"};
}

std::vector<std::string> libnvrtc_candidates() {
    if (auto p = env::libnvrtc_path()) return {*p};
    const std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    std::vector<std::string> dirs = {"", "/usr/local/cuda/lib64/"};
    if (auto home = env::cuda_home()) dirs.push_back(*home + "/lib64/");
    std::vector<std::string> out;
    for (const auto& d : dirs)
        for (const auto& n : names) out.push_back(d + n);
    return out;
}

std::optional<std::string> why_no_libcuda() { return loaded_cuda().error; }
std::optional<std::string> why_no_libnvrtc() { return loaded_nvrtc().error; }

const CudaDriverApi& cuda() {
    const auto& l = loaded_cuda();
    if (l.error) environment_error << *l.error;
    return l.api;
}

const NvrtcApi& nvrtc() {
    const auto& l = loaded_nvrtc();
    if (l.error) environment_error << *l.error;
    return l.api;
}

std::string cu_error_name(CUresult r) {
    std::ostringstream s;
    const auto& l = loaded_cuda();
    const char* name = nullptr;
    const char* desc = nullptr;
    if (!l.error) {
        l.api.cuGetErrorName(r, &name);
        l.api.cuGetErrorString(r, &desc);
    }
    if (name) s << name;
    else s << "CUresult " << static_cast<int>(r);
    if (desc) s << " (" << desc << ")";
    return s.str();
}

std::string nvrtc_error_name(nvrtcResult r) {
    const auto& l = loaded_nvrtc();
    if (!l.error) return l.api.nvrtcGetErrorString(r);
    return "nvrtcResult " + std::to_string(static_cast<int>(r));
}

void check_cu(CUresult r, std::string_view what) {
    if (r != CUDA_SUCCESS) environment_error << what << " failed: " << cu_error_name(r);
}

void check_nvrtc(nvrtcResult r, std::string_view what) {
    if (r != NVRTC_SUCCESS) environment_error << what << " failed: " << nvrtc_error_name(r);
}

std::optional<std::string> why_cuda_init_failed() { return init_state().error; }

void cuda_init() {
    if (const auto& e = init_state().error) environment_error << *e;
}

CUcontext current_context() {
    cuda_init();
    const auto& cu = cuda();
    CUcontext ctx = nullptr;
    check_cu(cu.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    if (ctx) return ctx;
    // Retain once per process and keep it: releasing would destroy the context under
    // every module loaded into it.
    static std::mutex mu;
    static CUcontext primary = nullptr;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (!primary) {
            CUdevice dev = 0;
            check_cu(cu.cuDeviceGet(&dev, 0), "cuDeviceGet(0)");
            check_cu(cu.cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
        }
        ctx = primary;
    }
    check_cu(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    return ctx;
}

}  // namespace attnjit::runtime
