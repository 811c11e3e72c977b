// Specs through the C API: JSON in, canonical JSON out, and the same spec (hash, equality)
// as the one built in C++.
#include <gtest/gtest.h>

#include <string>

#include "tests/capi/capi_test_util.h"
#include "tests/capi/test_specs.h"

namespace attnjit::capitest {
namespace {

TEST(CapiSpecJson, RoundTripIsCanonicalAndHashMatchesTheCppSpec) {
    for (const auto& [name, spec] : round_trip_specs()) {
        SCOPED_TRACE(name);
        const std::string json = dsl::spec_to_json(spec);
        SpecPtr c = c_spec(spec);
        ASSERT_TRUE(c);
        EXPECT_EQ(c_json(c.get()), json) << "attnjit_spec_to_json is not the canonical JSON";

        uint64_t hash = 0;
        ASSERT_EQ(attnjit_spec_hash(c.get(), &hash), ATTNJIT_OK) << attnjit_last_error();
        EXPECT_EQ(hash, spec.hash()) << "the spec parsed by the C API differs from the C++ one";
        EXPECT_TRUE(dsl::spec_from_json(c_json(c.get())) == spec);
    }
}

TEST(CapiSpecJson, JsonOfTheCApiParsesBackToTheSameHandle) {
    SpecPtr first = c_spec(spec_with_every_input());
    ASSERT_TRUE(first);
    const std::string json = c_json(first.get());
    attnjit_spec* second = nullptr;
    ASSERT_EQ(attnjit_spec_from_json(json.c_str(), json.size(), &second), ATTNJIT_OK) << attnjit_last_error();
    SpecPtr owned(second);
    uint64_t h1 = 0, h2 = 0;
    ASSERT_EQ(attnjit_spec_hash(first.get(), &h1), ATTNJIT_OK);
    ASSERT_EQ(attnjit_spec_hash(second, &h2), ATTNJIT_OK);
    EXPECT_EQ(h1, h2);
    EXPECT_EQ(c_json(second), json);
}

TEST(CapiSpecJson, LengthDelimitsTheTextNoTerminatorNeeded) {
    const std::string json = dsl::spec_to_json(spec_with_every_input());
    std::string padded = json + "garbage that must not be read";
    attnjit_spec* out = nullptr;
    ASSERT_EQ(attnjit_spec_from_json(padded.data(), json.size(), &out), ATTNJIT_OK) << attnjit_last_error();
    SpecPtr owned(out);
    EXPECT_EQ(c_json(out), json);
}

TEST(CapiSpecJson, DestroyAndFreeAcceptNull) {
    attnjit_spec_destroy(nullptr);
    attnjit_kernel_destroy(nullptr);
    attnjit_free_string(nullptr);
}

}  // namespace
}  // namespace attnjit::capitest
