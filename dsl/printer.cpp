#include "dsl/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace attnjit::dsl {
namespace {

int precedence(BinaryOp op) {
    int p = infix_precedence(op);
    return p ? p : 100;  // min, max, pow print as calls
}

constexpr int kUnaryPrec = 7;
constexpr int kAtomPrec = 100;

bool is_infix(BinaryOp op) { return precedence(op) < kAtomPrec; }

int prec_of(const Expr& e) {
    if (auto b = e.as<Binary>()) return is_infix(b->op) ? precedence(b->op) : kAtomPrec;
    if (auto u = e.as<Unary>()) return (u->op == UnaryOp::Neg || u->op == UnaryOp::Not) ? kUnaryPrec : kAtomPrec;
    if (auto c = e.as<Const>()) {
        bool negative = (c->type == Type::Float && std::signbit(c->f)) || (c->type == Type::Int && c->i < 0);
        return negative ? kUnaryPrec : kAtomPrec;
    }
    return kAtomPrec;
}

void print(std::ostream& os, const Expr& e);

// Parenthesise a child whose precedence is lower than the context requires.
void print_child(std::ostream& os, const Expr& e, int min_prec) {
    if (prec_of(e) < min_prec) {
        os << "(";
        print(os, e);
        os << ")";
    } else {
        print(os, e);
    }
}

void print(std::ostream& os, const Expr& e) {
    if (!e.defined()) {
        os << "<undefined>";
        return;
    }
    switch (e.kind()) {
    case NodeKind::Const: {
        auto c = e.as<Const>();
        if (c->type == Type::Float) os << float_literal(c->f);
        else if (c->type == Type::Int) os << c->i;
        else os << (c->i ? "true" : "false");
        return;
    }
    case NodeKind::Var: os << var_name(e.as<Var>()->var); return;
    case NodeKind::ScalarParam: os << e.as<ScalarParam>()->name; return;
    case NodeKind::Temp: os << e.as<Temp>()->name; return;
    case NodeKind::TensorLoad: {
        auto t = e.as<TensorLoad>();
        os << t->name << "[";
        for (size_t i = 0; i < t->indices.size(); ++i) {
            if (i) os << ", ";
            print(os, t->indices[i]);
        }
        os << "]";
        return;
    }
    case NodeKind::Unary: {
        auto u = e.as<Unary>();
        if (u->op == UnaryOp::Neg || u->op == UnaryOp::Not) {
            os << unary_name(u->op);
            // -(2.0) keeps a negated literal distinct from the literal -2.0.
            bool wrap = prec_of(u->a) <= kUnaryPrec || u->a.as<Const>() != nullptr;
            if (wrap) os << "(";
            print(os, u->a);
            if (wrap) os << ")";
        } else {
            os << unary_name(u->op) << "(";
            print(os, u->a);
            os << ")";
        }
        return;
    }
    case NodeKind::Binary: {
        auto b = e.as<Binary>();
        if (!is_infix(b->op)) {
            os << binary_name(b->op) << "(";
            print(os, b->a);
            os << ", ";
            print(os, b->b);
            os << ")";
            return;
        }
        int p = precedence(b->op);
        // A comparison of comparisons is legal C but hard to read: parenthesise those.
        int left = p, right = p + 1;
        if (is_comparison(b->op)) left = right = precedence(BinaryOp::Lt) + 1;
        // Left-associative: the right child needs strictly higher precedence.
        print_child(os, b->a, left);
        os << " " << binary_name(b->op) << " ";
        print_child(os, b->b, right);
        return;
    }
    case NodeKind::Select: {
        auto s = e.as<Select>();
        os << "select(";
        print(os, s->cond);
        os << ", ";
        print(os, s->t);
        os << ", ";
        print(os, s->f);
        os << ")";
        return;
    }
    case NodeKind::Cast: {
        auto c = e.as<Cast>();
        os << type_name(c->type) << "(";
        print(os, c->a);
        os << ")";
        return;
    }
    }
}

}  // namespace

std::string float_literal(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    // Shortest round-tripping text; fixed notation preferred when it is as short as
    // the exponent form plus two characters ("30.0", not "3e+01").
    char buf[64];
    std::string best;
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) {
            best = buf;
            break;
        }
    }
    if (std::fabs(v) < 1e15) {
        for (int d = 1; d <= 17; ++d) {
            std::snprintf(buf, sizeof buf, "%.*f", d, v);
            if (std::strtod(buf, nullptr) == v) {
                if (std::strlen(buf) <= best.size() + 2) best = buf;
                break;
            }
        }
    }
    if (best.find_first_of(".en") == std::string::npos) best += ".0";
    return best;
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
    print(os, e);
    return os;
}

std::string to_string(const Expr& e) {
    std::ostringstream s;
    s << e;
    return s.str();
}

}  // namespace attnjit::dsl
