// The content-addressed key of a compiled kernel: sha256 over everything that can
// change the cubin (Triton's cache key): the source's content hash (generator version,
// templates hash, source, options, launch shape), the architecture, the compiler's
// fixed options, the NVRTC build and the file format. Same inputs, same key, on every
// machine; anything else different, a different key.
#pragma once

#include <string>

#include "codegen/kernel_source.h"

namespace attnjit::runtime {

// `toolchain` identifies the compiler, normally nvrtc_toolchain_id().
std::string kernel_key(const codegen::KernelSource& source, const std::string& arch,
                       const std::string& toolchain);

// The same inputs without the toolchain: names the disk cache's toolchain index, which
// records the toolchain that last compiled this kernel, so a process without NVRTC can
// still compute that kernel's full key and load it (KernelCache). Never the key of an
// entry itself.
std::string toolchain_index_key(const codegen::KernelSource& source, const std::string& arch);

}  // namespace attnjit::runtime
