// linked_bundle_source (tools/linked_bundle_source.h): the C++ that links a bundle into a
// program names each entry once by .incbin from the absolute bundle directory, carries the
// manifest whole, registers through the C++ or the C API, and refuses a relative directory or
// text that cannot stand inside quotes. (tests/aot/ builds and runs the real thing.)
#include <gtest/gtest.h>

#include <string>

#include "runtime/kernel_bundle.h"
#include "support/error.h"
#include "tools/linked_bundle_source.h"

namespace attnjit::tools {
namespace {

runtime::BundleManifest two_kernels() {
    runtime::BundleManifest m = runtime::current_bundle_manifest();
    m.toolchain = "nvrtc 13.0";
    m.kernels.push_back({std::string(64, 'a'), "fwd_a", "sm_80", "forward sm80", "a.json"});
    m.kernels.push_back({std::string(64, 'b'), "fwd_b", "sm_90a", "forward sm90", "b.json"});
    return m;
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(LinkedBundleSource, IncludesEachEntryOnceAndTheManifestWhole) {
    const runtime::BundleManifest m = two_kernels();
    const std::string src = linked_bundle_source("my-app.kernels", "/opt/app/kernels.bundle", m);
    EXPECT_EQ(count(src, ".incbin"), 2u);
    EXPECT_EQ(count(src, ".incbin \\\"/opt/app/kernels.bundle/kernels/" + std::string(64, 'b') + ".kernel\\\""), 1u)
        << src;
    EXPECT_NE(src.find(runtime::to_json(m)), std::string::npos);
    EXPECT_NE(src.find("attnjit_bundle_my_app_kernels_"), std::string::npos);  // a C identifier stem
    // ... and a hash of the name: names that read alike as identifiers get other symbols.
    const std::string alike = linked_bundle_source("my_app_kernels", "/opt/app/kernels.bundle", m);
    EXPECT_EQ(alike.find(src.substr(src.find("attnjit_bundle_my_app_kernels_"), 40)), std::string::npos);
    EXPECT_NE(src.find("attnjit::runtime::register_linked_bundle(\"my-app.kernels\""), std::string::npos);
    EXPECT_NE(src.find("#if defined(ATTNJIT_BUNDLE_C_API)"), std::string::npos);
    EXPECT_NE(src.find("attnjit_register_linked_bundle(\"my-app.kernels\""), std::string::npos);
    EXPECT_EQ(src.find("#include \""), std::string::npos);  // no attnjit header needed
}

TEST(LinkedBundleSource, AnEmptyBundleHasNoAssembly) {
    runtime::BundleManifest m = two_kernels();
    m.kernels.clear();
    const std::string src = linked_bundle_source("empty", "/b", m);
    EXPECT_EQ(src.find("__asm__"), std::string::npos);
    EXPECT_NE(src.find("entries, sizes, 0)"), std::string::npos) << src;
}

TEST(LinkedBundleSource, RefusesARelativeDirectoryAndQuotes) {
    // A spec file named like the raw string's end stays inside it (JSON escapes its quote).
    runtime::BundleManifest delimited = two_kernels();
    delimited.kernels[0].spec = "odd)attnjit_manifest\".json";
    EXPECT_NE(linked_bundle_source("x", "/ab", delimited).find("odd)attnjit_manifest\\\".json"), std::string::npos);
    const runtime::BundleManifest m = two_kernels();
    EXPECT_THROW(linked_bundle_source("x", "relative/dir", m), UserError);
    EXPECT_THROW(linked_bundle_source("x", "/a\"b", m), UserError);
    EXPECT_THROW(linked_bundle_source("x\\y", "/ab", m), UserError);
    try {
        linked_bundle_source("x", "build/bundle", m);
        ADD_FAILURE() << "a relative directory was accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("must be an absolute path"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace attnjit::tools
