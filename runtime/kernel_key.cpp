#include "runtime/kernel_key.h"

#include "runtime/compiled_kernel.h"
#include "runtime/compiler.h"
#include "support/sha256.h"

namespace attnjit::runtime {

std::string kernel_key(const codegen::KernelSource& source, const std::string& arch,
                       const std::string& toolchain) {
    HashBuilder h;
    h.add("format", kCompiledKernelFormatVersion);
    h.add("source", source.content_hash());
    h.add("arch", arch);
    for (const auto& o : base_compile_options(arch)) h.add("base_option", o);
    h.add("toolchain", toolchain);
    return h.hex();
}

std::string toolchain_index_key(const codegen::KernelSource& source, const std::string& arch) {
    HashBuilder h;
    h.add("format", kCompiledKernelFormatVersion);
    h.add("source", source.content_hash());
    h.add("arch", arch);
    for (const auto& o : base_compile_options(arch)) h.add("base_option", o);
    h.add("toolchain_index", 1);  // a field no kernel_key has: the two never collide
    return h.hex();
}

}  // namespace attnjit::runtime
