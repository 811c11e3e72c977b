// NVRTC's output for one KernelSource and one architecture: the cubin plus what is
// needed to load and launch it, and to explain it later (log, options). Serialisable,
// so the disk cache and AOT bundles can store it.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "attnjit/common/kernel_config.h"

namespace attnjit::runtime {

struct CompiledKernel {
    std::string key;                   // kernel_key() it was built for (set by KernelCache);
                                       // the disk cache loads an entry only under this key
    std::string name;                  // KernelSource::name
    std::string entry;                 // extern "C" symbol to look up after loading
    std::string arch;                  // "sm_80", "sm_90a"
    std::string cubin;                 // raw bytes
    std::string log;                   // NVRTC's log (warnings), may be empty
    std::vector<std::string> options;  // the full NVRTC option list used
    KernelConfig config{};             // KernelSource::config: kind, main loop, dtype, dims, tile
    int threads = 0;                   // block size the kernel was built for
    int smem_bytes = 0;                // dynamic shared memory it needs
    double compile_seconds = 0;        // how long NVRTC took (0 for hand-made entries)
};

std::ostream& operator<<(std::ostream& os, const CompiledKernel& k);

// File format of serialize(). WARNING: change the layout in any way (field order,
// a new field, an encoding) and you MUST bump this; the golden test in
// tests/runtime/compiled_kernel_test.cpp fails until you do. The disk cache keeps each
// version in its own directory, so old entries are simply never read.
// Version 2 added `key`; version 3 `config`; version 4 its score_conv field.
inline constexpr int kCompiledKernelFormatVersion = 4;

// Layout: "ATTNJITK" | u32 version | u64 payload size | 64 hex chars sha256(payload) |
// payload. Payload: the fields above in declaration order; strings as u64 length +
// bytes, ints as i64, the double as its IEEE bits; all little-endian.
std::string serialize(const CompiledKernel& k);

// The header is what a reader checks before reading further.
inline constexpr size_t kCompiledKernelHeaderBytes = 8 + 4 + 8 + 64;
// Larger payloads are refused unread: a cubin is a few MB, and a damaged or planted
// header must not make a reader allocate gigabytes.
inline constexpr uint64_t kMaxCompiledKernelPayloadBytes = uint64_t(256) << 20;

// The whole size of the entry that starts with `header` (at least
// kCompiledKernelHeaderBytes), or null when the header is not one of the current
// version or states a payload over kMaxCompiledKernelPayloadBytes; `why_not` says which.
std::optional<uint64_t> serialized_size(std::string_view header, std::string* why_not = nullptr);

// Null when the bytes are not a complete, intact entry of the current version (bad
// magic, other version, truncated, oversized, checksum mismatch, trailing junk);
// `why_not` says which. Never throws on bad input. An intact entry can still be the
// wrong one: the caller compares `key` (see DiskCache::load).
std::optional<CompiledKernel> deserialize(std::string_view bytes, std::string* why_not = nullptr);

}  // namespace attnjit::runtime
