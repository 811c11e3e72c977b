// Scalar types of DSL expressions. Every value in a score_mod or mask is one of these;
// tensors of any DType are read into them (f16/bf16/f32 -> Float, i32/i64 -> Int,
// u8 -> Bool).
#pragma once

#include <ostream>

#include "support/dtype.h"

namespace attnjit::dsl {

enum class Type { Float, Int, Bool };

inline const char* type_name(Type t) {
    switch (t) {
    case Type::Float: return "float";
    case Type::Int: return "int";
    case Type::Bool: return "bool";
    }
    return "?";
}

inline std::ostream& operator<<(std::ostream& os, Type t) { return os << type_name(t); }

// The DSL type a tensor element of this dtype is read as.
inline Type type_of(DType d) {
    if (dtype_is_float(d)) return Type::Float;
    if (d == DType::u8) return Type::Bool;
    return Type::Int;
}

}  // namespace attnjit::dsl
