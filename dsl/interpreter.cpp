#include "dsl/interpreter.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

// The six comparisons, the same for doubles and int64 (IEEE: NaN compares false).
template <class T>
bool compare(BinaryOp op, T x, T y) {
    switch (op) {
    case BinaryOp::Eq: return x == y;
    case BinaryOp::Ne: return x != y;
    case BinaryOp::Lt: return x < y;
    case BinaryOp::Le: return x <= y;
    case BinaryOp::Gt: return x > y;
    default: return x >= y;  // Ge
    }
}

constexpr int kMaxRank = 8;

// Two's complement wrap-around without undefined behaviour.
long long wrap_add(long long a, long long b) {
    return static_cast<long long>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
long long wrap_sub(long long a, long long b) {
    return static_cast<long long>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
long long wrap_mul(long long a, long long b) {
    return static_cast<long long>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

long long float_to_int(double v) {
    if (std::isnan(v)) return 0;
    constexpr double lo = -9223372036854775808.0;  // -2^63, exact
    if (v <= lo) return std::numeric_limits<long long>::min();
    if (v >= -lo) return std::numeric_limits<long long>::max();
    return static_cast<long long>(v);  // truncates toward zero
}

long long integral(double v, const char* what, const std::string& name) {
    user_check(std::isfinite(v) && v == std::trunc(v) && std::fabs(v) <= 9007199254740992.0)
        << what << " '" << name << "' holds " << v << " where an integer is needed";
    return static_cast<long long>(v);
}

// An int tensor element is an int32 (an i64 one truncated like a C cast), as the
// generated code reads it (attnjit::to_int).
long long to_int32(long long v) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

double nan_min(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return a < b ? a : (b < a ? b : (std::signbit(a) ? a : b));  // min(-0, +0) = -0
}
double nan_max(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
    return a > b ? a : (b > a ? b : (std::signbit(a) ? b : a));  // max(-0, +0) = +0
}

class Evaluator {
public:
    explicit Evaluator(const Env& env) : env_(env) {}

    Value eval(const Expr& e) {
        user_check(e.defined()) << "cannot evaluate an undefined Expr";
        switch (e.kind()) {
        case NodeKind::Const: {
            auto c = e.as<Const>();
            if (c->type == Type::Float) return Value::of_float(c->f);
            if (c->type == Type::Int) return Value::of_int(c->i);
            return Value::of_bool(c->i != 0);
        }
        case NodeKind::Var: return var(e.as<Var>()->var);
        case NodeKind::ScalarParam: {
            auto s = e.as<ScalarParam>();
            auto it = env_.scalars.find(s->name);
            user_check(it != env_.scalars.end())
                << "scalar '" << s->name << "' has no value; pass it by name with the other scalars";
            if (s->type == Type::Int) return Value::of_int(integral(it->second, "int scalar", s->name));
            return Value::of_float(it->second);
        }
        case NodeKind::Temp: {
            auto t = e.as<Temp>();
            auto it = env_.temps.find(t->name);
            internal_check(it != env_.temps.end()) << "temporary " << t->name << " has no value";
            internal_check(it->second.type == t->type) << "temporary " << t->name << " has the wrong type";
            return it->second;
        }
        case NodeKind::TensorLoad: return load(e.as<TensorLoad>());
        case NodeKind::Unary: return unary(e.as<Unary>());
        case NodeKind::Binary: return binary(e.as<Binary>(), e);
        case NodeKind::Select: {
            auto s = e.as<Select>();
            return eval(s->cond).as_bool() ? eval(s->t) : eval(s->f);
        }
        case NodeKind::Cast: return cast(e.type(), eval(e.as<Cast>()->a));
        }
        internal_error << "unknown node kind";
        return {};
    }

private:
    Value var(VarKind v) const {
        switch (v) {
        case VarKind::Score: return Value::of_float(env_.score);
        case VarKind::Batch: return Value::of_int(env_.b);
        case VarKind::Head: return Value::of_int(env_.h);
        case VarKind::KvHead: return Value::of_int(env_.kv_head);
        case VarKind::QIdx: return Value::of_int(env_.q_idx);
        case VarKind::KvIdx: return Value::of_int(env_.kv_idx);
        case VarKind::QLen: return Value::of_int(env_.q_len);
        case VarKind::KvLen: return Value::of_int(env_.kv_len);
        }
        internal_error << "unknown variable";
        return {};
    }

    Value load(const TensorLoad* t) {
        int rank = static_cast<int>(t->indices.size());
        internal_check(rank <= kMaxRank) << "tensor " << t->name << " has rank " << rank;
        long long idx[kMaxRank];
        for (int d = 0; d < rank; ++d) idx[d] = eval(t->indices[d]).i;
        user_check(static_cast<bool>(env_.load))
            << "tensor '" << t->name << "' is read but no tensors were given; pass it by name";
        double v = env_.load(t->name, idx, rank);
        switch (t->type) {
        case Type::Float: return Value::of_float(v);
        case Type::Int: return Value::of_int(to_int32(integral(v, "int tensor", t->name)));
        case Type::Bool: return Value::of_bool(v != 0);
        }
        return {};
    }

    static Value cast(Type to, const Value& a) {
        switch (to) {
        case Type::Float: return Value::of_float(a.as_double());
        case Type::Int: return a.type == Type::Float ? Value::of_int(float_to_int(a.f)) : Value::of_int(a.i);
        case Type::Bool: return Value::of_bool(a.type == Type::Float ? a.f != 0 : a.i != 0);
        }
        return {};
    }

    Value unary(const Unary* u) {
        Value a = eval(u->a);
        switch (u->op) {
        case UnaryOp::Neg:
            return a.type == Type::Float ? Value::of_float(-a.f) : Value::of_int(wrap_sub(0, a.i));
        case UnaryOp::Not: return Value::of_bool(!a.as_bool());
        case UnaryOp::Abs:
            if (a.type == Type::Float) return Value::of_float(std::fabs(a.f));
            return Value::of_int(a.i < 0 ? wrap_sub(0, a.i) : a.i);
        default: break;
        }
        double x = a.f;
        switch (u->op) {
        case UnaryOp::Exp: return Value::of_float(std::exp(x));
        case UnaryOp::Exp2: return Value::of_float(std::exp2(x));
        case UnaryOp::Log: return Value::of_float(std::log(x));
        case UnaryOp::Log2: return Value::of_float(std::log2(x));
        case UnaryOp::Tanh: return Value::of_float(std::tanh(x));
        case UnaryOp::Sigmoid: return Value::of_float(1.0 / (1.0 + std::exp(-x)));
        case UnaryOp::Sqrt: return Value::of_float(std::sqrt(x));
        case UnaryOp::Rsqrt: return Value::of_float(1.0 / std::sqrt(x));
        case UnaryOp::Floor: return Value::of_float(std::floor(x));
        case UnaryOp::Ceil: return Value::of_float(std::ceil(x));
        case UnaryOp::Sin: return Value::of_float(std::sin(x));
        case UnaryOp::Cos: return Value::of_float(std::cos(x));
        default: break;
        }
        internal_error << "unknown unary op";
        return {};
    }

    Value binary(const Binary* n, const Expr& self) {
        // Logical operators short-circuit, as in C.
        if (n->op == BinaryOp::And) return Value::of_bool(eval(n->a).as_bool() && eval(n->b).as_bool());
        if (n->op == BinaryOp::Or) return Value::of_bool(eval(n->a).as_bool() || eval(n->b).as_bool());
        Value a = eval(n->a), b = eval(n->b);
        if (is_comparison(n->op))
            return Value::of_bool(a.type == Type::Float ? compare(n->op, a.f, b.f) : compare(n->op, a.i, b.i));
        if (a.type == Type::Float) {
            double x = a.f, y = b.f;
            switch (n->op) {
            case BinaryOp::Add: return Value::of_float(x + y);
            case BinaryOp::Sub: return Value::of_float(x - y);
            case BinaryOp::Mul: return Value::of_float(x * y);
            case BinaryOp::Div: return Value::of_float(x / y);
            case BinaryOp::Mod: return Value::of_float(std::fmod(x, y));  // not built by operators
            case BinaryOp::Min: return Value::of_float(nan_min(x, y));
            case BinaryOp::Max: return Value::of_float(nan_max(x, y));
            case BinaryOp::Pow: return Value::of_float(std::pow(x, y));
            default: break;
            }
        } else {  // Int, or Bool for == and !=
            long long x = a.i, y = b.i;
            switch (n->op) {
            case BinaryOp::Add: return Value::of_int(wrap_add(x, y));
            case BinaryOp::Sub: return Value::of_int(wrap_sub(x, y));
            case BinaryOp::Mul: return Value::of_int(wrap_mul(x, y));
            case BinaryOp::Div:
            case BinaryOp::Mod: {
                user_check(y != 0) << "integer division by zero in " << self
                                   << " (the right operand evaluated to 0)";
                bool overflow = x == std::numeric_limits<long long>::min() && y == -1;
                if (n->op == BinaryOp::Div) return Value::of_int(overflow ? x : x / y);
                return Value::of_int(overflow ? 0 : x % y);
            }
            case BinaryOp::Min: return Value::of_int(x < y ? x : y);
            case BinaryOp::Max: return Value::of_int(x > y ? x : y);
            case BinaryOp::Pow: return Value::of_float(std::pow(double(x), double(y)));  // not built
            default: break;
            }
        }
        internal_error << "unknown binary op";
        return {};
    }

    const Env& env_;
};

Value typed(const Expr& e, const Env& env, Type want) {
    user_check(e.defined()) << "cannot evaluate an undefined Expr";
    user_check(e.type() == want) << "expected a " << want << " expression but " << e << " is " << e.type();
    return Evaluator(env).eval(e);
}

}  // namespace

Value interpret(const Expr& e, const Env& env) { return Evaluator(env).eval(e); }
double interpret_float(const Expr& e, const Env& env) { return typed(e, env, Type::Float).f; }
long long interpret_int(const Expr& e, const Env& env) { return typed(e, env, Type::Int).i; }
bool interpret_bool(const Expr& e, const Env& env) { return typed(e, env, Type::Bool).as_bool(); }

}  // namespace attnjit::dsl
