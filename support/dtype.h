// Element types of tensors that cross the API (Q/K/V/O and captured tensors).
#pragma once

#include <string>

namespace attnjit {

enum class DType { f16, bf16, f32, i32, i64, u8 };

inline const char* dtype_name(DType t) {
    switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    }
    return "?";
}

inline int dtype_size(DType t) {
    switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    }
    return 0;
}

inline bool dtype_is_float(DType t) { return t == DType::f16 || t == DType::bf16 || t == DType::f32; }

}  // namespace attnjit
