// Evaluates an expression on the host, in fp64 / int64 / bool: the meaning of the DSL
// that the CPU reference, codegen's tests and constant-folding checks agree on.
//
// Semantics (the generated code must match them wherever its own types allow):
//  - Float: IEEE double. inf and NaN propagate; comparisons with NaN are false except !=.
//    min/max return NaN when either operand is NaN (IEEE 754-2019 minimum/maximum, as
//    torch.minimum/maximum), so a NaN score is never silently replaced.
//    sigmoid(x) = 1 / (1 + exp(-x)); rsqrt(x) = 1 / sqrt(x); pow is std::pow.
//  - Int: int64, two's complement wrap-around on overflow. / and % truncate toward zero
//    as in C (-7 / 2 == -3, -7 % 2 == -1). Division or remainder by zero is a UserError
//    naming the expression (the GPU result would be unspecified).
//  - Casts: int -> float exact (below 2^53); float -> int truncates toward zero,
//    NaN -> 0, out of range saturates. Bool <-> number (only reachable from IR built
//    by codegen): true is 1, a number is true when != 0.
//  - select, && and || evaluate lazily, as in C: the branch not taken is not evaluated,
//    so a guarded tensor read (select(j < n, t[j], 0.0)) never reads out of bounds.
//  - Tensor elements are read through Env::load; an Int tensor element must hold an
//    integral value and is read as int32, truncated like a C cast (an i64 element
//    2^32 + 5 reads 5), as the generated code reads it; a Bool (u8) element is true
//    when != 0.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "dsl/ir.h"

namespace attnjit::dsl {

// A value of one of the three DSL types. Only the field matching `type` is meaningful.
struct Value {
    Type type = Type::Float;
    double f = 0;     // Float
    long long i = 0;  // Int, and Bool (0 or 1)

    static Value of_float(double v) { return {Type::Float, v, 0}; }
    static Value of_int(long long v) { return {Type::Int, 0, v}; }
    static Value of_bool(bool v) { return {Type::Bool, 0, v ? 1 : 0}; }
    bool as_bool() const { return i != 0; }
    // Float as is, Int and Bool converted.
    double as_double() const { return type == Type::Float ? f : static_cast<double>(i); }
};

// Reads element `index[0..rank)` of the captured tensor `name` as a double.
using TensorReader = std::function<double(const std::string& name, const long long* index, int rank)>;

// Everything an expression may read. Cheap to update between evaluations (fields are
// plain values), so one Env serves a whole row of scores.
struct Env {
    double score = 0;
    long long b = 0, h = 0, kv_head = 0, q_idx = 0, kv_idx = 0, q_len = 0, kv_len = 0;
    std::map<std::string, double> scalars;  // int scalars must hold integral values
    TensorReader load;                      // required if the expression reads tensors
    std::map<std::string, Value> temps;     // values of codegen temporaries (Temp nodes)
};

// Throws UserError for a missing scalar or tensor reader, a non-integral int scalar or int
// tensor element, and integer division by zero; InternalError for a Temp with no value.
Value interpret(const Expr& e, const Env& env);

// interpret() that also checks the result type (UserError naming the expression if not).
double interpret_float(const Expr& e, const Env& env);
long long interpret_int(const Expr& e, const Env& env);
bool interpret_bool(const Expr& e, const Env& env);

}  // namespace attnjit::dsl
