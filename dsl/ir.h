// The expression IR: immutable nodes behind a value-type handle (Expr).
// One list of node kinds (ATTNJIT_FOR_EACH_NODE) drives the visitor and mutator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsl/type.h"

namespace attnjit::dsl {

#define ATTNJIT_FOR_EACH_NODE(X) \
    X(Const)                     \
    X(Var)                       \
    X(ScalarParam)               \
    X(TensorLoad)                \
    X(Unary)                     \
    X(Binary)                    \
    X(Select)                    \
    X(Cast)                      \
    X(Temp)

enum class NodeKind {
#define ATTNJIT_KIND(n) n,
    ATTNJIT_FOR_EACH_NODE(ATTNJIT_KIND)
#undef ATTNJIT_KIND
};

// The built-in variables a score_mod or mask may read.
enum class VarKind { Score, Batch, Head, KvHead, QIdx, KvIdx, QLen, KvLen };

enum class UnaryOp {
    Neg, Not, Exp, Exp2, Log, Log2, Tanh, Sigmoid, Abs, Sqrt, Rsqrt, Floor, Ceil, Sin, Cos
};

enum class BinaryOp {
    Add, Sub, Mul, Div, Mod, Min, Max, Pow, Eq, Ne, Lt, Le, Gt, Ge, And, Or
};

const char* var_name(VarKind v);
const char* unary_name(UnaryOp op);
const char* binary_name(BinaryOp op);
bool is_comparison(BinaryOp op);
// For a comparison: a op b == b flipped_comparison(op) a (other ops unchanged).
BinaryOp flipped_comparison(BinaryOp op);
// For a comparison of ints: !(a op b) == a negated_comparison(op) b. (For floats only
// Eq/Ne negate exactly: a NaN makes both a < b and a >= b false.)
BinaryOp negated_comparison(BinaryOp op);
// C precedence of an infix operator (|| 1 ... * / % 6); 0 for min, max, pow (calls).
int infix_precedence(BinaryOp op);
bool is_logical(BinaryOp op);

struct ExprNode;
class IRVisitor;

// A handle to an immutable expression. Cheap to copy; compares by identity with
// same_as() and by structure with equal() (dsl/equality.h).
class Expr {
public:
    Expr() = default;
    Expr(float v);   // Float constant
    Expr(double v);  // Float constant (stored exactly; evaluated in fp32 on the GPU)
    Expr(int v);     // Int constant
    Expr(long long v);  // Int constant; a UserError outside int32 (ints are int32 on the GPU)
    Expr(bool v);  // Bool constant
    explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

    bool defined() const { return node_ != nullptr; }
    Type type() const;
    NodeKind kind() const;
    const ExprNode* get() const { return node_.get(); }
    const ExprNode* operator->() const { return node_.get(); }
    bool same_as(const Expr& o) const { return node_ == o.node_; }
    template <class T>
    const T* as() const;  // null unless the node is a T

private:
    std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
    NodeKind kind;
    Type type;
    // Set by make() from the operands; bounded by dsl/limits.h.
    int depth = 1;       // levels from this node to its deepest leaf, this one included
    uint32_t size = 1;   // nodes of the tree, a shared subexpression counted at each use
    ExprNode(NodeKind k, Type t) : kind(k), type(t) {}
    virtual ~ExprNode() = default;
};

// A UserError when `e` is past the limits of dsl/limits.h on depth or size; returns `e`.
// Called wherever a user's expression is built (operators, the parser, the spec), so no
// user expression past them exists, and every recursive walk over one is bounded.
Expr check_expr_limits(Expr e);

// Node structs. make() checks internal invariants only: user-facing checks (type rules
// with friendly messages, check_expr_limits) live in operators.cpp, which is what users
// call. make() bounds depth and size at twice the user limits (the headroom of passes
// that grow an expression), as an internal error.
struct Const : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Const;
    double f = 0;      // Float
    long long i = 0;   // Int and Bool; an Int always fits int32 (dsl/limits.h)
    Const(Type t) : ExprNode(kKind, t) {}
    static Expr make_float(double v);
    static Expr make_int(long long v);  // v must fit int32 (an internal error otherwise)
    static Expr make_bool(bool v);
};

struct Var : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Var;
    VarKind var;
    Var(VarKind v, Type t) : ExprNode(kKind, t), var(v) {}
    static Expr make(VarKind v);
};

// A runtime scalar, passed by name at launch (e.g. a softcap value, a window size).
struct ScalarParam : ExprNode {
    static constexpr NodeKind kKind = NodeKind::ScalarParam;
    std::string name;
    ScalarParam(std::string n, Type t) : ExprNode(kKind, t), name(std::move(n)) {}
    static Expr make(const std::string& name, Type t);
};

// element of a captured tensor, passed by name at launch; broadcast through strides.
struct TensorLoad : ExprNode {
    static constexpr NodeKind kKind = NodeKind::TensorLoad;
    std::string name;
    DType dtype;
    std::vector<Expr> indices;  // one Int expression per dimension
    TensorLoad(std::string n, DType d, std::vector<Expr> idx)
        : ExprNode(kKind, type_of(d)), name(std::move(n)), dtype(d), indices(std::move(idx)) {}
    static Expr make(const std::string& name, DType dtype, std::vector<Expr> indices);
};

struct Unary : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Unary;
    UnaryOp op;
    Expr a;
    Unary(UnaryOp o, Expr x, Type t) : ExprNode(kKind, t), op(o), a(std::move(x)) {}
    static Expr make(UnaryOp op, Expr a);
};

struct Binary : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Binary;
    BinaryOp op;
    Expr a, b;
    Binary(BinaryOp o, Expr x, Expr y, Type t)
        : ExprNode(kKind, t), op(o), a(std::move(x)), b(std::move(y)) {}
    // Operands must already have matching types (operators.cpp promotes).
    static Expr make(BinaryOp op, Expr a, Expr b);
};

struct Select : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Select;
    Expr cond, t, f;
    Select(Expr c, Expr x, Expr y, Type ty)
        : ExprNode(kKind, ty), cond(std::move(c)), t(std::move(x)), f(std::move(y)) {}
    static Expr make(Expr cond, Expr t, Expr f);
};

struct Cast : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Cast;
    Expr a;
    Cast(Type to, Expr x) : ExprNode(kKind, to), a(std::move(x)) {}
    static Expr make(Type to, Expr a);
};

// A named temporary introduced by codegen (CSE, hoisting). Never built by users.
struct Temp : ExprNode {
    static constexpr NodeKind kKind = NodeKind::Temp;
    std::string name;
    Temp(std::string n, Type t) : ExprNode(kKind, t), name(std::move(n)) {}
    static Expr make(const std::string& name, Type t);
};

template <class T>
const T* Expr::as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
}

}  // namespace attnjit::dsl
