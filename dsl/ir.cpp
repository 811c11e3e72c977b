#include "dsl/ir.h"

#include <algorithm>
#include <initializer_list>

#include "dsl/limits.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

// Depth and size of a new node from its operands. Operands are within the hard limits
// already, so the sums below cannot overflow.
template <class Operands>
void measure(ExprNode& n, const Operands& operands) {
    uint64_t size = 1;
    for (const Expr& e : operands) {
        n.depth = std::max(n.depth, e->depth + 1);
        size += e->size;
    }
    n.size = static_cast<uint32_t>(std::min<uint64_t>(size, UINT32_MAX));
    internal_check(n.depth <= kMaxExprDepthInternal && n.size <= static_cast<uint32_t>(kMaxExprNodesInternal))
        << "an expression of depth " << n.depth << " and " << n.size
        << " nodes: past the internal limits, so a pass grows expressions too much or a user's expression was "
           "built without check_expr_limits";
}

// A user's int constant: out of int32 is their mistake, not ours.
Expr user_int_constant(long long v) {
    user_check(fits_int_literal(v)) << "int constant " << v << " is out of range: ints are int32 on the GPU ("
                                    << kMinIntLiteral << " to " << kMaxIntLiteral
                                    << "); use a float constant such as " << v << ".0 for a large number";
    return Const::make_int(v);
}

template <class N>
Expr finish(std::shared_ptr<N> n, std::initializer_list<Expr> operands) {
    measure(*n, operands);
    return Expr(std::move(n));
}

}  // namespace

Expr check_expr_limits(Expr e) {
    if (!e.defined()) return e;
    user_check(e->depth <= kMaxExprDepth)
        << "the expression is too deep: it nests " << e->depth << " levels of operations, and the limit is "
        << kMaxExprDepth << " (docs/spec_format.md, Limits). A chain such as a + b + c + ... is as deep as it is "
        << "long: group its terms into balanced halves, (a + b) + (c + d), or use fewer terms";
    user_check(e->size <= static_cast<uint32_t>(kMaxExprNodes))
        << "the expression is too large: it has " << e->size << " nodes (a shared subexpression counts at each "
        << "use), and the limit is " << kMaxExprNodes
        << " (docs/spec_format.md, Limits); use fewer terms, or a captured tensor for a table of values";
    return e;
}

Expr::Expr(float v) : Expr(Const::make_float(v)) {}
Expr::Expr(double v) : Expr(Const::make_float(v)) {}
Expr::Expr(int v) : Expr(Const::make_int(v)) {}
Expr::Expr(long long v) : Expr(user_int_constant(v)) {}
Expr::Expr(bool v) : Expr(Const::make_bool(v)) {}

Type Expr::type() const {
    internal_check(node_) << "type() of an undefined Expr";
    return node_->type;
}

NodeKind Expr::kind() const {
    internal_check(node_) << "kind() of an undefined Expr";
    return node_->kind;
}

const char* var_name(VarKind v) {
    switch (v) {
    case VarKind::Score: return "score";
    case VarKind::Batch: return "b";
    case VarKind::Head: return "h";
    case VarKind::KvHead: return "kv_head";
    case VarKind::QIdx: return "q_idx";
    case VarKind::KvIdx: return "kv_idx";
    case VarKind::QLen: return "q_len";
    case VarKind::KvLen: return "kv_len";
    }
    return "?";
}

const char* unary_name(UnaryOp op) {
    switch (op) {
    case UnaryOp::Neg: return "-";
    case UnaryOp::Not: return "!";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Exp2: return "exp2";
    case UnaryOp::Log: return "log";
    case UnaryOp::Log2: return "log2";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Floor: return "floor";
    case UnaryOp::Ceil: return "ceil";
    case UnaryOp::Sin: return "sin";
    case UnaryOp::Cos: return "cos";
    }
    return "?";
}

const char* binary_name(BinaryOp op) {
    switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::Mod: return "%";
    case BinaryOp::Min: return "min";
    case BinaryOp::Max: return "max";
    case BinaryOp::Pow: return "pow";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    case BinaryOp::And: return "&&";
    case BinaryOp::Or: return "||";
    }
    return "?";
}

bool is_comparison(BinaryOp op) {
    return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
           op == BinaryOp::Gt || op == BinaryOp::Ge;
}

BinaryOp flipped_comparison(BinaryOp op) {
    switch (op) {
    case BinaryOp::Lt: return BinaryOp::Gt;
    case BinaryOp::Le: return BinaryOp::Ge;
    case BinaryOp::Gt: return BinaryOp::Lt;
    case BinaryOp::Ge: return BinaryOp::Le;
    default: return op;
    }
}

BinaryOp negated_comparison(BinaryOp op) {
    switch (op) {
    case BinaryOp::Eq: return BinaryOp::Ne;
    case BinaryOp::Ne: return BinaryOp::Eq;
    case BinaryOp::Lt: return BinaryOp::Ge;
    case BinaryOp::Le: return BinaryOp::Gt;
    case BinaryOp::Gt: return BinaryOp::Le;
    case BinaryOp::Ge: return BinaryOp::Lt;
    default: internal_error << binary_name(op) << " is not a comparison"; return op;
    }
}

int infix_precedence(BinaryOp op) {
    switch (op) {
    case BinaryOp::Or: return 1;
    case BinaryOp::And: return 2;
    case BinaryOp::Eq:
    case BinaryOp::Ne: return 3;
    case BinaryOp::Lt:
    case BinaryOp::Le:
    case BinaryOp::Gt:
    case BinaryOp::Ge: return 4;
    case BinaryOp::Add:
    case BinaryOp::Sub: return 5;
    case BinaryOp::Mul:
    case BinaryOp::Div:
    case BinaryOp::Mod: return 6;
    default: return 0;
    }
}

bool is_logical(BinaryOp op) { return op == BinaryOp::And || op == BinaryOp::Or; }

Expr Const::make_float(double v) {
    auto n = std::make_shared<Const>(Type::Float);
    n->f = v;
    return Expr(n);
}

Expr Const::make_int(long long v) {
    internal_check(fits_int_literal(v)) << "int constant " << v << " does not fit int32";
    auto n = std::make_shared<Const>(Type::Int);
    n->i = v;
    return Expr(n);
}

Expr Const::make_bool(bool v) {
    auto n = std::make_shared<Const>(Type::Bool);
    n->i = v ? 1 : 0;
    return Expr(n);
}

Expr Var::make(VarKind v) {
    return Expr(std::make_shared<Var>(v, v == VarKind::Score ? Type::Float : Type::Int));
}

Expr ScalarParam::make(const std::string& name, Type t) {
    internal_check(t != Type::Bool) << "scalar " << name << " cannot be bool";
    return Expr(std::make_shared<ScalarParam>(name, t));
}

Expr TensorLoad::make(const std::string& name, DType dtype, std::vector<Expr> indices) {
    for (const auto& i : indices)
        internal_check(i.defined() && i.type() == Type::Int) << "tensor index must be int";
    auto n = std::make_shared<TensorLoad>(name, dtype, std::move(indices));
    measure(*n, n->indices);
    return Expr(std::move(n));
}

Expr Unary::make(UnaryOp op, Expr a) {
    internal_check(a.defined()) << "undefined operand";
    Type t = a.type();
    if (op == UnaryOp::Not) {
        internal_check(t == Type::Bool) << "! needs bool";
    } else if (op == UnaryOp::Neg || op == UnaryOp::Abs) {
        internal_check(t != Type::Bool) << unary_name(op) << " of bool";
    } else {
        internal_check(t == Type::Float) << unary_name(op) << " needs float";
    }
    return finish(std::make_shared<Unary>(op, a, t), {a});
}

Expr Binary::make(BinaryOp op, Expr a, Expr b) {
    internal_check(a.defined() && b.defined()) << "undefined operand";
    internal_check(a.type() == b.type()) << "operand types differ for " << binary_name(op);
    Type t = a.type();
    if (is_logical(op)) internal_check(t == Type::Bool) << binary_name(op) << " needs bool";
    else if (op == BinaryOp::Eq || op == BinaryOp::Ne) {
    } else internal_check(t != Type::Bool) << binary_name(op) << " of bool";
    if (op == BinaryOp::Mod) internal_check(t == Type::Int) << "% needs int";
    if (op == BinaryOp::Pow) internal_check(t == Type::Float) << "pow needs float";
    return finish(std::make_shared<Binary>(op, a, b, is_comparison(op) ? Type::Bool : t), {a, b});
}

Expr Select::make(Expr cond, Expr t, Expr f) {
    internal_check(cond.defined() && t.defined() && f.defined()) << "undefined operand";
    internal_check(cond.type() == Type::Bool) << "select condition must be bool";
    internal_check(t.type() == f.type()) << "select branches differ in type";
    Type ty = t.type();
    return finish(std::make_shared<Select>(cond, t, f, ty), {cond, t, f});
}

Expr Cast::make(Type to, Expr a) {
    internal_check(a.defined()) << "undefined operand";
    return finish(std::make_shared<Cast>(to, a), {a});
}

Expr Temp::make(const std::string& name, Type t) { return Expr(std::make_shared<Temp>(name, t)); }

}  // namespace attnjit::dsl
