// Kernel bundles (runtime/kernel_bundle.h) with a fake compiler: the manifest's round trip
// and its errors, a bundle directory and a linked bundle serving kernels before the disk
// cache and the compiler, damaged and wrong entries skipped with a warning, stale bundles
// refused with what to do, a miss without NVRTC naming the bundles, and a process served by
// bundles never loading NVRTC.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/template_library.h"
#include "runtime/compiler.h"
#include "runtime/cuda_api.h"
#include "runtime/kernel_bundle.h"
#include "runtime/kernel_cache.h"
#include "runtime/kernel_key.h"
#include "runtime_test_util.h"
#include "support/error.h"
#include "support/read_file.h"

namespace attnjit::runtime {
namespace {

using testing::fake_options;
using testing::FakeCompiler;
using testing::TempDir;
using testing::tiny_source;

// Every test starts and ends with an empty global registry.
class KernelBundleTest : public ::testing::Test {
protected:
    void SetUp() override { BundleRegistry::global().clear(); }
    void TearDown() override { BundleRegistry::global().clear(); }
};

std::string user_error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    return "(no UserError)";
}

// A bundle of tiny_source(salt) for each salt, compiled by `fake` for `arch`.
struct MadeBundle {
    BundleManifest manifest = current_bundle_manifest();
    std::vector<CompiledKernel> kernels;
};
MadeBundle make_bundle(FakeCompiler& fake, const std::vector<int>& salts, const std::string& arch) {
    MadeBundle b;
    b.manifest.toolchain = "fake-compiler 1";
    for (int salt : salts) {
        const codegen::KernelSource src = tiny_source(salt);
        CompiledKernel k = fake(src, arch);
        k.key = kernel_key(src, arch, "fake-compiler 1");
        b.manifest.kernels.push_back({toolchain_index_key(src, arch), src.name, arch, "tiny", "tiny.json"});
        b.kernels.push_back(std::move(k));
    }
    return b;
}

std::string read_text(const std::string& path) { return read_file(path).value_or(""); }

TEST_F(KernelBundleTest, ManifestRoundTripsThroughJson) {
    FakeCompiler fake;
    const MadeBundle b = make_bundle(fake, {0, 1}, "sm_80");
    const std::string text = to_json(b.manifest);
    EXPECT_EQ(text.back(), '\n');
    EXPECT_NE(text.find("\"format\": \"attnjit.bundle/1\""), std::string::npos) << text;
    const BundleManifest back = bundle_manifest_from_json(text, "m.json");
    EXPECT_EQ(back.generator_version, b.manifest.generator_version);
    EXPECT_EQ(back.templates_hash, codegen::templates_hash());
    EXPECT_EQ(back.entry_format, kCompiledKernelFormatVersion);
    EXPECT_EQ(back.toolchain, "fake-compiler 1");
    ASSERT_EQ(back.kernels.size(), 2u);
    EXPECT_EQ(back.kernels[1].index_key, b.manifest.kernels[1].index_key);
    EXPECT_EQ(back.kernels[1].name, "tiny_add_1");
    EXPECT_EQ(back.kernels[1].spec, "tiny.json");
    EXPECT_EQ(to_json(back), text);
}

// The autotuner's choices a bundle carries (attnjit-aot --tuning) round-trip, and a process
// finds one by every field of the tuning key but the compiler, which bundles do not share.
TEST_F(KernelBundleTest, TunedChoicesRoundTripAndMatchOnAllButTheCompiler) {
    FakeCompiler fake;
    MadeBundle b = make_bundle(fake, {0}, "sm_90a");
    const TuningKey key{"spec-hash", "forward", "NVIDIA H100 80GB HBM3", "sm_90a", "nvrtc of the timing process", 7,
                        "candidates-hash"};
    TuningResult r;
    r.tile = TileConfig{128, 176, 12, 2};
    r.mainloop = MainloopKind::sm90;
    r.schedule = CtaSchedule{kOrderChunked4, Sm90Grid::per_item};
    r.seconds = 3.4e-3;
    r.default_seconds = 3.6e-3;
    r.candidates = 10;
    r.tuning_seconds = 0.5;
    b.manifest.tuning.push_back({key, "q16384_k16384", r});
    const std::string text = to_json(b.manifest);
    EXPECT_NE(text.find("\"tuned_with\": \"nvrtc of the timing process\""), std::string::npos) << text;
    const BundleManifest back = bundle_manifest_from_json(text, "m.json");
    ASSERT_EQ(back.tuning.size(), 1u);
    EXPECT_EQ(back.tuning[0].key.id(), key.id());
    EXPECT_EQ(back.tuning[0].bucket, "q16384_k16384");
    EXPECT_EQ(back.tuning[0].result.tile, r.tile);
    EXPECT_EQ(back.tuning[0].result.mainloop, MainloopKind::sm90);
    EXPECT_EQ(back.tuning[0].result.schedule, r.schedule);
    EXPECT_EQ(to_json(back), text);
    // A manifest without choices (every bundle made without --tuning) has none.
    EXPECT_TRUE(bundle_manifest_from_json(to_json(make_bundle(fake, {1}, "sm_80").manifest), "n.json").tuning.empty());
    std::string bad = text;
    bad.replace(bad.find("\"sm90\""), 6, "\"sm99\"");
    EXPECT_NE(user_error_of([&] { bundle_manifest_from_json(bad, "t.json"); }).find("is not one attnjit-aot writes"),
              std::string::npos);

    const std::string manifest = to_json(b.manifest), entry = serialize(b.kernels[0]);
    const unsigned char* entries[] = {reinterpret_cast<const unsigned char*>(entry.data())};
    const size_t sizes[] = {entry.size()};
    register_linked_bundle("tuned_kernels", manifest.data(), manifest.size(), entries, sizes, 1);
    ASSERT_EQ(BundleRegistry::global().size(), 1u);
    TuningKey asked = key;
    asked.toolchain = "another nvrtc";  // the bundle's choice holds whatever this process's compiler
    const auto hit = BundleRegistry::global().find_tuning(asked, "q16384_k16384");
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->tile, r.tile);
    EXPECT_FALSE(BundleRegistry::global().find_tuning(asked, "q4096_k4096")) << "another bucket";
    for (auto spoil : std::vector<std::function<void(TuningKey&)>>{
             [](TuningKey& k) { k.spec = "other"; }, [](TuningKey& k) { k.kind = "backward_dq"; },
             [](TuningKey& k) { k.device = "NVIDIA H200"; }, [](TuningKey& k) { k.arch = "sm_80"; },
             [](TuningKey& k) { k.generator_version = 8; }, [](TuningKey& k) { k.candidates = "other"; }}) {
        TuningKey other = asked;
        spoil(other);
        EXPECT_FALSE(BundleRegistry::global().find_tuning(other, "q16384_k16384")) << other.id();
    }
}

TEST_F(KernelBundleTest, ManifestErrorsSayWhatAndWhere) {
    FakeCompiler fake;
    const MadeBundle b = make_bundle(fake, {0}, "sm_80");
    EXPECT_NE(user_error_of([] { bundle_manifest_from_json("{not json", "a.json"); }).find("a.json is not JSON"),
              std::string::npos);
    EXPECT_NE(user_error_of([] { bundle_manifest_from_json("{\"x\": 1}", "b.json"); })
                  .find("b.json is not an attnjit bundle manifest"),
              std::string::npos);
    std::string other = to_json(b.manifest);
    other.replace(other.find("attnjit.bundle/1"), 16, "attnjit.bundle/9");
    EXPECT_NE(user_error_of([&] { bundle_manifest_from_json(other, "c.json"); }).find("has format \"attnjit.bundle/9\""),
              std::string::npos);
    std::string missing = to_json(b.manifest);
    missing.replace(missing.find("\"toolchain\""), 11, "\"toolchainX\"");
    EXPECT_NE(user_error_of([&] { bundle_manifest_from_json(missing, "d.json"); }).find("not a complete bundle manifest"),
              std::string::npos);
    std::string bad_key = to_json(b.manifest);
    bad_key.replace(bad_key.find(b.manifest.kernels[0].index_key), 64, "../../etc/passwd");
    EXPECT_NE(user_error_of([&] { bundle_manifest_from_json(bad_key, "e.json"); }).find("not 64 lowercase hex digits"),
              std::string::npos);
    MadeBundle twice = b;
    twice.manifest.kernels.push_back(twice.manifest.kernels[0]);
    EXPECT_NE(user_error_of([&] { bundle_manifest_from_json(to_json(twice.manifest), "f.json"); }).find("twice"),
              std::string::npos);
}

TEST_F(KernelBundleTest, ABundleDirectoryServesItsKernelsBeforeDiskAndCompiler) {
    TempDir tmp;
    FakeCompiler maker;
    const MadeBundle b = make_bundle(maker, {0, 1}, "sm_80");
    // Written over an earlier bundle (in a directory whose parents do not exist yet): its
    // entries that this one does not list go.
    write_bundle(tmp.path() + "/out/bundle", make_bundle(maker, {7}, "sm_80").manifest,
                 make_bundle(maker, {7}, "sm_80").kernels);
    write_bundle(tmp.path() + "/out/bundle", b.manifest, b.kernels);
    EXPECT_EQ(testing::files_under(tmp.path() + "/out/bundle/kernels").size(), 2u);
    std::rename((tmp.path() + "/out/bundle").c_str(), (tmp.path() + "/bundle").c_str());
    EXPECT_EQ(load_bundle(tmp.path() + "/bundle"), 2u);

    FakeCompiler fake;
    KernelCache cache(fake_options(fake, tmp.path() + "/cache"));
    auto k0 = cache.get_compiled(tiny_source(0), "sm_80");
    auto k1 = cache.get_compiled(tiny_source(1), "sm_80");
    EXPECT_EQ(k0->cubin, b.kernels[0].cubin);
    EXPECT_EQ(k1->cubin, b.kernels[1].cubin);
    EXPECT_EQ(cache.stats().bundle_hits, 2u);
    EXPECT_EQ(fake.calls, 0);
    cache.get_compiled(tiny_source(0), "sm_80");  // memory now
    EXPECT_EQ(cache.stats().memory_hits, 1u);
    cache.get_compiled(tiny_source(2), "sm_80");  // not bundled
    cache.get_compiled(tiny_source(0), "sm_90a");  // bundled for another arch only
    EXPECT_EQ(fake.calls, 2);
    EXPECT_EQ(cache.stats().bundle_hits, 2u);
    EXPECT_EQ(cache.stats().misses, 2u);

    // What a bundle is made from: the memory's kernels by index key, in key order.
    const auto listed = cache.compiled_kernels();
    ASSERT_EQ(listed.size(), 4u);
    for (size_t i = 1; i < listed.size(); ++i) EXPECT_LT(listed[i - 1].first, listed[i].first);
    bool found = false;
    for (const auto& [key, kernel] : listed)
        if (key == toolchain_index_key(tiny_source(1), "sm_80")) found = kernel == k1;
    EXPECT_TRUE(found);
    const std::string d = BundleRegistry::global().describe();
    EXPECT_NE(d.find("bundle " + tmp.path() + "/bundle (2 for sm_80)"), std::string::npos) << d;
}

TEST_F(KernelBundleTest, DamagedAndWrongEntriesAreSkippedWithAWarning) {
    TempDir tmp;
    FakeCompiler maker;
    MadeBundle b = make_bundle(maker, {0, 1}, "sm_80");
    b.kernels[1].entry = "not_tiny_add";  // intact, but not the kernel its source asks for
    write_bundle(tmp.path() + "/bundle", b.manifest, b.kernels);
    const std::string entry0 = tmp.path() + "/bundle/kernels/" + b.manifest.kernels[0].index_key + ".kernel";
    std::string bytes = read_text(entry0);
    bytes[bytes.size() - 3] ^= 0x40;
    std::ofstream(entry0, std::ios::binary | std::ios::trunc) << bytes;
    load_bundle(tmp.path() + "/bundle");

    FakeCompiler fake;
    KernelCache cache(fake_options(fake, ""));
    ::testing::internal::CaptureStderr();
    auto k0 = cache.get_compiled(tiny_source(0), "sm_80");
    auto k1 = cache.get_compiled(tiny_source(1), "sm_80");
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(fake.calls, 2);  // both compiled instead
    EXPECT_EQ(cache.stats().bundle_hits, 0u);
    EXPECT_EQ(k1->entry, "tiny_add");
    EXPECT_NE(err.find("not using a bundled kernel: " + entry0), std::string::npos) << err;
    EXPECT_NE(err.find("holds an entry for tiny_add_1 that is not it"), std::string::npos) << err;
}

// Two kernels with the same symbol, sizes and config (as two specs with one tile have), their
// entries swapped: each is another source's, which only the recorded key tells.
TEST_F(KernelBundleTest, SwappedEntriesOfLookAlikeKernelsAreRefused) {
    TempDir tmp;
    FakeCompiler maker;
    MadeBundle b = make_bundle(maker, {0, 1}, "sm_80");
    std::swap(b.kernels[0], b.kernels[1]);
    write_bundle(tmp.path() + "/bundle", b.manifest, b.kernels);
    load_bundle(tmp.path() + "/bundle");
    FakeCompiler fake;
    KernelCache cache(fake_options(fake, ""));
    ::testing::internal::CaptureStderr();
    const auto k0 = cache.get_compiled(tiny_source(0), "sm_80");
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(cache.stats().bundle_hits, 0u);
    EXPECT_EQ(k0->cubin, fake(tiny_source(0), "sm_80").cubin);
    EXPECT_NE(err.find("holds an entry for tiny_add_0 that is not it: it was compiled from another source"),
              std::string::npos)
        << err;
}

TEST_F(KernelBundleTest, AStaleBundleIsRefusedWithWhatToDo) {
    TempDir tmp;
    FakeCompiler maker;
    MadeBundle b = make_bundle(maker, {0}, "sm_80");
    b.manifest.generator_version += 1;
    b.manifest.attnjit_version = "9.9.9";
    write_bundle(tmp.path() + "/old", b.manifest, b.kernels);
    const std::string e = user_error_of([&] { load_bundle(tmp.path() + "/old"); });
    EXPECT_NE(e.find("kernel bundle " + tmp.path() + "/old cannot be used: it was made by attnjit 9.9.9"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("rebuild the bundle with this attnjit's attnjit-aot"), std::string::npos) << e;
    EXPECT_NE(user_error_of([&] { load_bundle(tmp.path() + "/none/deeper"); }).find("manifest.json does not exist"),
              std::string::npos);
    EXPECT_EQ(BundleRegistry::global().size(), 0u);
}

TEST_F(KernelBundleTest, LinkedBundlesServeKernelsAndAStaleOneIsAProblemNotACrash) {
    FakeCompiler maker;
    const MadeBundle b = make_bundle(maker, {3}, "sm_90a");
    const std::string manifest = to_json(b.manifest), entry = serialize(b.kernels[0]);
    const unsigned char* entries[] = {reinterpret_cast<const unsigned char*>(entry.data())};
    const size_t sizes[] = {entry.size()};
    register_linked_bundle("app_kernels", manifest.data(), manifest.size(), entries, sizes, 1);
    ASSERT_EQ(BundleRegistry::global().size(), 1u);

    FakeCompiler fake;
    KernelCache cache(fake_options(fake, ""));
    EXPECT_EQ(cache.get_compiled(tiny_source(3), "sm_90a")->cubin, b.kernels[0].cubin);
    EXPECT_EQ(fake.calls, 0);

    MadeBundle old = b;
    old.manifest.templates_hash = "0123456789abcdef";
    const std::string stale = to_json(old.manifest);
    ::testing::internal::CaptureStderr();
    register_linked_bundle("old_kernels", stale.data(), stale.size(), entries, sizes, 1);
    register_linked_bundle("short", manifest.data(), manifest.size(), entries, sizes, 0);  // entries missing
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(BundleRegistry::global().size(), 1u);
    EXPECT_NE(err.find("linked kernel bundle old_kernels is not used"), std::string::npos) << err;
    EXPECT_NE(err.find("linked kernel bundle short is not used"), std::string::npos) << err;
    EXPECT_NE(BundleRegistry::global().describe().find("old_kernels is not used"), std::string::npos);
}

TEST_F(KernelBundleTest, AMissWithoutNvrtcNamesTheBundles) {
    TempDir tmp;
    FakeCompiler maker;
    const MadeBundle b = make_bundle(maker, {0}, "sm_80");
    write_bundle(tmp.path() + "/bundle", b.manifest, b.kernels);
    load_bundle(tmp.path() + "/bundle");
    KernelCache::Options o;
    o.disk_root = "";
    o.toolchain = kNvrtcUnavailable;
    o.compile = [](const codegen::KernelSource&, const std::string&) -> CompiledKernel {
        environment_error << "no NVRTC here";
        return {};
    };
    KernelCache cache(o);
    EXPECT_EQ(cache.get_compiled(tiny_source(0), "sm_80")->cubin, b.kernels[0].cubin);  // no NVRTC needed
    try {
        cache.get_compiled(tiny_source(0), "sm_90a");
        ADD_FAILURE() << "a kernel no bundle holds was served without NVRTC";
    } catch (const EnvironmentError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("it is not in a kernel bundle (bundle " + tmp.path() + "/bundle (1 for sm_80))"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("no NVRTC here"), std::string::npos) << m;
    }
}

bool nvrtc_is_mapped() { return read_text("/proc/self/maps").find("libnvrtc") != std::string::npos; }

// The default toolchain (nvrtc_toolchain_id) is asked for only on a kernel that no bundle
// holds: served by a bundle, a process never loads NVRTC. (ctest runs each test in a
// process of its own; run together with tests that compile, NVRTC is already there.)
TEST_F(KernelBundleTest, KernelsFromBundlesNeverLoadNvrtc) {
    if (nvrtc_is_mapped()) GTEST_SKIP() << "libnvrtc is already loaded in this process (run this test alone)";
    TempDir tmp;
    FakeCompiler maker;
    const MadeBundle b = make_bundle(maker, {0, 1}, "sm_80");
    write_bundle(tmp.path() + "/bundle", b.manifest, b.kernels);
    load_bundle(tmp.path() + "/bundle");
    FakeCompiler fake;
    KernelCache::Options o = fake_options(fake, tmp.path() + "/cache");
    o.toolchain.clear();  // the default: nvrtc_toolchain_id(), on first need
    KernelCache cache(o);
    cache.get_compiled(tiny_source(0), "sm_80");
    cache.get_compiled(tiny_source(1), "sm_80");
    EXPECT_EQ(cache.stats().bundle_hits, 2u);
    EXPECT_FALSE(nvrtc_is_mapped());
    if (runtime::why_no_libnvrtc()) return;
    cache.get_compiled(tiny_source(2), "sm_80");  // a miss: its disk key names the toolchain
    EXPECT_TRUE(nvrtc_is_mapped());
    EXPECT_EQ(fake.calls, 1);
}

}  // namespace
}  // namespace attnjit::runtime
