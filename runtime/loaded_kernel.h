// A CompiledKernel loaded into one CUDA context: an RAII CUmodule and the entry's
// CUfunction, configured for the dynamic shared memory it needs, and launched with the
// packed Params struct as its single argument (templates/README.md). Modules belong to
// a context, so KernelCache keeps one LoadedKernel per (context, kernel).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <type_traits>

#include "runtime/compiled_kernel.h"

namespace attnjit::runtime {

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

class LoadedKernel {
public:
    // Loads into current_context(). Throws EnvironmentError when the cubin does not fit
    // the device (wrong architecture, more shared memory than it can give).
    explicit LoadedKernel(std::shared_ptr<const CompiledKernel> compiled);
    ~LoadedKernel();
    LoadedKernel(const LoadedKernel&) = delete;
    LoadedKernel& operator=(const LoadedKernel&) = delete;

    // Launches on `stream` (null: the context's default stream) with `params` (the bytes
    // of the Params struct) as the first kernel argument and `second` (when not null: the
    // sm90 forward's bulk-copy descriptors, attnjit::ForwardTmaMaps) as the second. Checks the
    // arguments first and the launch result after; does not synchronise.
    void launch(Dim3 grid, Dim3 block, unsigned smem_bytes, const void* params,
                size_t params_size, CUstream stream = nullptr, const void* second = nullptr) const;

    template <class Params>
    void launch(Dim3 grid, Dim3 block, unsigned smem_bytes, const Params& params,
                CUstream stream = nullptr) const {
        static_assert(std::is_trivially_copyable_v<Params>,
                      "kernel parameters are copied byte for byte: Params must be trivially "
                      "copyable");
        launch(grid, block, smem_bytes, &params, sizeof(Params), stream);
    }

    const CompiledKernel& compiled() const { return *compiled_; }
    CUcontext context() const { return context_; }
    CUmodule module() const { return module_; }
    CUfunction function() const { return function_; }
    // What launch() accepts as smem_bytes.
    int max_dynamic_smem() const { return max_dynamic_smem_; }
    // Size of the kernel's parameter as the cubin records it; null when the driver is
    // older than 12.4 and cannot tell.
    std::optional<size_t> params_size() const { return params_size_; }

private:
    std::shared_ptr<const CompiledKernel> compiled_;
    CUcontext context_ = nullptr;
    CUmodule module_ = nullptr;
    CUfunction function_ = nullptr;
    int max_dynamic_smem_ = 0;
    std::optional<size_t> params_size_;
};

std::ostream& operator<<(std::ostream& os, const LoadedKernel& k);

}  // namespace attnjit::runtime
