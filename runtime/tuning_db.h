// The autotuner's results on disk (api/autotune.h, docs/autotune.md): which configuration won
// for a kernel on a GPU in each shape bucket, so that later processes take it without timing
// again. One JSON document per tuning key:
//
//   <cache dir>/v<kCompiledKernelFormatVersion>/tuning/<key[0:2]>/<key>.json
//   {"format": "attnjit.tuning/1", "key": ..., "what": {...}, "buckets": {"q4096_k4096": {...}}}
//
// The key (TuningKey::id) covers everything that can change the answer: the spec, the kernel
// kind, the GPU (its name and arch), the NVRTC build and the generator version, and the set of
// candidates timed. A write reads the document again under the key's lock (file_lock.h), adds
// its bucket and replaces the file whole (temporary + rename), so concurrent processes never
// see a partial file and never lose each other's buckets. A document that does not parse, or
// that records another key, is ignored with one warning and replaced by the next write. The
// directory is trusted as the disk cache's is (private_dir.h); a configuration read back is
// still only a suggestion: the caller checks it is valid before it compiles it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/common/kernel_config.h"

namespace attnjit::runtime {

struct TuningKey {
    std::string spec;        // the spec's identity, e.g. its hash in hex
    std::string kind;        // kernel_kind_name
    std::string device;      // the GPU's name ("NVIDIA H100 80GB HBM3")
    std::string arch;        // "sm_90a"
    std::string toolchain;   // nvrtc_toolchain_id()
    int generator_version = 0;
    std::string candidates;  // a hash of the candidate configurations timed
    std::string id() const;  // sha256 hex of all of the above
    // The same spec, kernel kind, arch, generator and candidate list, whatever the GPU's name
    // and the compiler (what a kernel bundle's recorded choices are matched by).
    bool same_but_gpu_and_compiler(const TuningKey& other) const {
        return spec == other.spec && kind == other.kind && arch == other.arch &&
               generator_version == other.generator_version && candidates == other.candidates;
    }
};

// What won in one bucket (the tile and main loop that make_config completes into the kernel's
// configuration, and the schedule it launches with), and what the default took there (seconds,
// median of the timed runs).
struct TuningResult {
    TileConfig tile{};
    MainloopKind mainloop = MainloopKind::sm80;
    CtaSchedule schedule{};
    double seconds = 0;
    double default_seconds = 0;
    int candidates = 0;       // how many were timed (failed ones count, as infinitely slow)
    double tuning_seconds = 0;  // compiling and timing them
};

class TuningDb {
public:
    // An empty root: memory only (nothing is read or written).
    explicit TuningDb(std::string root);
    // env::cache_dir(), or memory only when ATTNJIT_DISABLE_DISK_CACHE is set.
    static std::string root_from_env();

    std::optional<TuningResult> find(const TuningKey& key, const std::string& bucket) const;
    // Adds (or replaces) one bucket's result; in memory always, on disk where it can (a
    // failure warns once and the database goes on in memory).
    void store(const TuningKey& key, const std::string& bucket, const TuningResult& result);
    // Every bucket stored under `key` (in memory, else read from disk), by bucket name.
    std::map<std::string, TuningResult> buckets(const TuningKey& key) const;

    // Every document on disk (attnjit-tune --report): its key's fields as recorded, and its
    // buckets; damaged and foreign files are left out. In key order.
    struct Entry {
        TuningKey key;
        std::map<std::string, TuningResult> buckets;
    };
    std::vector<Entry> entries() const;

    std::string path(const TuningKey& key) const;  // "" when memory only
    const std::string& directory() const { return dir_; }

private:
    std::map<std::string, TuningResult> read(const std::string& id) const;
    bool usable() const;  // the directory is private (checked once; a warning otherwise)

    std::string dir_;  // <root>/v<format>/tuning, or empty
    mutable std::mutex mu_;
    mutable std::map<std::string, std::map<std::string, TuningResult>> memory_;  // by key id
    mutable int usable_ = -1;  // -1: not checked yet
    mutable bool warned_ = false;
};

}  // namespace attnjit::runtime
