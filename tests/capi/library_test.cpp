// The library as a whole: versions, status names, the per-thread last error, and that
// nothing but the attnjit_* C functions is visible from outside.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "tests/capi/capi_test_util.h"

#ifndef ATTNJIT_C_SONAME
#error "tests/capi/CMakeLists.txt passes the SONAME of libattnjit_c as ATTNJIT_C_SONAME"
#endif

namespace attnjit::capitest {
namespace {

TEST(CapiLibrary, VersionsMatchTheHeaderAndTheProject) {
    EXPECT_EQ(attnjit_api_version(), ATTNJIT_C_API_VERSION);
    EXPECT_STREQ(attnjit_version_string(), ATTNJIT_PROJECT_VERSION);
}

TEST(CapiLibrary, StatusNames) {
    EXPECT_STREQ(attnjit_status_name(ATTNJIT_OK), "ATTNJIT_OK");
    EXPECT_STREQ(attnjit_status_name(ATTNJIT_ERROR_INVALID_ARGUMENT), "ATTNJIT_ERROR_INVALID_ARGUMENT");
    EXPECT_STREQ(attnjit_status_name(ATTNJIT_ERROR_PARSE), "ATTNJIT_ERROR_PARSE");
    EXPECT_STREQ(attnjit_status_name(ATTNJIT_ERROR_ENVIRONMENT), "ATTNJIT_ERROR_ENVIRONMENT");
    EXPECT_STREQ(attnjit_status_name(ATTNJIT_ERROR_INTERNAL), "ATTNJIT_ERROR_INTERNAL");
    EXPECT_STREQ(attnjit_status_name(42), "ATTNJIT_UNKNOWN_STATUS");
    EXPECT_STREQ(attnjit_status_name(-1), "ATTNJIT_UNKNOWN_STATUS");
}

TEST(CapiLibrary, LastErrorIsPerThreadAndKeptUntilTheNextFailure) {
    std::string before_any_failure, own_failure, after_success;
    std::thread other([&] {
        before_any_failure = attnjit_last_error();
        attnjit_spec_hash(nullptr, nullptr);  // fails on this thread only
        own_failure = attnjit_last_error();
    });
    attnjit_spec_num_scalars(nullptr);  // this thread's failure, concurrently
    other.join();
    EXPECT_EQ(before_any_failure, "") << "a new thread starts with no error";
    EXPECT_NE(own_failure.find("attnjit_spec_hash"), std::string::npos) << own_failure;
    const std::string mine = attnjit_last_error();
    EXPECT_NE(mine.find("attnjit_spec_num_scalars"), std::string::npos)
        << "another thread's failure replaced this thread's message: " << mine;

    EXPECT_EQ(attnjit_api_version(), ATTNJIT_C_API_VERSION);
    uint64_t hash = 0;
    SpecPtr spec = c_spec(dsl::AttentionSpec().dtype(DType::f16).head_dim(64));
    ASSERT_EQ(attnjit_spec_hash(spec.get(), &hash), ATTNJIT_OK);
    after_success = attnjit_last_error();
    EXPECT_EQ(after_success, mine) << "successful calls leave the last error alone";
}

TEST(CapiLibrary, OnlyTheCFunctionsAreExported) {
    // The copy this test is linked against, wherever it was loaded from.
    void* lib = dlopen(ATTNJIT_C_SONAME, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(lib, nullptr) << ATTNJIT_C_SONAME << " is not loaded: " << dlerror();
    EXPECT_NE(dlsym(lib, "attnjit_spec_from_json"), nullptr);
    EXPECT_NE(dlsym(lib, "attnjit_launch"), nullptr);
    // C++ symbols of the static libraries and of the C layer itself stay inside.
    for (const char* hidden : {"_ZNK7attnjit3dsl13AttentionSpec4hashEv",      // AttentionSpec::hash
                               "_ZNK7attnjit3dsl13AttentionSpec8validateEv",  // AttentionSpec::validate
                               "_ZN7attnjit7runtime10why_no_gpuEv",           // runtime::why_no_gpu
                               "_ZN7attnjit4capi10dtype_codeENS_5DTypeE"})   // capi::dtype_code
        EXPECT_EQ(dlsym(lib, hidden), nullptr) << hidden << " is exported";
    dlclose(lib);
}

}  // namespace
}  // namespace attnjit::capitest
