#include "random_expr.h"

#include <cmath>
#include <limits>
#include <vector>

namespace attnjit::dsl::testing {
namespace {

constexpr UnaryOp kFloatFunctions[] = {UnaryOp::Exp,   UnaryOp::Exp2,  UnaryOp::Log,  UnaryOp::Log2, UnaryOp::Tanh,
                                       UnaryOp::Sigmoid, UnaryOp::Abs, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Floor,
                                       UnaryOp::Ceil,  UnaryOp::Sin,   UnaryOp::Cos,  UnaryOp::Neg};
constexpr BinaryOp kFloatOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
                                  BinaryOp::Min, BinaryOp::Max, BinaryOp::Pow};
constexpr BinaryOp kIntOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
                                BinaryOp::Mod, BinaryOp::Min, BinaryOp::Max};
constexpr BinaryOp kComparisons[] = {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge};
constexpr VarKind kIntVars[] = {VarKind::Batch, VarKind::Head, VarKind::KvHead, VarKind::QIdx,
                                VarKind::KvIdx, VarKind::QLen, VarKind::KvLen};

template <class T, size_t N>
T one_of(std::mt19937& rng, const T (&items)[N]) {
    return items[std::uniform_int_distribution<size_t>(0, N - 1)(rng)];
}

}  // namespace

const std::map<std::string, Type>& RandomExprGenerator::scalars() {
    static const std::map<std::string, Type> s = {{"sf", Type::Float}, {"si", Type::Int}};
    return s;
}

const std::map<std::string, TensorInfo>& RandomExprGenerator::tensors() {
    static const std::map<std::string, TensorInfo> t = {
        {"tf", {DType::f32, 2}}, {"th", {DType::bf16, 1}}, {"tg", {DType::f16, 4}},
        {"ti", {DType::i32, 3}}, {"tl", {DType::i64, 1}},  {"tb", {DType::u8, 2}}};
    return t;
}

Expr RandomExprGenerator::literal(Type t) {
    if (t == Type::Bool) return Const::make_bool(pick(2) == 0);
    if (t == Type::Int) {
        const long long fixed[] = {0, 1, -1, 7, -42, 2147483647, -2147483647 - 1, 65536, -65536};
        if (pick(3) == 0) return Const::make_int(fixed[pick(sizeof fixed / sizeof fixed[0])]);
        return Const::make_int(std::uniform_int_distribution<long long>(-100000, 100000)(rng_));
    }
    const double inf = std::numeric_limits<double>::infinity();
    const double fixed[] = {0.0, -0.0, 1.0, -2.5, 0.1, 1.0 / 3.0, 1e-30, -1e300, 6.02214076e23, inf, -inf,
                            std::numeric_limits<double>::quiet_NaN(), 4.9406564584124654e-324,
                            static_cast<double>(0.1f), 30.0, -0.125};
    if (pick(2) == 0) return Const::make_float(fixed[pick(sizeof fixed / sizeof fixed[0])]);
    return Const::make_float(std::uniform_real_distribution<double>(-1e6, 1e6)(rng_));
}

Expr RandomExprGenerator::leaf(Type t, bool allow_score) {
    switch (t) {
    case Type::Float:
        switch (pick(3)) {
        case 0: return literal(t);
        case 1: return allow_score ? Var::make(VarKind::Score) : literal(t);
        default: return ScalarParam::make("sf", Type::Float);
        }
    case Type::Int:
        switch (pick(3)) {
        case 0: return literal(t);
        case 1: return Var::make(one_of(rng_, kIntVars));
        default: return ScalarParam::make("si", Type::Int);
        }
    case Type::Bool: return literal(t);
    }
    return Expr();
}

Expr RandomExprGenerator::tensor_load(Type t, int depth, bool allow_score) {
    const char* names[3][2] = {{"tf", "th"}, {"ti", "tl"}, {"tb", "tb"}};
    const std::string name = t == Type::Float && pick(3) == 0 ? "tg" : names[static_cast<int>(t)][pick(2)];
    const TensorInfo& info = tensors().at(name);
    std::vector<Expr> indices;
    for (int d = 0; d < info.rank; ++d) indices.push_back(make(Type::Int, depth - 1, allow_score));
    return TensorLoad::make(name, info.dtype, indices);
}

Expr RandomExprGenerator::make(Type t, int depth, bool allow_score) {
    if (depth <= 0 || pick(6) == 0) return leaf(t, allow_score);
    auto sub = [&](Type st) { return make(st, depth - 1, allow_score); };
    switch (t) {
    case Type::Float:
        switch (pick(7)) {
        case 0: return Unary::make(one_of(rng_, kFloatFunctions), sub(Type::Float));
        case 1: return Unary::make(UnaryOp::Neg, literal(Type::Float));  // prints -(2.0)
        case 2: return Binary::make(one_of(rng_, kFloatOps), sub(Type::Float), sub(Type::Float));
        case 3: return Select::make(sub(Type::Bool), sub(Type::Float), sub(Type::Float));
        case 4: return Cast::make(Type::Float, sub(pick(4) == 0 ? Type::Float : Type::Int));
        case 5: return tensor_load(t, depth, allow_score);
        default: return Binary::make(one_of(rng_, kFloatOps), sub(Type::Float), literal(Type::Float));
        }
    case Type::Int:
        switch (pick(7)) {
        case 0: return Unary::make(pick(2) ? UnaryOp::Neg : UnaryOp::Abs, sub(Type::Int));
        case 1: return Unary::make(UnaryOp::Neg, literal(Type::Int));
        case 2: return Binary::make(one_of(rng_, kIntOps), sub(Type::Int), sub(Type::Int));
        case 3: return Select::make(sub(Type::Bool), sub(Type::Int), sub(Type::Int));
        case 4: return Cast::make(Type::Int, sub(pick(4) == 0 ? Type::Int : Type::Float));
        case 5: return tensor_load(t, depth, allow_score);
        default: return Binary::make(one_of(rng_, kIntOps), literal(Type::Int), sub(Type::Int));
        }
    case Type::Bool:
        switch (pick(6)) {
        case 0: return Unary::make(UnaryOp::Not, sub(Type::Bool));
        case 1: {
            const BinaryOp op = one_of(rng_, kComparisons);
            Type operands = (op == BinaryOp::Eq || op == BinaryOp::Ne) && pick(4) == 0 ? Type::Bool
                            : pick(2)                                                 ? Type::Int
                                                                                      : Type::Float;
            return Binary::make(op, sub(operands), sub(operands));
        }
        case 2: return Binary::make(pick(2) ? BinaryOp::And : BinaryOp::Or, sub(Type::Bool), sub(Type::Bool));
        case 3: return Select::make(sub(Type::Bool), sub(Type::Bool), sub(Type::Bool));
        case 4: return tensor_load(t, depth, allow_score);
        default: return leaf(t, allow_score);
        }
    }
    return Expr();
}

}  // namespace attnjit::dsl::testing
