#include "dsl/operators.h"

#include <limits>

#include "dsl/printer.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

void check_defined(const Expr& e, const char* op) {
    user_check(e.defined()) << "operator " << op
                            << " got an undefined Expr (a default-constructed attnjit::dsl::Expr); "
                               "build it from a value, a variable such as score(), or a tensor load";
}

// An int literal next to a float becomes a float literal (score() > 0 reads as score > 0.0).
Expr int_to_float(const Expr& e) {
    if (auto c = e.as<Const>()) return Const::make_float(static_cast<double>(c->i));
    return Cast::make(Type::Float, e);
}

// Operands in messages are parenthesised so the reader sees the tree.
std::string operand(const Expr& e) {
    std::string s = to_string(e);
    bool atom = e.as<Const>() || e.as<Var>() || e.as<ScalarParam>() || e.as<TensorLoad>();
    return atom ? s : "(" + s + ")";
}

// Numbers only (int or float): promote int to float when the other side is float.
void promote_numeric(Expr& a, Expr& b, const char* op) {
    check_defined(a, op);
    check_defined(b, op);
    user_check(a.type() != Type::Bool && b.type() != Type::Bool)
        << "type mismatch in " << operand(a) << " " << op << " " << operand(b) << ": operator " << op
        << " needs numbers but got " << a.type() << " and " << b.type()
        << "; use select(cond, x, y) to turn a condition into a number";
    if (a.type() == Type::Int && b.type() == Type::Float) a = int_to_float(a);
    if (b.type() == Type::Int && a.type() == Type::Float) b = int_to_float(b);
}

Expr numeric(BinaryOp op, Expr a, Expr b) {
    promote_numeric(a, b, binary_name(op));
    return check_expr_limits(Binary::make(op, a, b));
}

Expr float_unary(UnaryOp op, Expr a) {
    check_defined(a, unary_name(op));
    user_check(a.type() != Type::Bool) << "type mismatch in " << unary_name(op) << "(" << a
                                       << ": needs a number but got bool";
    if (a.type() == Type::Int) a = Cast::make(Type::Float, a);
    return check_expr_limits(Unary::make(op, a));
}

}  // namespace

Expr operator+(const Expr& a, const Expr& b) { return numeric(BinaryOp::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return numeric(BinaryOp::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return numeric(BinaryOp::Mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return numeric(BinaryOp::Div, a, b); }

Expr operator%(const Expr& a, const Expr& b) {
    check_defined(a, "%");
    check_defined(b, "%");
    user_check(a.type() == Type::Int && b.type() == Type::Int)
        << "type mismatch in " << operand(a) << " % " << operand(b) << ": % needs two ints but got " << a.type()
        << " and " << b.type() << "; for floats write x - floor(x / y) * y";
    return check_expr_limits(Binary::make(BinaryOp::Mod, a, b));
}

Expr operator-(const Expr& a) {
    check_defined(a, "-");
    user_check(a.type() != Type::Bool) << "type mismatch in -(" << a << "): cannot negate a bool; use !";
    // -literal is a literal: -infinity() reads and prints as -inf.
    if (auto c = a.as<Const>())
        return c->type == Type::Float ? Const::make_float(-c->f) : Const::make_int(-c->i);
    return check_expr_limits(Unary::make(UnaryOp::Neg, a));
}

Expr operator<(const Expr& a, const Expr& b) { return numeric(BinaryOp::Lt, a, b); }
Expr operator<=(const Expr& a, const Expr& b) { return numeric(BinaryOp::Le, a, b); }
Expr operator>(const Expr& a, const Expr& b) { return numeric(BinaryOp::Gt, a, b); }
Expr operator>=(const Expr& a, const Expr& b) { return numeric(BinaryOp::Ge, a, b); }

Expr operator==(const Expr& a, const Expr& b) {
    check_defined(a, "==");
    check_defined(b, "==");
    if (a.type() == Type::Bool || b.type() == Type::Bool) {
        user_check(a.type() == b.type()) << "type mismatch in " << operand(a) << " == " << operand(b)
                                         << ": cannot compare " << a.type() << " with " << b.type();
        return check_expr_limits(Binary::make(BinaryOp::Eq, a, b));
    }
    return numeric(BinaryOp::Eq, a, b);
}

Expr operator!=(const Expr& a, const Expr& b) {
    check_defined(a, "!=");
    check_defined(b, "!=");
    if (a.type() == Type::Bool || b.type() == Type::Bool) {
        user_check(a.type() == b.type()) << "type mismatch in " << operand(a) << " != " << operand(b)
                                         << ": cannot compare " << a.type() << " with " << b.type();
        return check_expr_limits(Binary::make(BinaryOp::Ne, a, b));
    }
    return numeric(BinaryOp::Ne, a, b);
}

static Expr logical(BinaryOp op, const Expr& a, const Expr& b) {
    check_defined(a, binary_name(op));
    check_defined(b, binary_name(op));
    user_check(a.type() == Type::Bool && b.type() == Type::Bool)
        << "type mismatch in " << operand(a) << " " << binary_name(op) << " " << operand(b) << ": "
        << binary_name(op) << " needs two bools but got " << a.type() << " and " << b.type()
        << "; compare numbers first, e.g. (x != 0)";
    return check_expr_limits(Binary::make(op, a, b));
}

Expr operator&&(const Expr& a, const Expr& b) { return logical(BinaryOp::And, a, b); }
Expr operator||(const Expr& a, const Expr& b) { return logical(BinaryOp::Or, a, b); }

Expr operator!(const Expr& a) {
    check_defined(a, "!");
    user_check(a.type() == Type::Bool) << "type mismatch in !(" << a << "): ! needs a bool but got "
                                       << a.type();
    return check_expr_limits(Unary::make(UnaryOp::Not, a));
}

Expr select(const Expr& cond, const Expr& if_true, const Expr& if_false) {
    check_defined(cond, "select");
    check_defined(if_true, "select");
    check_defined(if_false, "select");
    user_check(cond.type() == Type::Bool) << "select(" << cond << ", ...): the condition must be bool but is "
                                          << cond.type();
    Expr t = if_true, f = if_false;
    if (t.type() != f.type()) {
        user_check(t.type() != Type::Bool && f.type() != Type::Bool)
            << "type mismatch in select(" << cond << ", " << t << ", " << f
            << "): branches are " << t.type() << " and " << f.type();
        promote_numeric(t, f, "select");
    }
    return check_expr_limits(Select::make(cond, t, f));
}

Expr min(const Expr& a, const Expr& b) { return numeric(BinaryOp::Min, a, b); }
Expr max(const Expr& a, const Expr& b) { return numeric(BinaryOp::Max, a, b); }
Expr clamp(const Expr& x, const Expr& lo, const Expr& hi) { return min(max(x, lo), hi); }

Expr abs(const Expr& a) {
    check_defined(a, "abs");
    user_check(a.type() != Type::Bool) << "type mismatch in abs(" << a << "): needs a number but got bool";
    return check_expr_limits(Unary::make(UnaryOp::Abs, a));
}

Expr pow(const Expr& a, const Expr& b) {
    Expr x = a, y = b;
    promote_numeric(x, y, "pow");
    if (x.type() == Type::Int) {
        x = Cast::make(Type::Float, x);
        y = Cast::make(Type::Float, y);
    }
    return check_expr_limits(Binary::make(BinaryOp::Pow, x, y));
}

Expr exp(const Expr& a) { return float_unary(UnaryOp::Exp, a); }
Expr exp2(const Expr& a) { return float_unary(UnaryOp::Exp2, a); }
Expr log(const Expr& a) { return float_unary(UnaryOp::Log, a); }
Expr log2(const Expr& a) { return float_unary(UnaryOp::Log2, a); }
Expr tanh(const Expr& a) { return float_unary(UnaryOp::Tanh, a); }
Expr sigmoid(const Expr& a) { return float_unary(UnaryOp::Sigmoid, a); }
Expr sqrt(const Expr& a) { return float_unary(UnaryOp::Sqrt, a); }
Expr rsqrt(const Expr& a) { return float_unary(UnaryOp::Rsqrt, a); }
Expr floor(const Expr& a) { return float_unary(UnaryOp::Floor, a); }
Expr ceil(const Expr& a) { return float_unary(UnaryOp::Ceil, a); }
Expr sin(const Expr& a) { return float_unary(UnaryOp::Sin, a); }
Expr cos(const Expr& a) { return float_unary(UnaryOp::Cos, a); }

Expr to_float(const Expr& a) {
    check_defined(a, "to_float");
    user_check(a.type() != Type::Bool) << "to_float(" << a << "): cannot convert a bool; use select(c, 1.0, 0.0)";
    return a.type() == Type::Float ? a : check_expr_limits(Cast::make(Type::Float, a));
}

Expr to_int(const Expr& a) {
    check_defined(a, "to_int");
    user_check(a.type() != Type::Bool) << "to_int(" << a << "): cannot convert a bool; use select(c, 1, 0)";
    return a.type() == Type::Int ? a : check_expr_limits(Cast::make(Type::Int, a));
}

Expr infinity() { return Const::make_float(std::numeric_limits<double>::infinity()); }

}  // namespace attnjit::dsl
