// Kernel bundles through the C API (runtime/kernel_bundle.h): this library's own registry,
// which its KernelCache searches (a program that also links the C++ libraries has another).
#include "attnjit/attnjit_c.h"
#include "capi/status.h"
#include "runtime/kernel_bundle.h"

using attnjit::capi::guarded;

extern "C" {

attnjit_status attnjit_load_bundle(const char* directory, int64_t* num_kernels) {
    return guarded("attnjit_load_bundle", [&] {
        if (num_kernels) *num_kernels = 0;
        user_check(directory) << "argument 'directory' is null; pass the --out directory of attnjit-aot";
        const size_t n = attnjit::runtime::load_bundle(directory);
        if (num_kernels) *num_kernels = static_cast<int64_t>(n);
    });
}

int32_t attnjit_num_bundles(void) {
    return static_cast<int32_t>(attnjit::runtime::BundleRegistry::global().size());
}

int32_t attnjit_register_linked_bundle(const char* name, const char* manifest, size_t manifest_size,
                                       const unsigned char* const* entries, const size_t* sizes, size_t count) {
    attnjit::runtime::register_linked_bundle(name, manifest, manifest_size, entries, sizes, count);
    return 0;
}

}  // extern "C"
