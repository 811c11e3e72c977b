#include "runtime/loaded_kernel.h"

#include "runtime/cuda_api.h"
#include "runtime/device.h"
#include "support/debug.h"
#include "support/error.h"

namespace attnjit::runtime {

LoadedKernel::LoadedKernel(std::shared_ptr<const CompiledKernel> compiled)
    : compiled_(std::move(compiled)) {
    internal_check(compiled_ != nullptr) << "LoadedKernel needs a compiled kernel";
    const auto& k = *compiled_;
    const auto& cu = cuda();
    context_ = current_context();
    const DeviceInfo dev = current_device();

    CUresult r = cu.cuModuleLoadData(&module_, k.cubin.data());
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
        r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        environment_error << "kernel '" << k.name << "' was compiled for " << k.arch
                          << " and cannot run on " << dev << ": " << cu_error_name(r)
                          << ". Compile it for " << dev.arch()
                          << " (KernelCache does so for the current device).";
    check_cu(r, "cuModuleLoadData(" + k.name + ")");
    // The destructor does not run when the constructor throws: unload on every error.
    struct UnloadOnError {
        CUmodule& m;
        bool armed = true;
        ~UnloadOnError() {
            if (armed) cuda().cuModuleUnload(m);
        }
    } guard{module_};

    r = cu.cuModuleGetFunction(&function_, module_, k.entry.c_str());
    if (r != CUDA_SUCCESS) {
        internal_error << "kernel '" << k.name << "' has no entry '" << k.entry
                       << "' (cuModuleGetFunction: " << cu_error_name(r)
                       << "); the generated source and KernelSource::entry disagree";
    }

    // Past 48 KiB (less any static shared memory) a kernel must opt in, and the device
    // has a hard limit; say which when the tile asks for more than it can give.
    int static_smem = 0;
    check_cu(cu.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function_),
             "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
    max_dynamic_smem_ = dev.max_smem_per_block - static_smem;
    if (k.smem_bytes > max_dynamic_smem_) {
        if (static_smem + k.smem_bytes > dev.max_smem_per_block_optin) {
            environment_error << "kernel '" << k.name << "' needs " << k.smem_bytes
                              << " bytes of dynamic shared memory (+" << static_smem
                              << " static) per block, but " << dev << " allows at most "
                              << dev.max_smem_per_block_optin
                              << ". Use a smaller tile (fewer stages or a smaller block_n) "
                                 "for this device.";
        }
        check_cu(cu.cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       k.smem_bytes),
                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        max_dynamic_smem_ = k.smem_bytes;
    }

    if (cu.cuFuncGetParamInfo) {
        size_t offset = 0, size = 0;
        if (cu.cuFuncGetParamInfo(function_, 0, &offset, &size) == CUDA_SUCCESS)
            params_size_ = size;
    }
    guard.armed = false;
    debug(2) << "loaded " << *this;
}

LoadedKernel::~LoadedKernel() {
    // At process exit the driver may be gone already; nothing useful to do on error.
    if (module_) cuda().cuModuleUnload(module_);
}

void LoadedKernel::launch(Dim3 grid, Dim3 block, unsigned smem_bytes, const void* params,
                          size_t params_size, CUstream stream, const void* second) const {
    const auto& k = *compiled_;
    const auto& cu = cuda();
    internal_check(params != nullptr) << "launch of '" << k.name << "' without Params";
    internal_check(!params_size_ || *params_size_ == params_size)
        << "launch of '" << k.name << "' packs " << params_size
        << " bytes of Params, but the kernel's parameter is " << *params_size_
        << " bytes: the host and generated Params layouts disagree";
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    user_check(k.threads == 0 || threads == static_cast<unsigned long long>(k.threads))
        << "kernel '" << k.name << "' was built for " << k.threads
        << " threads per block; launch asks for " << threads;
    user_check(static_cast<long long>(smem_bytes) <= max_dynamic_smem_)
        << "kernel '" << k.name << "' was loaded for at most " << max_dynamic_smem_
        << " bytes of dynamic shared memory; launch asks for " << smem_bytes;

    // A module only runs in its own context. A thread with none gets ours (as the CUDA
    // runtime would); a thread with another one is a caller mistake.
    CUcontext cur = nullptr;
    check_cu(cu.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
    if (!cur) check_cu(cu.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
    else
        user_check(cur == context_)
            << "kernel '" << k.name << "' was loaded in another CUDA context than the one "
            << "current on this thread (another GPU or context); construct the Attention (or get the "
            << "kernel from KernelCache) while the context you launch in is current";

    void* args[] = {const_cast<void*>(params), const_cast<void*>(second)};
    CUresult r = cu.cuLaunchKernel(function_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                   smem_bytes, stream, args, nullptr);
    if (r != CUDA_SUCCESS)
        environment_error << "launching kernel '" << k.name << "' (grid " << grid.x << "x"
                          << grid.y << "x" << grid.z << ", block " << block.x << "x" << block.y
                          << "x" << block.z << ", " << smem_bytes
                          << " B dynamic shared memory) failed: " << cu_error_name(r);
}

std::ostream& operator<<(std::ostream& os, const LoadedKernel& k) {
    os << "LoadedKernel(" << k.compiled().name << ", " << k.compiled().arch << ", context "
       << static_cast<const void*>(k.context()) << ", up to " << k.max_dynamic_smem()
       << " B dynamic smem";
    if (k.params_size()) os << ", " << *k.params_size() << " B params";
    return os << ")";
}

}  // namespace attnjit::runtime
