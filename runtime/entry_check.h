// Whether a kernel read from the disk cache is the one a source asks for. The disk
// cache already matched the key recorded in the entry; this compares what loading and
// launching rely on, so that an entry that is intact but wrong (planted, or written by
// a bug) is rebuilt instead of run.
#pragma once

#include <string>
#include <string_view>

#include "codegen/kernel_source.h"
#include "runtime/compiled_kernel.h"

namespace attnjit::runtime {

// "" when `k` is `source` compiled for `arch` (symbol, architecture, block size, shared
// memory) and its cubin is a CUDA ELF; otherwise what differs. Not the name: sources
// that differ only in name share a key (KernelSource::content_hash) and one entry.
std::string why_entry_does_not_match(const CompiledKernel& k, const codegen::KernelSource& source,
                                     const std::string& arch);

// "" when `bytes` start like a cubin: a 64-bit little-endian ELF for EM_CUDA.
std::string why_not_a_cubin(std::string_view bytes);

}  // namespace attnjit::runtime
