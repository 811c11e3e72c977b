// The C++ source that links a kernel bundle into a program (the CMake function
// attnjit_add_kernel_bundle, cmake/AttnjitKernelBundle.cmake): the bundle's entries by the
// assembler's .incbin from the bundle directory (no multi-megabyte array literals), its
// manifest as a string, and a registration at static initialisation with
// attnjit::runtime::register_linked_bundle, or, compiled with ATTNJIT_BUNDLE_C_API defined
// (a program that uses libattnjit_c), with the C API's attnjit_register_linked_bundle. It
// includes no attnjit header, so it builds with the C API's include path alone.
#pragma once

#include <string>

#include "runtime/kernel_bundle.h"

namespace attnjit::tools {

// `name`: the bundle's name in messages, also the stem of its symbols (made a C identifier);
// `directory`: where the bundle's kernels/ are, an absolute path (the assembler reads them).
std::string linked_bundle_source(const std::string& name, const std::string& directory,
                                 const runtime::BundleManifest& manifest);

}  // namespace attnjit::tools
