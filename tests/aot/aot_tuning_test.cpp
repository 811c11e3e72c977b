// attnjit-aot --tuning (docs/autotune.md): a tuning database's choice for a spec on sm_90a goes
// into the bundle with its kernel; a process that loads the bundle finds the choice for the GPU
// and bucket it was tuned on (and no other), and gets its kernel from the bundle, with NVRTC
// unloadable (ctest points ATTNJIT_LIBNVRTC at a file that does not exist) and no disk cache.
// Choices for another arch, over another candidate list or outside today's candidates stay out,
// and a bucket tuned twice (by two compilers) gives one choice. attnjit-aot itself runs with
// NVRTC (ATTNJIT_AOT_PATH).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "api/attnjit.h"
#include "api/autotune.h"
#include "codegen/kernel_config.h"
#include "dsl/spec_json.h"
#include "runtime/kernel_bundle.h"
#include "runtime/kernel_cache.h"
#include "runtime/tuning_db.h"
#include "support/read_file.h"

namespace attnjit {
namespace {

constexpr const char* kSpecFile = "specs/causal_bf16_d128.json";  // tests/aot/, the working directory
constexpr const char* kGpu = "NVIDIA H100 80GB HBM3";

// A fresh directory under TMPDIR (or /tmp), removed with everything in it at the end of scope.
struct TempDir {
    std::string path;
    TempDir() {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/attnjit-aot-tuning-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
        path = pattern;
    }
    ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// What a tuning of `candidates` stores when `chosen` won (3.4 ms against the default's 3.6 ms).
runtime::TuningResult result_choosing(const KernelConfig& chosen, const std::vector<KernelConfig>& candidates) {
    runtime::TuningResult r;
    r.tile = chosen.tile;
    r.mainloop = chosen.mainloop;
    r.seconds = 3.4e-3;
    r.default_seconds = 3.6e-3;
    r.candidates = static_cast<int>(candidates.size());
    return r;
}

// A shell word: the path in single quotes.
std::string quoted(const std::string& s) { return "'" + s + "'"; }

// attnjit-aot (with NVRTC and a disk cache under `root`) on kSpecFile for `arch`, its backward's
// kernels as `backward` says, with the tuning database of `root`, into `bundle`.
::testing::AssertionResult aot_with_tuning(const std::string& root, const std::string& arch, const std::string& backward,
                                           const std::string& bundle) {
    const std::string cmd = "env -u ATTNJIT_LIBNVRTC -u ATTNJIT_DISABLE_DISK_CACHE ATTNJIT_CACHE_DIR=" +
                            quoted(root + "/cache") + " " + quoted(ATTNJIT_AOT_PATH) + " --specs " + kSpecFile +
                            " --arch " + arch + " --backward " + backward + " --tuning " + quoted(root) + " --out " +
                            quoted(bundle) + " --quiet";
    if (std::system(cmd.c_str()) == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "failed: " << cmd;
}

TEST(AotTuning, TheBundleCarriesTheChoiceAndItsKernel) {
    const AttentionSpec spec = dsl::spec_from_json(read_file(kSpecFile).value_or(""), kSpecFile);
    const std::vector<KernelConfig> candidates = api::forward_candidates(spec, "sm_90a");
    KernelConfig chosen = candidates.front();
    for (const KernelConfig& c : candidates)
        if (c.tile.block_n == 176) chosen = c;
    ASSERT_EQ(chosen.tile.block_n, 176) << "no 176-key candidate to choose";
    // Another sm90 tile, not the default: what the same bucket's second tuning chose.
    KernelConfig alternative = chosen;
    for (size_t i = 1; i < candidates.size(); ++i)
        if (candidates[i].mainloop == MainloopKind::sm90 && candidates[i].tile != chosen.tile) alternative = candidates[i];
    ASSERT_NE(alternative.tile, chosen.tile) << "no second sm90 candidate";

    // The database: the choice, one for sm_80 and one tuned over another candidate list.
    const TempDir tmp;
    const std::string& root = tmp.path;
    runtime::TuningDb db(root);
    runtime::TuningResult r = result_choosing(chosen, candidates);
    db.store(api::forward_tuning_key(spec, kGpu, "sm_90a", "the timing process's nvrtc", candidates), "q16384_k16384",
             r);
    runtime::TuningResult sm80 = r;
    sm80.tile = TileConfig{64, 64, 4, 2};
    sm80.mainloop = MainloopKind::sm80;
    db.store(api::forward_tuning_key(spec, "NVIDIA A100", "sm_80", "nvrtc", api::forward_candidates(spec, "sm_80")),
             "q4096_k4096", sm80);
    db.store(api::forward_tuning_key(spec, kGpu, "sm_90a", "nvrtc", {candidates.front()}), "q512_k512", r);
    // The same bucket tuned by another compiler (one choice in the bundle), and a choice outside
    // today's candidates (an sm80 tile no list has) in a bucket of its own.
    runtime::TuningResult older = r;
    older.tile = alternative.tile;
    db.store(api::forward_tuning_key(spec, kGpu, "sm_90a", "an older nvrtc", candidates), "q16384_k16384", older);
    runtime::TuningResult unlisted = r;
    unlisted.tile = TileConfig{32, 32, 1, 1};
    unlisted.mainloop = MainloopKind::sm80;
    db.store(api::forward_tuning_key(spec, kGpu, "sm_90a", "an older nvrtc", candidates), "q1_k1", unlisted);

    const std::string bundle = root + "/bundle";
    ASSERT_TRUE(aot_with_tuning(root, "sm_90a", "no", bundle));
    const runtime::BundleManifest m =
        runtime::bundle_manifest_from_json(read_file(bundle + "/manifest.json").value_or(""), "manifest.json");
    ASSERT_EQ(m.tuning.size(), 1u) << "one choice: the sm_90a bucket over today's candidates";
    EXPECT_EQ(m.tuning[0].bucket, "q16384_k16384");
    EXPECT_EQ(m.tuning[0].key.device, kGpu);
    // Neither compiler is attnjit-aot's: either choice may stand (the first in key order).
    const bool first = m.tuning[0].key.toolchain == "the timing process's nvrtc";
    EXPECT_TRUE(first || m.tuning[0].key.toolchain == "an older nvrtc") << m.tuning[0].key.toolchain;
    if (!first) std::swap(chosen, alternative);
    EXPECT_EQ(m.tuning[0].result.tile, chosen.tile);
    // The kept choice's kernel is in the bundle, the dropped one's is not (neither is a default).
    auto bundled = [&](const KernelConfig& c) {
        std::ostringstream printed;
        printed << c;
        return std::any_of(m.kernels.begin(), m.kernels.end(),
                           [&](const runtime::BundleKernel& k) { return k.config == printed.str(); });
    };
    EXPECT_TRUE(bundled(chosen)) << "the chosen configuration's kernel is not in the bundle: " << chosen;
    EXPECT_FALSE(bundled(alternative)) << "the dropped choice's kernel was compiled too: " << alternative;

    // This process: no NVRTC, no disk cache.
    auto choice = [&](const AttentionSpec& sp, const char* gpu, const char* bucket) {
        return api::bundled_choice(sp, KernelKind::forward, gpu, "sm_90a", bucket, api::forward_candidates(sp, "sm_90a"));
    };
    EXPECT_EQ(choice(spec, kGpu, "q16384_k16384"), std::nullopt) << "no bundle yet";
    ASSERT_GT(load_bundle(bundle), 0u);
    const auto found = choice(spec, kGpu, "q16384_k16384");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->tile, chosen.tile);
    EXPECT_EQ(found->mainloop, MainloopKind::sm90);
    EXPECT_FALSE(choice(spec, "NVIDIA H200", "q16384_k16384")) << "another GPU";
    EXPECT_FALSE(choice(spec, kGpu, "q4096_k4096")) << "another bucket";
    AttentionSpec other = spec;
    other.scale(0.5);
    EXPECT_FALSE(choice(other, kGpu, "q16384_k16384")) << "another spec";

    CompileOptions o;
    o.arch = "sm_90a";
    o.tile = found->tile;
    o.mainloop = found->mainloop;
    const Attention tuned(spec, o);
    EXPECT_EQ(tuned.config().tile, chosen.tile);
    const runtime::CacheStats s = runtime::KernelCache::global().stats();
    EXPECT_EQ(s.misses, 0u);
    EXPECT_GE(s.bundle_hits, 1u);
    EXPECT_EQ(read_file("/proc/self/maps").value_or("").find("libnvrtc"), std::string::npos) << "NVRTC was loaded";
}

// The backward's choice (api/backward_tuning.h) travels the same way: a tile of its key-tile
// kernel (backward_fused on sm_80) goes into the bundle with that backward's kernels, and a
// process without NVRTC finds it and builds that backward from the bundle alone.
TEST(AotTuning, TheBundleCarriesTheBackwardsChoiceToo) {
    const AttentionSpec spec = dsl::spec_from_json(read_file(kSpecFile).value_or(""), kSpecFile);
    const KernelConfig key_default = codegen::make_config(spec, KernelKind::backward_fused, "sm_80");
    const std::vector<KernelConfig> candidates = api::backward_candidates(spec, key_default, "sm_80");
    ASSERT_GE(candidates.size(), 2u);
    const KernelConfig chosen = candidates.back();  // not the default
    const TempDir tmp;
    const std::string& root = tmp.path;
    runtime::TuningDb db(root);
    const runtime::TuningResult r = result_choosing(chosen, candidates);
    const char* a100 = "NVIDIA A100-SXM4-80GB";
    db.store(api::tuning_key(spec, KernelKind::backward_fused, a100, "sm_80", "nvrtc", candidates), "q4096_k4096", r);

    const std::string bundle = root + "/bundle";
    ASSERT_TRUE(aot_with_tuning(root, "sm_80", "yes", bundle));
    const runtime::BundleManifest m =
        runtime::bundle_manifest_from_json(read_file(bundle + "/manifest.json").value_or(""), "manifest.json");
    ASSERT_EQ(m.tuning.size(), 1u);
    EXPECT_EQ(m.tuning[0].key.kind, "backward_fused");
    EXPECT_EQ(m.tuning[0].result.tile, chosen.tile);
    std::ostringstream printed;
    printed << chosen;
    EXPECT_TRUE(std::any_of(m.kernels.begin(), m.kernels.end(),
                            [&](const runtime::BundleKernel& k) { return k.config == printed.str(); }))
        << "the chosen backward_fused is not in the bundle: " << chosen;

    ASSERT_GT(load_bundle(bundle), 0u);
    const auto found = api::bundled_choice(spec, KernelKind::backward_fused, a100, "sm_80", "q4096_k4096", candidates);
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, chosen);
    EXPECT_FALSE(api::bundled_choice(spec, KernelKind::backward_dkdv, a100, "sm_80", "q4096_k4096", candidates))
        << "another kernel kind";
    const runtime::CacheStats before = runtime::KernelCache::global().stats();
    CompileOptions o;
    o.arch = "sm_80";
    o.tile = found->tile;
    o.mainloop = found->mainloop;
    const AttentionBackward tuned(spec, o);  // as the tuner builds the chosen one
    EXPECT_EQ(tuned.config(KernelKind::backward_fused), chosen);
    const runtime::CacheStats after = runtime::KernelCache::global().stats();
    EXPECT_EQ(after.misses, before.misses) << "a kernel of the chosen backward was not in the bundle";
    EXPECT_GT(after.bundle_hits, before.bundle_hits);
    EXPECT_EQ(read_file("/proc/self/maps").value_or("").find("libnvrtc"), std::string::npos) << "NVRTC was loaded";
}

TEST(AotTuning, ADirectoryWithoutATuningDatabaseIsAUsageError) {
    const TempDir tmp;
    const std::string& root = tmp.path;
    const std::string cmd = "env -u ATTNJIT_LIBNVRTC " + quoted(ATTNJIT_AOT_PATH) + " --specs " + kSpecFile +
                            " --arch sm_90a --tuning " + quoted(root) + " --out " + quoted(root + "/b") +
                            " --quiet 2>" + quoted(root + "/err");
    EXPECT_NE(std::system(cmd.c_str()), 0);
    const std::string err = read_file(root + "/err").value_or("");
    EXPECT_NE(err.find("there is no tuning database in it"), std::string::npos) << err;
    EXPECT_NE(err.find("ATTNJIT_CACHE_DIR"), std::string::npos) << err;
}

}  // namespace
}  // namespace attnjit
