// What the current GPU is and can do, asked of the driver. Nothing here needs a GPU to
// be linked or built; why_no_gpu() is how tests decide to skip.
#pragma once

#include <cuda.h>

#include <optional>
#include <ostream>
#include <string>

namespace attnjit::runtime {

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int cc_major = 0;
    int cc_minor = 0;
    int sm_count = 0;
    int max_smem_per_block = 0;        // without opt-in (48 KiB on every current GPU)
    int max_smem_per_block_optin = 0;  // what a kernel can ask for with the attribute

    // The NVRTC architecture we compile for on this device (arch_for_compute_capability).
    std::string arch() const;
};

std::ostream& operator<<(std::ostream& os, const DeviceInfo& d);

// Null when a GPU is usable; otherwise why not ("libcuda could not be loaded: ...",
// "cuInit failed: CUDA_ERROR_NO_DEVICE ...", "the driver reports 0 CUDA devices").
std::optional<std::string> why_no_gpu();

int device_count();
DeviceInfo device_info(int ordinal);
// The device of the current context (current_context() retains one if needed).
DeviceInfo current_device();

// "sm_80" for 8.0, "sm_90a" for 9.0 (the arch-specific target: wgmma and setmaxnreg
// need it, and a cubin for one device needs no forward compatibility), "sm_120" for 12.0.
std::string arch_for_compute_capability(int major, int minor);

}  // namespace attnjit::runtime
