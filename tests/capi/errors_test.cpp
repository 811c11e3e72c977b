// Every refusal of the C API that needs no NVRTC: the status, and a message that names
// the function, the argument and what to do. Out-pointers are reset on failure.
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <string>

#include "runtime/device.h"
#include "tests/capi/capi_test_util.h"
#include "tests/capi/test_specs.h"

namespace attnjit::capitest {
namespace {

attnjit_spec* const kSentinelSpec = reinterpret_cast<attnjit_spec*>(0x1);

attnjit_compile_options options_for(const char* arch) {
    attnjit_compile_options o = ATTNJIT_COMPILE_OPTIONS_INIT;
    o.arch = arch;
    return o;
}

TEST(CapiErrors, SpecFromJsonRefusesNullPointers) {
    const char* json = "{}";
    EXPECT_STATUS(attnjit_spec_from_json(json, 2, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_from_json", "'out'", "pass the address"});
    attnjit_spec* out = kSentinelSpec;
    EXPECT_STATUS(attnjit_spec_from_json(nullptr, 5, &out), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_from_json", "'json' is null", "length"});
    EXPECT_EQ(out, nullptr) << "a failing call must reset *out";
}

TEST(CapiErrors, MalformedJsonIsAParseErrorWithLineAndColumn) {
    const std::string json = "{\n  \"dtype\": \"bf16\",\n  \"head_dim\": ,\n}\n";
    attnjit_spec* out = kSentinelSpec;
    EXPECT_STATUS(attnjit_spec_from_json(json.data(), json.size(), &out), ATTNJIT_ERROR_PARSE,
                  {"attnjit_spec_from_json: ", "spec:3:"});
    EXPECT_EQ(out, nullptr);
    EXPECT_TRUE(std::regex_search(std::string(attnjit_last_error()), std::regex("spec:3:[0-9]+")))
        << attnjit_last_error();
}

TEST(CapiErrors, EmptyTextIsAParseError) {
    attnjit_spec* out = kSentinelSpec;
    EXPECT_STATUS(attnjit_spec_from_json("", 0, &out), ATTNJIT_ERROR_PARSE, {"attnjit_spec_from_json", "spec:1:"});
    EXPECT_EQ(out, nullptr);
}

TEST(CapiErrors, TextCutShortIsAParseError) {
    const std::string json = dsl::spec_to_json(spec_with_every_input());
    attnjit_spec* out = kSentinelSpec;
    EXPECT_STATUS(attnjit_spec_from_json(json.data(), json.size() / 2, &out), ATTNJIT_ERROR_PARSE,
                  {"attnjit_spec_from_json", "spec:"});
    EXPECT_EQ(out, nullptr);
}

// The hardening issue's hostile documents: each is a located PARSE error, never a crash
// (SIGFPE in folding, a stack overflow on a long chain) or an INTERNAL status.
TEST(CapiErrors, HostileDocumentsAreParseErrors) {
    auto doc = [](const std::string& key_value) {
        return R"({"format":"attnjit.spec/1","dtype":"f16","head_dim":64,)" + key_value + "}";
    };
    std::string chain = "q_idx";
    for (int i = 0; i < 150000; ++i) chain += "+q_idx";
    std::string tensors = "\"tensors\":{";
    for (int i = 0; i < 33; ++i) tensors += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"f32\",\"rank\":1}";
    const std::pair<std::string, const char*> cases[] = {
        {doc(R"("mask":"q_idx < -9223372036854775808 / -1")"), "is out of range: ints are int32"},
        {doc(R"("mask":"max(q_idx, 2147483648) > kv_idx")"), "is out of range: ints are int32"},
        {doc(R"("mask":"abs(-9223372036854775808) > q_idx")"), "is out of range: ints are int32"},
        {doc("\"mask\":\"" + chain + " > kv_idx\""), "the expression is too deep"},
        {doc(tensors + "},\"score_mod\":\"score\""), "the limit is 32"},
        {doc("\"score_mod\":\"score" + std::string(1 << 20, ' ') + "\""), "the limit is 1048576"},
    };
    for (const auto& [json, message] : cases) {
        attnjit_spec* out = kSentinelSpec;
        EXPECT_STATUS(attnjit_spec_from_json(json.data(), json.size(), &out), ATTNJIT_ERROR_PARSE,
                      {"attnjit_spec_from_json", "spec:1:", message});
        EXPECT_EQ(out, nullptr);
    }
}

TEST(CapiErrors, SpecFunctionsRefuseNullHandlesAndOutputs) {
    char* text = reinterpret_cast<char*>(0x1);
    EXPECT_STATUS(attnjit_spec_to_json(nullptr, &text), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_to_json", "'spec' is null"});
    EXPECT_EQ(text, nullptr);
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    EXPECT_STATUS(attnjit_spec_to_json(spec.get(), nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_to_json", "'out' is null"});

    uint64_t hash = 7;
    EXPECT_STATUS(attnjit_spec_hash(nullptr, &hash), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_hash", "'spec' is null"});
    EXPECT_EQ(hash, 0u);
    EXPECT_STATUS(attnjit_spec_hash(spec.get(), nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_hash", "'out' is null"});
}

TEST(CapiErrors, CountQueriesOfANullSpecReturnMinusOneAndSayWhy) {
    EXPECT_EQ(attnjit_spec_num_tensors(nullptr), -1);
    EXPECT_NE(std::string(attnjit_last_error()).find("attnjit_spec_num_tensors: argument 'spec' is null"),
              std::string::npos)
        << attnjit_last_error();
    EXPECT_EQ(attnjit_spec_num_scalars(nullptr), -1);
    EXPECT_NE(std::string(attnjit_last_error()).find("attnjit_spec_num_scalars"), std::string::npos);
    EXPECT_EQ(attnjit_spec_returns_lse(nullptr), -1);
    EXPECT_NE(std::string(attnjit_last_error()).find("attnjit_spec_returns_lse"), std::string::npos);
}

TEST(CapiErrors, ArgumentQueriesCheckIndexAndOutputs) {
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    const char* name = "x";
    int32_t dtype = 0, rank = 0, is_int = 0;
    EXPECT_STATUS(attnjit_spec_tensor(spec.get(), 2, &name, &dtype, &rank), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_tensor", "argument 'i' is 2", "[0, 2)", "attnjit_spec_num_tensors"});
    EXPECT_EQ(name, nullptr);
    EXPECT_EQ(dtype, -1);
    EXPECT_STATUS(attnjit_spec_tensor(spec.get(), -1, &name, &dtype, &rank), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"argument 'i' is -1"});
    EXPECT_STATUS(attnjit_spec_tensor(spec.get(), 0, &name, nullptr, &rank), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_tensor", "argument 'dtype' is null"});
    EXPECT_STATUS(attnjit_spec_tensor(nullptr, 0, &name, &dtype, &rank), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_tensor", "'spec' is null"});
    EXPECT_STATUS(attnjit_spec_scalar(spec.get(), 5, &name, &is_int), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_scalar", "argument 'i' is 5", "attnjit_spec_num_scalars"});
    EXPECT_STATUS(attnjit_spec_scalar(spec.get(), 0, nullptr, &is_int), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_spec_scalar", "argument 'name' is null"});

    SpecPtr none = c_spec(dsl::AttentionSpec().dtype(DType::f16).head_dim(64));
    ASSERT_TRUE(none);
    EXPECT_STATUS(attnjit_spec_tensor(none.get(), 0, &name, &dtype, &rank), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"reads no captured tensors"});
}

TEST(CapiErrors, CompileRefusesNullPointersAndBadOptions) {
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    attnjit_kernel* const sentinel = reinterpret_cast<attnjit_kernel*>(0x1);
    attnjit_kernel* k = sentinel;
    EXPECT_STATUS(attnjit_compile(nullptr, nullptr, &k), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile", "'spec' is null"});
    EXPECT_EQ(k, nullptr);
    EXPECT_STATUS(attnjit_compile(spec.get(), nullptr, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile", "'out' is null"});

    attnjit_compile_options o = options_for("sm_80");
    o.struct_size = sizeof(o) - 4;
    k = sentinel;
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &k), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile", "options->struct_size", "ATTNJIT_COMPILE_OPTIONS_INIT"});
    EXPECT_EQ(k, nullptr);

    o = options_for("");
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &k), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile", "options->arch is empty"});

    o = options_for("sm_80");
    o.warps = -4;
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &k), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile", "options->warps is -4"});

    // A tile the kernel cannot use is refused before anything is compiled.
    o = options_for("sm_80");
    o.warps = 17;
    EXPECT_STATUS(attnjit_compile(spec.get(), &o, &k), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_compile", "kernel forward sm80", "warps=17", "warps must be in [1, 16]"});
    EXPECT_EQ(k, nullptr);
}

TEST(CapiErrors, CompileForTheCurrentGpuWithoutOneIsAnEnvironmentError) {
    if (!runtime::why_no_gpu()) GTEST_SKIP() << "a GPU is usable here; the refusal needs a machine without one";
    SpecPtr spec = c_spec(spec_with_every_input());
    ASSERT_TRUE(spec);
    attnjit_kernel* k = reinterpret_cast<attnjit_kernel*>(0x1);
    EXPECT_STATUS(attnjit_compile(spec.get(), nullptr, &k), ATTNJIT_ERROR_ENVIRONMENT,
                  {"attnjit_compile", "no GPU is usable", "options->arch"});
    EXPECT_EQ(k, nullptr);
}

TEST(CapiErrors, LaunchRefusesNullKernelAndArgs) {
    attnjit_launch_args a = ATTNJIT_LAUNCH_ARGS_INIT;
    EXPECT_STATUS(attnjit_launch(nullptr, &a, nullptr), ATTNJIT_ERROR_INVALID_ARGUMENT,
                  {"attnjit_launch", "'kernel' is null"});
}

TEST(CapiErrors, KernelQueriesOfNullSayWhy) {
    EXPECT_EQ(attnjit_kernel_can_launch(nullptr), 0);
    EXPECT_EQ(attnjit_kernel_source(nullptr), nullptr);
    EXPECT_NE(std::string(attnjit_last_error()).find("attnjit_kernel_source: argument 'kernel' is null"),
              std::string::npos)
        << attnjit_last_error();
    EXPECT_EQ(attnjit_kernel_arch(nullptr), nullptr);
    EXPECT_EQ(attnjit_kernel_spec(nullptr), nullptr);
    EXPECT_EQ(attnjit_kernel_compile_seconds(nullptr), -1.0);
}

}  // namespace
}  // namespace attnjit::capitest
