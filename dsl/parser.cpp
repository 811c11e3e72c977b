#include "dsl/parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "dsl/lexer.h"
#include "dsl/limits.h"
#include "dsl/operators.h"
#include "dsl/printer.h"
#include "dsl/source_diagnostics.h"
#include "dsl/spec_parse_error.h"
#include "dsl/vars.h"

namespace attnjit::dsl {
namespace {

// Parentheses, calls, indexing and unary operators nest at most this deep (the parser
// recurses; a bound keeps a hostile document from exhausting the stack). The printer
// writes at most two levels a node, !(x), so every expression within kMaxExprDepth reads
// back.
constexpr int kMaxNesting = 2 * kMaxExprDepth;

constexpr VarKind kBuiltins[] = {VarKind::Score, VarKind::Batch, VarKind::Head,  VarKind::KvHead,
                                 VarKind::QIdx,  VarKind::KvIdx, VarKind::QLen, VarKind::KvLen};

// Calls other than the unary math functions (every UnaryOp but - and !).
struct Callable {
    const char* name;
    int arity;
    const char* params;
};
constexpr Callable kCalls[] = {
    {"min", 2, "a, b"},        {"max", 2, "a, b"}, {"pow", 2, "x, y"}, {"select", 3, "cond, if_true, if_false"},
    {"clamp", 3, "x, lo, hi"}, {"float", 1, "x"},  {"int", 1, "x"},
};

// What people coming from the C++ DSL, NumPy or C tend to write instead.
struct Hint {
    const char* wrong;
    const char* right;
};
constexpr Hint kHints[] = {
    {"batch", "b"},       {"head", "h"},     {"i", "q_idx"},    {"j", "kv_idx"},    {"infinity", "inf"},
    {"INFINITY", "inf"},  {"NAN", "nan"},    {"to_float", "float"}, {"to_int", "int"}, {"where", "select"},
    {"fmin", "min"},      {"fmax", "max"},   {"fabs", "abs"},   {"ln", "log"},      {"powf", "pow"},
    {"expf", "exp"},      {"tanhf", "tanh"}, {"True", "true"},  {"False", "false"},
};

std::optional<UnaryOp> unary_function(std::string_view name) {
    for (int op = static_cast<int>(UnaryOp::Exp); op <= static_cast<int>(UnaryOp::Cos); ++op)
        if (name == unary_name(static_cast<UnaryOp>(op))) return static_cast<UnaryOp>(op);
    return std::nullopt;
}

const Callable* callable(std::string_view name) {
    for (const auto& c : kCalls)
        if (name == c.name) return &c;
    return nullptr;
}

std::optional<VarKind> builtin(std::string_view name) {
    for (VarKind v : kBuiltins)
        if (name == var_name(v)) return v;
    return std::nullopt;
}

std::vector<std::string> function_names() {
    std::vector<std::string> names;
    for (int op = static_cast<int>(UnaryOp::Exp); op <= static_cast<int>(UnaryOp::Cos); ++op)
        names.push_back(unary_name(static_cast<UnaryOp>(op)));
    for (const auto& c : kCalls) names.push_back(c.name);
    return names;
}

std::string join(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
    return s;
}

std::string hint(std::string_view wrong, const std::vector<std::string>& candidates) {
    for (const auto& h : kHints)
        if (wrong == h.wrong) return std::string("; did you mean '") + h.right + "'?";
    return did_you_mean(wrong, candidates);
}

// A UserError from dsl/operators.h without its "attnjit: " prefix.
std::string reason_of(const UserError& e) {
    std::string s = e.what();
    const std::string prefix = "attnjit: ";
    return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

std::optional<BinaryOp> infix_op(TokenKind k) {
    switch (k) {
    case TokenKind::Plus: return BinaryOp::Add;
    case TokenKind::Minus: return BinaryOp::Sub;
    case TokenKind::Star: return BinaryOp::Mul;
    case TokenKind::Slash: return BinaryOp::Div;
    case TokenKind::Percent: return BinaryOp::Mod;
    case TokenKind::EqEq: return BinaryOp::Eq;
    case TokenKind::NotEq: return BinaryOp::Ne;
    case TokenKind::Less: return BinaryOp::Lt;
    case TokenKind::LessEq: return BinaryOp::Le;
    case TokenKind::Greater: return BinaryOp::Gt;
    case TokenKind::GreaterEq: return BinaryOp::Ge;
    case TokenKind::AndAnd: return BinaryOp::And;
    case TokenKind::OrOr: return BinaryOp::Or;
    default: return std::nullopt;
    }
}

Expr apply_binary(BinaryOp op, const Expr& a, const Expr& b) {
    switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Mod: return a % b;
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    case BinaryOp::And: return a && b;
    case BinaryOp::Or: return a || b;
    default: return Expr();  // min, max, pow are calls
    }
}

Expr apply_unary_function(UnaryOp op, const Expr& a) {
    switch (op) {
    case UnaryOp::Exp: return exp(a);
    case UnaryOp::Exp2: return exp2(a);
    case UnaryOp::Log: return log(a);
    case UnaryOp::Log2: return log2(a);
    case UnaryOp::Tanh: return tanh(a);
    case UnaryOp::Sigmoid: return sigmoid(a);
    case UnaryOp::Abs: return abs(a);
    case UnaryOp::Sqrt: return sqrt(a);
    case UnaryOp::Rsqrt: return rsqrt(a);
    case UnaryOp::Floor: return floor(a);
    case UnaryOp::Ceil: return ceil(a);
    case UnaryOp::Sin: return sin(a);
    case UnaryOp::Cos: return cos(a);
    default: return Expr();  // - and ! are operators
    }
}

class Parser {
public:
    Parser(std::string_view text, const ExprNames& names, const std::function<TextPosition(size_t)>& position_of)
        : text_(text), names_(names), position_of_(position_of), tokens_(tokenize(text)) {}

    Expr parse() {
        if (peek().kind == TokenKind::End)
            fail("empty expression: expected an expression such as kv_idx <= q_idx or score * 0.5", peek());
        Expr e = parse_binary(1);
        const Token& t = peek();
        if (t.kind == TokenKind::RParen || t.kind == TokenKind::RBracket)
            fail("unmatched " + describe(t) + ": no bracket is open here", t);
        if (t.kind != TokenKind::End)
            fail("expected an operator or the end of the expression, found " + describe(t), t);
        return e;
    }

private:
    // Counts one level of nesting for as long as it lives.
    struct Nest {
        Parser& p;
        Nest(Parser& parser, const Token& at) : p(parser) {
            if (++p.depth_ > kMaxNesting)
                p.fail("the expression nests deeper than " + std::to_string(kMaxNesting) +
                           " levels of parentheses, calls and unary operators; simplify it",
                       at);
        }
        ~Nest() { --p.depth_; }
    };

    const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
    const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

    [[noreturn]] void fail(const std::string& reason, const Token& at) const { fail_at(reason, at.offset); }
    [[noreturn]] void fail_at(const std::string& reason, size_t offset) const {
        throw ExprSyntaxError{reason, offset};
    }

    // "3:9" in the coordinates the caller reports (embedded expressions are shifted).
    std::string where(const Token& t) const {
        TextPosition p = position_of_(t.offset);
        return std::to_string(p.line) + ":" + std::to_string(p.column);
    }

    void expect_close(TokenKind close, const Token& open, const std::string& what_is_open) {
        if (peek().kind == close) {
            next();
            return;
        }
        fail("expected '" + std::string(spelling(close)) + "' to close " + what_is_open + " at " + where(open) +
                 ", found " + describe(peek()),
             peek());
    }

    // Precedence climbing over the C binary operators; left-associative.
    Expr parse_binary(int min_precedence) {
        Expr lhs = parse_unary();
        while (true) {
            auto op = infix_op(peek().kind);
            if (!op || infix_precedence(*op) < min_precedence) return lhs;
            const Token& op_token = next();
            Expr rhs = parse_binary(infix_precedence(*op) + 1);
            try {
                lhs = apply_binary(*op, lhs, rhs);
            } catch (const UserError& e) {
                fail(reason_of(e), op_token);
            }
        }
    }

    bool starts_number_literal(const Token& t) const {
        return t.kind == TokenKind::Int || t.kind == TokenKind::Float ||
               (t.kind == TokenKind::Name && (t.text == "inf" || t.text == "nan"));
    }

    Expr parse_unary() {
        const Token& t = peek();
        if (t.kind == TokenKind::Minus && starts_number_literal(peek(1))) {
            next();
            return number_literal(next(), /*negative=*/true, t);
        }
        if (t.kind != TokenKind::Minus && t.kind != TokenKind::Not) return parse_primary();
        next();
        Nest nest(*this, t);
        Expr a = parse_unary();
        try {
            if (t.kind == TokenKind::Not) return !a;
            // -(2.0) is a Neg node over a literal (the printer keeps it apart from the literal
            // -2.0); operator- would fold it.
            if (a.as<Const>() && a.type() != Type::Bool) return check_expr_limits(Unary::make(UnaryOp::Neg, a));
            return -a;
        } catch (const UserError& e) {
            fail(reason_of(e), t);
        }
    }

    Expr number_literal(const Token& t, bool negative, const Token& start) {
        const char* begin = t.text.data();
        const char* end = begin + t.text.size();
        if (t.kind == TokenKind::Name) {
            // One NaN (its sign means nothing and prints as "nan"), so -nan reads back the same.
            if (t.text == "nan") return Const::make_float(std::numeric_limits<double>::quiet_NaN());
            const double inf = std::numeric_limits<double>::infinity();
            return Const::make_float(negative ? -inf : inf);
        }
        if (t.kind == TokenKind::Int) {
            unsigned long long magnitude = 0;
            auto r = std::from_chars(begin, end, magnitude);
            // Ints are int32 on the GPU, so a literal must fit one (dsl/limits.h).
            const unsigned long long limit = static_cast<unsigned long long>(kMaxIntLiteral) + (negative ? 1 : 0);
            if (r.ec != std::errc() || magnitude > limit)
                fail(std::string("int literal ") + (negative ? "-" : "") + std::string(t.text) +
                         " is out of range: ints are int32 on the GPU (" + std::to_string(kMinIntLiteral) + " to " +
                         std::to_string(kMaxIntLiteral) + "); write a float such as " + (negative ? "-" : "") +
                         std::string(t.text) + ".0 for a large number",
                     start);
            long long v = negative ? -static_cast<long long>(magnitude) : static_cast<long long>(magnitude);
            return Const::make_int(v);
        }
        double v = 0;
        auto r = std::from_chars(begin, end, v);
        if (r.ec == std::errc::result_out_of_range) {
            bool tiny = t.text.find("e-") != std::string_view::npos || t.text.find("E-") != std::string_view::npos;
            fail("float literal " + std::string(t.text) + (tiny ? " is too small for a double (it would be 0.0); write 0.0"
                                                                 : " is too large for a double; write inf for infinity"),
                 start);
        }
        if (r.ec != std::errc() || r.ptr != end) fail("malformed number '" + std::string(t.text) + "'", t);
        return Const::make_float(negative ? -v : v);
    }

    Expr parse_primary() {
        const Token& t = peek();
        switch (t.kind) {
        case TokenKind::Int:
        case TokenKind::Float: return number_literal(next(), false, t);
        case TokenKind::LParen: {
            next();
            Nest nest(*this, t);
            if (peek().kind == TokenKind::RParen) fail("expected an expression inside ( ), found ')'", peek());
            Expr e = parse_binary(1);
            expect_close(TokenKind::RParen, t, "the '('");
            return e;
        }
        case TokenKind::Name: return parse_name();
        default: break;
        }
        if (pos_ == 0) fail("expected an expression (a number, a name or '('), found " + describe(t), t);
        fail("expected an operand (a number, a name or '(') after " + describe(peek_back()) + ", found " + describe(t),
             t);
    }

    const Token& peek_back() const { return tokens_[pos_ - 1]; }

    Expr parse_name() {
        const Token& t = next();
        const std::string name(t.text);
        const bool called = peek().kind == TokenKind::LParen;
        const bool indexed = peek().kind == TokenKind::LBracket;
        if (name == "true" || name == "false" || name == "inf" || name == "nan") {
            if (called || indexed) fail("'" + name + "' is a literal, not a function or a tensor", peek());
            if (name == "true" || name == "false") return Const::make_bool(name == "true");
            return number_literal(t, false, t);
        }
        if (called) return parse_call(t);
        if (auto v = builtin(name)) {
            if (indexed)
                fail("'" + name + "' is a built-in " + type_name(v == VarKind::Score ? Type::Float : Type::Int) +
                         ", not a tensor; it cannot be indexed with [ ]",
                     peek());
            return Var::make(*v);
        }
        if (auto s = names_.scalars.find(name); s != names_.scalars.end()) {
            if (indexed)
                fail("'" + name + "' is a runtime scalar, not a tensor; it cannot be indexed with [ ] (a tensor is declared "
                     "with a dtype and a rank, in a spec under \"tensors\")",
                     peek());
            return ScalarParam::make(name, s->second);
        }
        if (auto tensor = names_.tensors.find(name); tensor != names_.tensors.end()) {
            const TensorInfo& info = tensor->second;
            if (!indexed)
                fail("tensor '" + name + "' is used without indices; read an element with " + name + "[" +
                         example_indices(info.rank) + "] (one int index per dimension, rank " +
                         std::to_string(info.rank) + ")",
                     t);
            return parse_tensor_load(t, info);
        }
        if (unary_function(name) || callable(name))
            fail("'" + name + "' is a function; call it as " + name + "(...)", t);
        fail_unknown_name(t);
    }

    static std::string example_indices(int rank) {
        static const char* dims[] = {"b", "h", "q_idx", "kv_idx"};
        std::string s;
        for (int d = 0; d < rank; ++d) s += std::string(d ? ", " : "") + (rank <= 4 ? dims[4 - rank + d] : "0");
        return s;
    }

    [[noreturn]] void fail_unknown_name(const Token& t) const {
        std::vector<std::string> known;
        for (VarKind v : kBuiltins) known.push_back(var_name(v));
        std::vector<std::string> declared;
        for (const auto& [n, type] : names_.scalars) declared.push_back(n);
        for (const auto& [n, info] : names_.tensors) declared.push_back(n);
        std::vector<std::string> candidates = known;
        candidates.insert(candidates.end(), declared.begin(), declared.end());
        candidates.insert(candidates.end(), {"true", "false", "inf", "nan"});
        const std::string suggestion = hint(t.text, candidates);
        std::string reason = "unknown name '" + std::string(t.text) + "'" + (suggestion.empty() ? "." : suggestion) +
                             " The built-in names are " + join(known) +
                             "; runtime scalars and captured tensors must be declared (in a spec, under \"scalars\" "
                             "or \"tensors\")";
        reason += declared.empty() ? "; none are declared" : "; declared: " + join(declared);
        fail(reason, t);
    }

    Expr parse_tensor_load(const Token& name, const TensorInfo& info) {
        const Token& open = next();
        Nest nest(*this, open);
        std::vector<Expr> indices;
        std::vector<const Token*> starts;
        if (peek().kind != TokenKind::RBracket) {
            while (true) {
                starts.push_back(&peek());
                indices.push_back(parse_binary(1));
                if (peek().kind != TokenKind::Comma) break;
                next();
            }
        }
        expect_close(TokenKind::RBracket, open, "the '[' of " + std::string(name.text));
        const std::string n(name.text);
        if (static_cast<int>(indices.size()) != info.rank)
            fail("tensor '" + n + "' has rank " + std::to_string(info.rank) + " but is indexed with " +
                     std::to_string(indices.size()) + (indices.size() == 1 ? " index" : " indices") +
                     "; write one int index per dimension, " + n + "[" + example_indices(info.rank) +
                     "] (use 0 for a broadcast dimension)",
                 name);
        for (size_t i = 0; i < indices.size(); ++i)
            if (indices[i].type() != Type::Int)
                fail("index " + std::to_string(i) + " of tensor '" + n + "' (" + to_string(indices[i]) + ") is " +
                         type_name(indices[i].type()) + "; indices must be int (convert a float with int(x))",
                     *starts[i]);
        try {
            return check_expr_limits(TensorLoad::make(n, info.dtype, indices));
        } catch (const UserError& e) {
            fail(reason_of(e), name);
        }
    }

    Expr parse_call(const Token& name_token) {
        const std::string name(name_token.text);
        const auto unary = unary_function(name);
        const Callable* call = callable(name);
        if (!unary && !call) {
            if (builtin(name) || names_.scalars.count(name))
                fail("'" + name + "' is a variable, not a function; write it without ( )", name_token);
            if (names_.tensors.count(name))
                fail("'" + name + "' is a tensor; read an element with " + name + "[...], not " + name + "(...)",
                     name_token);
            if (name == "bool") fail("there is no bool(x) conversion; compare instead, e.g. x != 0", name_token);
            const std::string suggestion = hint(name, function_names());
            fail("unknown function '" + name + "'" + (suggestion.empty() ? "." : suggestion) + " The functions are " +
                     join(function_names()),
                 name_token);
        }
        const Token& open = next();
        Nest nest(*this, open);
        std::vector<Expr> args;
        if (peek().kind != TokenKind::RParen) {
            while (true) {
                args.push_back(parse_binary(1));
                if (peek().kind != TokenKind::Comma) break;
                next();
            }
        }
        expect_close(TokenKind::RParen, open, "the '(' of " + name);
        const int arity = unary ? 1 : call->arity;
        if (static_cast<int>(args.size()) != arity)
            fail(name + " takes " + std::to_string(arity) + (arity == 1 ? " argument" : " arguments") + " (" +
                     (unary ? "x" : call->params) + "), found " + std::to_string(args.size()),
                 name_token);
        try {
            if (unary) return apply_unary_function(*unary, args[0]);
            if (name == "min") return min(args[0], args[1]);
            if (name == "max") return max(args[0], args[1]);
            if (name == "pow") return pow(args[0], args[1]);
            if (name == "select") return select(args[0], args[1], args[2]);
            if (name == "clamp") return clamp(args[0], args[1], args[2]);
        } catch (const UserError& e) {
            fail(reason_of(e), name_token);
        }
        // float(x), int(x): an explicit Cast node (even when x already has the type), as
        // the printer writes one.
        const Type to = name == "float" ? Type::Float : Type::Int;
        if (args[0].type() == Type::Bool)
            fail(name + "(" + to_string(args[0]) + ") cannot convert a bool; write select(cond, " +
                     (to == Type::Float ? "1.0, 0.0" : "1, 0") + ")",
                 name_token);
        try {
            return check_expr_limits(Cast::make(to, args[0]));
        } catch (const UserError& e) {
            fail(reason_of(e), name_token);
        }
    }

    std::string_view text_;
    const ExprNames& names_;
    const std::function<TextPosition(size_t)>& position_of_;
    std::vector<Token> tokens_;
    size_t pos_ = 0;
    int depth_ = 0;
};

// Names in ExprNames must be usable (the JSON reader checks them with locations; direct
// callers get this).
std::optional<std::string> bad_names(const ExprNames& names) {
    for (const auto& [n, type] : names.scalars) {
        if (!is_valid_user_name(n)) return "scalar name '" + n + "' is not usable (a C identifier that is not a built-in or function name)";
        if (type == Type::Bool) return "scalar '" + n + "' is declared bool; runtime scalars are float or int";
    }
    for (const auto& [n, info] : names.tensors) {
        if (!is_valid_user_name(n)) return "tensor name '" + n + "' is not usable (a C identifier that is not a built-in or function name)";
        if (info.rank < 1 || info.rank > 6) return "tensor '" + n + "' is declared with rank " + std::to_string(info.rank) + "; ranks are 1 to 6";
        if (names.scalars.count(n)) return "'" + n + "' is declared both as a scalar and as a tensor";
    }
    return std::nullopt;
}

}  // namespace

Expr parse_expr(std::string_view text, const ExprNames& names, std::string_view source_name, int first_line,
                int first_column) {
    return parse_expr(text, names, source_name, [&](size_t offset) {
        TextPosition p = position_at(text, offset);
        if (p.line == 1) p.column += first_column - 1;
        p.line += first_line - 1;
        return p;
    });
}

Expr parse_expr(std::string_view text, const ExprNames& names, std::string_view source_name,
                const std::function<TextPosition(size_t offset)>& position_of) {
    auto error = [&](const std::string& reason, size_t offset) {
        TextPosition p = position_of(offset);
        return SpecParseError(located_message(source_name, p, reason, text, offset), reason, p.line, p.column);
    };
    check_text_size(text, source_name);
    if (auto why = bad_names(names)) throw error(*why, 0);
    try {
        return Parser(text, names, position_of).parse();
    } catch (const ExprSyntaxError& e) {
        throw error(e.reason, e.offset);
    }
}

}  // namespace attnjit::dsl
