// Shared by the C API tests: owning wrappers for the C handles, specs built in C++ and
// handed to the C API as JSON, TensorView -> attnjit_tensor, and a status assertion that
// also checks the thread's last-error message.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>

#include "attnjit/attnjit_c.h"
#include "dsl/attention_spec.h"
#include "dsl/spec_json.h"
#include "runtime/tensor_view.h"

namespace attnjit::capitest {

struct SpecDeleter {
    void operator()(attnjit_spec* s) const { attnjit_spec_destroy(s); }
};
struct KernelDeleter {
    void operator()(attnjit_kernel* k) const { attnjit_kernel_destroy(k); }
};
using SpecPtr = std::unique_ptr<attnjit_spec, SpecDeleter>;
using KernelPtr = std::unique_ptr<attnjit_kernel, KernelDeleter>;

// A C spec handle from a C++ spec, through the JSON format. Fails the test if refused.
inline SpecPtr c_spec(const dsl::AttentionSpec& spec) {
    const std::string json = dsl::spec_to_json(spec);
    attnjit_spec* out = nullptr;
    const attnjit_status s = attnjit_spec_from_json(json.data(), json.size(), &out);
    EXPECT_EQ(s, ATTNJIT_OK) << attnjit_last_error() << "\n--- JSON ---\n" << json;
    return SpecPtr(out);
}

// The C API's canonical JSON of a spec handle.
inline std::string c_json(const attnjit_spec* spec) {
    char* text = nullptr;
    EXPECT_EQ(attnjit_spec_to_json(spec, &text), ATTNJIT_OK) << attnjit_last_error();
    std::string out = text ? text : "";
    attnjit_free_string(text);
    return out;
}

inline int32_t c_dtype(DType d) {
    switch (d) {
    case DType::f16: return ATTNJIT_F16;
    case DType::bf16: return ATTNJIT_BF16;
    case DType::f32: return ATTNJIT_F32;
    case DType::i32: return ATTNJIT_I32;
    case DType::i64: return ATTNJIT_I64;
    case DType::u8: return ATTNJIT_U8;
    }
    return -1;
}

inline attnjit_tensor c_tensor(const runtime::TensorView& v) {
    attnjit_tensor t = ATTNJIT_TENSOR_INIT;
    t.data = v.data;
    t.dtype = c_dtype(v.dtype);
    t.rank = v.rank();
    for (int d = 0; d < v.rank(); ++d) {
        t.shape[d] = v.shape[static_cast<size_t>(d)];
        t.strides[d] = v.strides[static_cast<size_t>(d)];
    }
    return t;
}

// `status` is `expected` and attnjit_last_error() contains every one of `substrings`.
inline ::testing::AssertionResult status_is(attnjit_status status, attnjit_status expected,
                                            std::initializer_list<const char*> substrings) {
    const std::string message = attnjit_last_error();
    if (status != expected)
        return ::testing::AssertionFailure() << "returned " << attnjit_status_name(status) << ", expected "
                                             << attnjit_status_name(expected) << "; last error: " << message;
    for (const char* s : substrings)
        if (message.find(s) == std::string::npos)
            return ::testing::AssertionFailure() << attnjit_status_name(status) << " as expected, but the message lacks \""
                                                 << s << "\":\n  " << message;
    return ::testing::AssertionSuccess();
}

}  // namespace attnjit::capitest

// EXPECT_STATUS(attnjit_x(...), ATTNJIT_ERROR_..., {"attnjit_x", "'out'"});
#define EXPECT_STATUS(call, expected, ...) \
    EXPECT_TRUE(::attnjit::capitest::status_is((call), (expected), __VA_ARGS__)) << #call
