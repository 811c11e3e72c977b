#include "codegen/cuda_emitter.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "codegen/bias_tile.h"
#include "dsl/visitor.h"
#include "support/error.h"

namespace attnjit::codegen {

using namespace dsl;

const char* cuda_type(Type t) {
    switch (t) {
    case Type::Float: return "float";
    case Type::Int: return "int";
    case Type::Bool: return "bool";
    }
    return "?";
}

const char* cuda_elem_type(DType d) {
    switch (d) {
    case DType::f16: return "attnjit::half_t";
    case DType::bf16: return "attnjit::bf16_t";
    case DType::f32: return "float";
    case DType::i32: return "int";
    case DType::i64: return "long long";
    case DType::u8: return "unsigned char";
    }
    return "?";
}

std::string scalar_field(const std::string& name) { return "scalar_" + name; }
std::string tensor_field(const std::string& name) { return "tensor_" + name; }

std::string tensor_offset(const std::string& name, const std::vector<std::string>& index_texts) {
    std::string off;
    for (size_t i = 0; i < index_texts.size(); ++i) {
        if (index_texts[i] == "0") continue;
        if (!off.empty()) off += " + ";
        off += index_texts[i] + " * p." + tensor_field(name) + ".stride[" + std::to_string(i) + "]";
    }
    return off.empty() ? "0" : off;
}

std::string float_literal_cuda(double v) {
    const float f = static_cast<float>(v);
    if (std::isnan(f)) return "attnjit::bits_to_float(0x7fc00000u)";
    if (std::isinf(f)) return f > 0 ? "attnjit::bits_to_float(0x7f800000u)" : "attnjit::bits_to_float(0xff800000u)";
    char buf[64];
    std::string best;
    for (int prec = 1; prec <= 9; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
        if (std::strtof(buf, nullptr) == f) {
            best = buf;
            break;
        }
    }
    // Fixed notation when it is about as short ("30.0f", not "3e+01f").
    if (std::fabs(f) < 1e9f) {
        for (int d = 1; d <= 12; ++d) {
            std::snprintf(buf, sizeof buf, "%.*f", d, static_cast<double>(f));
            if (std::strtof(buf, nullptr) == f) {
                if (std::strlen(buf) <= best.size() + 2) best = buf;
                break;
            }
        }
    }
    if (best.find_first_of(".e") == std::string::npos) best += ".0";
    return best + "f";
}

namespace {

// C precedence, higher binds tighter.
constexpr int kTernary = 0, kUnary = 7, kPrimary = 8;

int binary_prec(BinaryOp op) {
    int p = infix_precedence(op);
    return p ? p : kPrimary;  // min, max, pow: calls
}

const char* float_fn(UnaryOp op) {
    switch (op) {
    case UnaryOp::Exp: return "expf";
    case UnaryOp::Exp2: return "exp2f";
    case UnaryOp::Log: return "logf";
    case UnaryOp::Log2: return "log2f";
    case UnaryOp::Tanh: return "tanh_";  // the Variant's helper (tanh_helper)
    case UnaryOp::Sqrt: return "sqrtf";
    case UnaryOp::Rsqrt: return "rsqrtf";
    case UnaryOp::Floor: return "floorf";
    case UnaryOp::Ceil: return "ceilf";
    case UnaryOp::Sin: return "sinf";
    case UnaryOp::Cos: return "cosf";
    default: return nullptr;
    }
}

struct Text {
    std::string s;
    int prec;
};

class Emitter {
public:
    explicit Emitter(const EmitNames& n) : names_(n) {}

    Text emit(const Expr& e) {
        switch (e.kind()) {
        case NodeKind::Const: return constant(*e.as<Const>());
        case NodeKind::Var: return {var(e.as<Var>()->var), kPrimary};
        case NodeKind::ScalarParam: return {"p." + scalar_field(e.as<ScalarParam>()->name), kPrimary};
        case NodeKind::Temp: {
            const auto& name = e.as<Temp>()->name;
            auto it = names_.temps.find(name);
            internal_check(it != names_.temps.end()) << "cuda_emitter: no name for temporary " << name;
            return {it->second, kPrimary};
        }
        case NodeKind::TensorLoad: return load(*e.as<TensorLoad>());
        case NodeKind::Unary: return unary(*e.as<Unary>());
        case NodeKind::Binary: return binary(*e.as<Binary>());
        case NodeKind::Select: {
            auto s = e.as<Select>();
            return {wrap(s->cond, kTernary + 1) + " ? " + wrap(s->t, kTernary + 1) + " : " + wrap(s->f, kTernary),
                    kTernary};
        }
        case NodeKind::Cast: {
            auto c = e.as<Cast>();
            return {std::string("(") + cuda_type(c->type) + ")" + wrap(c->a, kUnary), kUnary};
        }
        }
        internal_error << "cuda_emitter: unknown node";
        return {};
    }

    // Text of e, parenthesised when it binds looser than min_prec.
    std::string wrap(const Expr& e, int min_prec) {
        Text t = emit(e);
        return t.prec < min_prec ? "(" + t.s + ")" : t.s;
    }

private:
    static std::string var(VarKind v) {
        switch (v) {
        case VarKind::Score: return "s";
        case VarKind::Batch: return "hd.b";
        case VarKind::Head: return "hd.h";
        case VarKind::KvHead: return "hd.kvh";
        case VarKind::QIdx: return "q";
        case VarKind::KvIdx: return "k";
        case VarKind::QLen: return "p.args.q_len";
        case VarKind::KvLen: return "p.args.kv_len";
        }
        return "?";
    }

    static Text constant(const Const& c) {
        if (c.type == Type::Bool) return {c.i ? "true" : "false", kPrimary};
        if (c.type == Type::Int) {
            if (c.i == INT32_MIN) return {"(-2147483647 - 1)", kPrimary};
            return {std::to_string(c.i), c.i < 0 ? kUnary : kPrimary};
        }
        std::string s = float_literal_cuda(c.f);
        return {s, s[0] == '-' ? kUnary : kPrimary};
    }

    Text load(const TensorLoad& t) {
        if (!names_.bias_tile_tensor.empty() && t.name == names_.bias_tile_tensor && reads_bias_tile(t))
            return {names_.bias_tile_value, kPrimary};
        std::vector<std::string> idx;
        for (const auto& i : t.indices) idx.push_back(wrap(i, binary_prec(BinaryOp::Mul)));
        const char* conv = t.type == Type::Float ? "to_float" : t.type == Type::Int ? "to_int" : "to_bool";
        return {std::string("attnjit::") + conv + "(p." + tensor_field(t.name) + ".ptr[" + tensor_offset(t.name, idx) +
                    "])",
                kPrimary};
    }

    Text unary(const Unary& u) {
        switch (u.op) {
        case UnaryOp::Neg:
        case UnaryOp::Not: {
            Text a = emit(u.a);
            // Never print "--x" or "- -1": wrap a negative operand.
            bool paren = a.prec < kUnary || (a.prec == kUnary && u.op == UnaryOp::Neg);
            return {std::string(u.op == UnaryOp::Neg ? "-" : "!") + (paren ? "(" + a.s + ")" : a.s), kUnary};
        }
        case UnaryOp::Abs: return {std::string(u.type == Type::Float ? "fabsf(" : "abs(") + wrap(u.a, 0) + ")", kPrimary};
        case UnaryOp::Sigmoid: return {"1.0f / (1.0f + expf(-" + wrap(u.a, kPrimary) + "))", 6};
        default: break;
        }
        const char* fn = float_fn(u.op);
        internal_check(fn) << "cuda_emitter: no CUDA function for " << unary_name(u.op);
        return {std::string(fn) + "(" + wrap(u.a, 0) + ")", kPrimary};
    }

    Text binary(const Binary& b) {
        const bool is_float = b.a.type() == Type::Float;
        switch (b.op) {
        case BinaryOp::Min:
        case BinaryOp::Max: {
            std::string fn = b.op == BinaryOp::Min ? (is_float ? "fmin_nan" : "min") : (is_float ? "fmax_nan" : "max");
            return {fn + "(" + wrap(b.a, 0) + ", " + wrap(b.b, 0) + ")", kPrimary};
        }
        case BinaryOp::Pow: return {"powf(" + wrap(b.a, 0) + ", " + wrap(b.b, 0) + ")", kPrimary};
        default: break;
        }
        const int p = binary_prec(b.op);
        // Left-associative: the right operand needs strictly tighter binding. A
        // comparison of comparisons and an && inside || get parentheses for the reader.
        int left = p, right = p + 1;
        if (b.op == BinaryOp::Or) left = right = 3;
        else if (b.op == BinaryOp::And) left = 2, right = 3;
        else if (p == 3 || p == 4) left = right = 5;
        return {wrap(b.a, left) + " " + binary_name(b.op) + " " + wrap(b.b, right), p};
    }

    const EmitNames& names_;
};

}  // namespace

bool uses_float_min_max(const Expr& e) {
    bool found = false;
    for_each_node(e, [&](const Expr& n) {
        if (auto b = n.as<Binary>())
            found |= (b->op == BinaryOp::Min || b->op == BinaryOp::Max) && b->a.type() == Type::Float;
    });
    return found;
}

const char* const kNanMinMaxHelpers[2] = {
    "__device__ static float fmin_nan(float a, float b) { return a != a || b != b ? a + b : fminf(a, b); }",
    "__device__ static float fmax_nan(float a, float b) { return a != a || b != b ? a + b : fmaxf(a, b); }",
};

bool uses_tanh(const Expr& e) {
    bool found = false;
    for_each_node(e, [&](const Expr& n) {
        if (auto u = n.as<Unary>()) found |= u->op == UnaryOp::Tanh;
    });
    return found;
}

std::vector<const char*> tanh_helper(bool approx) {
    if (!approx) return {"__device__ static float tanh_(float x) { return tanhf(x); }"};
    // tanh.approx.f32 exists from sm_75; attnjit builds for sm_80 and newer.
    return {"__device__ static float tanh_(float x) {",
            "    float y;",
            "    asm(\"tanh.approx.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));",
            "    return y;",
            "}"};
}

std::string emit_expr(const Expr& e, const EmitNames& names) {
    internal_check(e.defined()) << "emit_expr of an undefined Expr";
    return Emitter(names).emit(e).s;
}

}  // namespace attnjit::codegen
