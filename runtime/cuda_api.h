// The CUDA driver API and NVRTC, loaded with dlopen (never linked), as tables of
// function pointers. cuda.h and nvrtc.h are used for types only, so attnjit builds and
// its CPU tests run on machines with no driver and no GPU (jitify2's LibCuda/LibNvrtc).
//
//   const auto& cu = runtime::cuda();          // throws EnvironmentError if absent
//   check_cu(cu.cuModuleLoadData(&m, image), "cuModuleLoadData");
//
// Calls go through the table; names like cuMemAlloc are macros in cuda.h that select
// the current ABI version (cuMemAlloc_v2), and the table uses the same macros, so
// `cuda().cuMemAlloc(...)` calls the right symbol.
#pragma once

#include <cuda.h>
#include <nvrtc.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnjit::runtime {

// Required driver entry points. Add here when you need another one.
#define ATTNJIT_CUDA_DRIVER_FUNCTIONS(X)                                                  \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)                 \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute)        \
    X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)  \
    X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)     \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuMemAlloc)          \
    X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuStreamSynchronize)      \
    X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)         \
    X(cuEventDestroy) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemsetD8Async) X(cuStreamIsCapturing)

#define ATTNJIT_NVRTC_FUNCTIONS(X)                                                        \
    X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)   \
    X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)                \
    X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)

#define ATTNJIT_DECLARE_API_FUNCTION(fn) decltype(&::fn) fn = nullptr;

struct CudaDriverApi {
    ATTNJIT_CUDA_DRIVER_FUNCTIONS(ATTNJIT_DECLARE_API_FUNCTION)
    // Optional (driver >= 12.4): lets LoadedKernel check the Params size it is given.
    decltype(&::cuFuncGetParamInfo) cuFuncGetParamInfo = nullptr;
    // Optional (driver >= 12.0): the bulk tensor copy descriptors of the sm90 main loop.
    decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;
    std::string library;  // the file that was opened
};

struct NvrtcApi {
    ATTNJIT_NVRTC_FUNCTIONS(ATTNJIT_DECLARE_API_FUNCTION)
    // Optional: lets the compiler name the supported architectures in its errors.
    decltype(&::nvrtcGetNumSupportedArchs) nvrtcGetNumSupportedArchs = nullptr;
    decltype(&::nvrtcGetSupportedArchs) nvrtcGetSupportedArchs = nullptr;
    std::string library;   // the file that was opened, symlinks resolved
    std::string build_id;  // its ELF build id (exact binary), may be empty
};

#undef ATTNJIT_DECLARE_API_FUNCTION

// Where we look, in order: ATTNJIT_LIBCUDA alone if set, else libcuda.so.1, libcuda.so.
std::vector<std::string> libcuda_candidates();
// ATTNJIT_LIBNVRTC alone if set, else libnvrtc.so.{13,12}, libnvrtc.so, each also in
// /usr/local/cuda/lib64 and $CUDA_HOME/lib64.
std::vector<std::string> libnvrtc_candidates();

// Loaded once per process (thread-safe), on first use. The reason is what dlopen said
// about every candidate, or which required symbol was missing.
std::optional<std::string> why_no_libcuda();
std::optional<std::string> why_no_libnvrtc();
inline bool libcuda_available() { return !why_no_libcuda(); }
inline bool libnvrtc_available() { return !why_no_libnvrtc(); }

// The tables. Throw EnvironmentError naming the library, dlopen's answer and the fix.
const CudaDriverApi& cuda();
const NvrtcApi& nvrtc();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; works without a driver (prints the number).
std::string cu_error_name(CUresult r);
std::string nvrtc_error_name(nvrtcResult r);

// Throw EnvironmentError "<what> failed: <name>" unless the call succeeded.
void check_cu(CUresult r, std::string_view what);
void check_nvrtc(nvrtcResult r, std::string_view what);

// cuInit(0), once per process, thread-safe. why_cuda_init_failed() gives the reason
// (library missing or cuInit's error) without throwing; cuda_init() throws it.
std::optional<std::string> why_cuda_init_failed();
void cuda_init();

// The calling thread's current context. When none is current, retains the primary
// context of device 0 (the CUDA runtime's default device), makes it current and keeps
// it for the life of the process, as the runtime API does.
CUcontext current_context();

}  // namespace attnjit::runtime
