// Spec handles: from and to the JSON format, hash, and what a launch must pass.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "capi/handles.h"
#include "capi/status.h"
#include "dsl/spec_json.h"
#include "support/error.h"

using attnjit::capi::guarded;

namespace {

// Queries that return a value rather than a status report a null handle this way.
int32_t null_spec(const char* function) {
    attnjit::capi::fail(ATTNJIT_ERROR_INVALID_ARGUMENT, function,
                        "argument 'spec' is null; pass a spec made by attnjit_spec_from_json or returned by "
                        "attnjit_kernel_spec");
    return -1;
}

void check_index(const char* list, int32_t i, size_t count, const char* count_function) {
    if (i >= 0 && static_cast<size_t>(i) < count) return;
    if (count == 0)
        user_error << "argument 'i' is " << i << " but the spec reads no " << list << " (" << count_function
                   << " is 0); do not ask for any";
    user_error << "argument 'i' is " << i << " but the spec reads " << count << " " << list
               << "; pass an index in [0, " << count << ") (" << count_function << " gives the count)";
}

}  // namespace

extern "C" {

attnjit_status attnjit_spec_from_json(const char* json, size_t length, attnjit_spec** out) {
    return guarded("attnjit_spec_from_json", [&] {
        user_check(out) << "argument 'out' is null; pass the address of an attnjit_spec* to receive the spec";
        *out = nullptr;
        user_check(json || length == 0) << "argument 'json' is null but 'length' is " << length
                                        << "; pass the JSON text and its length in bytes";
        auto spec = attnjit::dsl::spec_from_json(std::string_view(json ? json : "", length), "spec");
        spec.validate();  // spec_from_json validates too; a handle is valid by construction
        *out = new attnjit_spec(std::move(spec));
    });
}

attnjit_status attnjit_spec_to_json(const attnjit_spec* spec, char** out) {
    return guarded("attnjit_spec_to_json", [&] {
        user_check(out) << "argument 'out' is null; pass the address of a char* to receive the JSON";
        *out = nullptr;
        user_check(spec) << "argument 'spec' is null; pass a spec made by attnjit_spec_from_json";
        const std::string json = attnjit::dsl::spec_to_json(spec->spec);
        // malloc'ed so that attnjit_free_string (free) releases it whatever allocator the
        // caller's language uses.
        char* copy = static_cast<char*>(std::malloc(json.size() + 1));
        if (!copy) throw std::bad_alloc();
        std::memcpy(copy, json.c_str(), json.size() + 1);
        *out = copy;
    });
}

void attnjit_free_string(char* s) { std::free(s); }

attnjit_status attnjit_spec_hash(const attnjit_spec* spec, uint64_t* out) {
    return guarded("attnjit_spec_hash", [&] {
        user_check(out) << "argument 'out' is null; pass the address of a uint64_t to receive the hash";
        *out = 0;
        user_check(spec) << "argument 'spec' is null; pass a spec made by attnjit_spec_from_json";
        *out = spec->spec.hash();
    });
}

void attnjit_spec_destroy(attnjit_spec* spec) { delete spec; }

int32_t attnjit_spec_returns_lse(const attnjit_spec* spec) {
    if (!spec) return null_spec("attnjit_spec_returns_lse");
    return spec->spec.returns_lse() ? 1 : 0;
}

int32_t attnjit_spec_num_tensors(const attnjit_spec* spec) {
    if (!spec) return null_spec("attnjit_spec_num_tensors");
    return static_cast<int32_t>(spec->tensors.size());
}

int32_t attnjit_spec_num_scalars(const attnjit_spec* spec) {
    if (!spec) return null_spec("attnjit_spec_num_scalars");
    return static_cast<int32_t>(spec->scalars.size());
}

attnjit_status attnjit_spec_tensor(const attnjit_spec* spec, int32_t i, const char** name, int32_t* dtype,
                                   int32_t* rank) {
    return guarded("attnjit_spec_tensor", [&] {
        if (name) *name = nullptr;
        if (dtype) *dtype = -1;
        if (rank) *rank = -1;
        user_check(name && dtype && rank)
            << "argument '" << (!name ? "name" : !dtype ? "dtype" : "rank")
            << "' is null; pass the addresses of a const char* (name), an int32_t (dtype) and an int32_t (rank)";
        user_check(spec) << "argument 'spec' is null; pass a spec made by attnjit_spec_from_json";
        check_index("captured tensors", i, spec->tensors.size(), "attnjit_spec_num_tensors");
        const auto& t = spec->tensors[static_cast<size_t>(i)];
        *name = t.name.c_str();
        *dtype = t.dtype;
        *rank = t.rank;
    });
}

attnjit_status attnjit_spec_scalar(const attnjit_spec* spec, int32_t i, const char** name, int32_t* is_int) {
    return guarded("attnjit_spec_scalar", [&] {
        if (name) *name = nullptr;
        if (is_int) *is_int = -1;
        user_check(name && is_int) << "argument '" << (!name ? "name" : "is_int")
                                   << "' is null; pass the addresses of a const char* (name) and an int32_t (is_int)";
        user_check(spec) << "argument 'spec' is null; pass a spec made by attnjit_spec_from_json";
        check_index("runtime scalars", i, spec->scalars.size(), "attnjit_spec_num_scalars");
        const auto& s = spec->scalars[static_cast<size_t>(i)];
        *name = s.name.c_str();
        *is_int = s.is_int ? 1 : 0;
    });
}

}  // extern "C"
