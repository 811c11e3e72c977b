// Expr -> CUDA C++ expression text, evaluated in fp32 / int32 / bool.
//
// Conventions (the generated Variant hooks rely on them):
//  * variables: b, h, kv_head read the Head struct ("hd.b", "hd.h", "hd.kvh"); q_idx and
//    kv_idx are the hook arguments "q" and "k"; the score is "s"; q_len / kv_len are
//    "p.args.q_len" / "p.args.kv_len";
//  * runtime scalars are Params fields "p.scalar_<name>"; a captured tensor element is
//    attnjit::to_float / to_int / to_bool of "p.tensor_<name>.ptr[off]" with
//    off = i0 * p.tensor_<name>.stride[0] + i1 * ... (strides are long long, so the
//    offset is computed in 64 bits; constant-zero indices are left out); to_int makes an
//    i64 element an int32, truncated like a C cast, as every other reader does
//    (codegen/README.md);
//  * temporaries are named by EmitNames::temps (e.g. "hd.h0", "r.r0", "t0");
//  * float literals are fp32 ("30.0f"); inf and NaN are attnjit::bits_to_float(...);
//  * math uses the CUDA fp32 functions: exp -> expf (not exp2f(x * log2e): expf is the
//    accurate form, and -use_fast_math turns it into the same ex2.approx sequence),
//    logf, ..., sigmoid(x) -> 1.0f / (1.0f + expf(-x)), int min/max -> min / max;
//    float min/max -> fmin_nan / fmax_nan, which return NaN when either operand is NaN
//    (the DSL's meaning, dsl/interpreter.h; fminf would drop the NaN), and tanh -> tanh_
//    (tanh.approx.f32 for f16 / bf16 specs, tanhf for f32). generate() defines them in the
//    Variant when used (kNanMinMaxHelpers, tanh_helper);
//  * int / and % are C's (truncate toward zero; the sign of % follows the dividend);
//    float -> int casts truncate, as to_int() does in the DSL.
// Parentheses follow C precedence, so the text reads like the DSL printer's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dsl/ir.h"
#include "support/dtype.h"

namespace attnjit::codegen {

struct EmitNames {
    std::map<std::string, std::string> temps;  // dsl::Temp name -> C expression
    // score_mod's bias tile (codegen/bias_tile.h): reads of this tensor at [..., q_idx,
    // kv_idx] are the hook argument bias_tile_value instead of a memory read.
    std::string bias_tile_tensor, bias_tile_value;
};

std::string emit_expr(const dsl::Expr& e, const EmitNames& names = {});

// True when emit_expr(e) calls fmin_nan / fmax_nan.
bool uses_float_min_max(const dsl::Expr& e);
// Their definitions, as static member functions (one line each).
extern const char* const kNanMinMaxHelpers[2];
// True when emit_expr(e) calls tanh_ (the DSL's tanh).
bool uses_tanh(const dsl::Expr& e);
// Its definition, a static member function: approx, tanh.approx.f32 (one MUFU instruction,
// where the accurate tanhf is a branchy sequence of ~20 that the score hooks inline for every
// element of a tile; used for f16 / bf16 specs); else tanhf.
std::vector<const char*> tanh_helper(bool approx);

// "float", "int" or "bool".
const char* cuda_type(dsl::Type t);
// Element type of a captured tensor / of Q, K, V: attnjit::half_t, attnjit::bf16_t,
// float, int, long long, unsigned char.
const char* cuda_elem_type(DType d);
// Params field names.
std::string scalar_field(const std::string& name);  // "scalar_<name>"
std::string tensor_field(const std::string& name);  // "tensor_<name>"
// "i0 * p.tensor_x.stride[0] + ..." from already-emitted index texts (texts equal to
// "0" are left out; all zero gives "0").
std::string tensor_offset(const std::string& name, const std::vector<std::string>& index_texts);
// An fp32 literal for v: "0.125f", "-3.0f", or attnjit::bits_to_float(0x7f800000u) for inf.
std::string float_literal_cuda(double v);

}  // namespace attnjit::codegen
