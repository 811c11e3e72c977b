#include "capi/handles.h"

#include <atomic>

#include "support/error.h"

namespace attnjit::capi {

static_assert(ATTNJIT_F16 == 0 && ATTNJIT_U8 == 5, "attnjit_dtype codes are ABI: never renumber them");

int32_t dtype_code(DType d) {
    switch (d) {
    case DType::f16: return ATTNJIT_F16;
    case DType::bf16: return ATTNJIT_BF16;
    case DType::f32: return ATTNJIT_F32;
    case DType::i32: return ATTNJIT_I32;
    case DType::i64: return ATTNJIT_I64;
    case DType::u8: return ATTNJIT_U8;
    }
    internal_error << "DType " << static_cast<int>(d) << " has no attnjit_dtype code";
    return -1;
}

bool is_dtype_code(int32_t code) { return code >= ATTNJIT_F16 && code <= ATTNJIT_U8; }

DType dtype_from_code(int32_t code) {
    switch (code) {
    case ATTNJIT_F16: return DType::f16;
    case ATTNJIT_BF16: return DType::bf16;
    case ATTNJIT_F32: return DType::f32;
    case ATTNJIT_I32: return DType::i32;
    case ATTNJIT_I64: return DType::i64;
    default: return DType::u8;
    }
}

uint64_t next_handle_id() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
}

}  // namespace attnjit::capi

attnjit_spec::attnjit_spec(attnjit::dsl::AttentionSpec validated) : spec(std::move(validated)) {
    for (const auto& [name, info] : spec.tensors())  // std::map: sorted by name
        tensors.push_back({name, attnjit::capi::dtype_code(info.dtype), info.rank});
    for (const auto& [name, type] : spec.scalars()) scalars.push_back({name, type == attnjit::dsl::Type::Int});
}

attnjit_kernel::attnjit_kernel(const attnjit_spec& s, const attnjit::CompileOptions& options)
    : spec(s), attention(s.spec, options), id(attnjit::capi::next_handle_id()) {}

attnjit_backward::attnjit_backward(const attnjit_spec& s, const attnjit::CompileOptions& options)
    : spec(s), backward(s.spec, options), id(attnjit::capi::next_handle_id()) {}
