// What the kernel cache did, for users (is the disk cache working?) and for tests.
#pragma once

#include <cstdint>
#include <ostream>

namespace attnjit::runtime {

struct CacheStats {
    uint64_t memory_hits = 0;          // served from memory (incl. the fast path and
                                       // threads that waited on another's compile)
    uint64_t bundle_hits = 0;          // from a kernel bundle (kernel_bundle.h: compiled ahead of time)
    uint64_t disk_hits = 0;            // read from the disk cache
    uint64_t misses = 0;               // compiled (each costs an NVRTC run)
    uint64_t corrupt_entries = 0;      // disk entries found damaged, removed and rebuilt
    uint64_t disk_write_failures = 0;  // compiled kernels that could not be written
    uint64_t lock_timeouts = 0;        // compiled without the disk cache because another
                                       // process held the kernel's lock too long
    uint64_t loads = 0;                // modules loaded into a context
    double compile_seconds = 0;        // total NVRTC time of the misses
};

inline std::ostream& operator<<(std::ostream& os, const CacheStats& s) {
    return os << "CacheStats(memory hits " << s.memory_hits << ", bundle hits " << s.bundle_hits << ", disk hits " << s.disk_hits
              << ", misses " << s.misses << " (" << s.compile_seconds << " s compiling)"
              << ", corrupt entries " << s.corrupt_entries << ", disk write failures "
              << s.disk_write_failures << ", lock timeouts " << s.lock_timeouts
              << ", module loads " << s.loads << ")";
}

}  // namespace attnjit::runtime
