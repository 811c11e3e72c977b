#include "runtime/device.h"

#include <mutex>
#include <unordered_map>

#include "runtime/cuda_api.h"

namespace attnjit::runtime {

std::string DeviceInfo::arch() const { return arch_for_compute_capability(cc_major, cc_minor); }

std::ostream& operator<<(std::ostream& os, const DeviceInfo& d) {
    return os << "Device " << d.ordinal << " (" << d.name << ", " << d.arch() << ", "
              << d.sm_count << " SMs, " << d.max_smem_per_block_optin / 1024
              << " KiB opt-in shared memory per block)";
}

std::optional<std::string> why_no_gpu() {
    if (auto why = why_cuda_init_failed()) return why;
    int n = 0;
    CUresult r = cuda().cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS) return "cuDeviceGetCount failed: " + cu_error_name(r);
    if (n == 0) return std::string("the driver reports 0 CUDA devices");
    return std::nullopt;
}

int device_count() {
    cuda_init();
    int n = 0;
    check_cu(cuda().cuDeviceGetCount(&n), "cuDeviceGetCount");
    return n;
}

DeviceInfo device_info(int ordinal) {
    // Attribute queries are cheap but not free; launch paths ask per call.
    static std::mutex mu;
    static std::unordered_map<int, DeviceInfo> cached;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (auto it = cached.find(ordinal); it != cached.end()) return it->second;
    }
    cuda_init();
    const auto& cu = cuda();
    CUdevice dev = 0;
    check_cu(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet(" + std::to_string(ordinal) + ")");
    DeviceInfo d;
    d.ordinal = ordinal;
    char name[256] = {};
    check_cu(cu.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
    d.name = name;
    auto attr = [&](CUdevice_attribute a, const char* what) {
        int v = 0;
        check_cu(cu.cuDeviceGetAttribute(&v, a, dev), what);
        return v;
    };
    d.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability query");
    d.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability query");
    d.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count query");
    d.max_smem_per_block =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory query");
    d.max_smem_per_block_optin =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory query");
    std::lock_guard<std::mutex> lock(mu);
    cached[ordinal] = d;
    return d;
}

DeviceInfo current_device() {
    current_context();
    CUdevice dev = 0;
    check_cu(cuda().cuCtxGetDevice(&dev), "cuCtxGetDevice");
    // CUdevice is the ordinal for devices obtained through cuDeviceGet.
    return device_info(static_cast<int>(dev));
}

std::string arch_for_compute_capability(int major, int minor) {
    std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
    if (major == 9 && minor == 0) arch += "a";
    return arch;
}

}  // namespace attnjit::runtime
