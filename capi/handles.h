// What the opaque C handles hold. A spec handle keeps, besides the validated spec, the
// lists the argument queries and positional launches index (sorted by name, computed
// once); a kernel handle adds the compiled Attention.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnjit/attnjit_c.h"
#include "dsl/attention_spec.h"
#include "api/attention.h"
#include "api/attention_backward.h"

namespace attnjit::capi {

struct TensorInput {
    std::string name;
    int32_t dtype;  // attnjit_dtype
    int32_t rank;
};

struct ScalarInput {
    std::string name;
    bool is_int;
};

// options (may be null) as CompileOptions; tile fields left 0 take the default tile of
// `kind` for the spec. A missing GPU without options->arch is an EnvironmentError.
CompileOptions to_compile_options(const dsl::AttentionSpec& spec, const attnjit_compile_options* options,
                                  KernelKind kind);

// Unique in the process and never reused (unlike an address): keys per-thread scratch.
uint64_t next_handle_id();

// attnjit_dtype <-> DType. The C values are part of the ABI; DType's order may change.
int32_t dtype_code(DType d);
bool is_dtype_code(int32_t code);
DType dtype_from_code(int32_t code);  // code must satisfy is_dtype_code

}  // namespace attnjit::capi

struct attnjit_spec {
    explicit attnjit_spec(attnjit::dsl::AttentionSpec validated);

    attnjit::dsl::AttentionSpec spec;
    std::vector<attnjit::capi::TensorInput> tensors;  // sorted by name: the positional order
    std::vector<attnjit::capi::ScalarInput> scalars;  // sorted by name
};

struct attnjit_kernel {
    attnjit_kernel(const attnjit_spec& spec, const attnjit::CompileOptions& options);

    attnjit_spec spec;
    attnjit::Attention attention;
    uint64_t id;  // next_handle_id(): keys the per-thread launch scratch (launch_args.h)
};

struct attnjit_backward {
    attnjit_backward(const attnjit_spec& spec, const attnjit::CompileOptions& options);

    attnjit_spec spec;
    attnjit::AttentionBackward backward;
    uint64_t id;  // next_handle_id()
};
