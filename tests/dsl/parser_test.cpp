// The expression syntax: print -> parse -> print is the identity (and the trees are
// structurally equal), hand-written text gets the C++ DSL's promotions, and every mistake
// is a SpecParseError at the right line and column.
#include <cmath>
#include <limits>
#include <set>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "dsl/parser.h"
#include "dsl/spec_json.h"
#include "random_expr.h"

namespace attnjit::dsl {
namespace {

using mods::CausalAlign;

// The scalars and tensors an expression reads, as a parser needs them declared.
ExprNames names_of(const Expr& e) {
    ExprNames names;
    for_each_node(e, [&](const Expr& n) {
        if (auto s = n.as<ScalarParam>()) names.scalars[s->name] = s->type;
        if (auto t = n.as<TensorLoad>()) names.tensors[t->name] = {t->dtype, static_cast<int>(t->indices.size())};
    });
    return names;
}

void expect_round_trip(const Expr& e) {
    const std::string text = to_string(e);
    Expr parsed;
    try {
        parsed = parse_expr(text, names_of(e));
    } catch (const SpecParseError& err) {
        FAIL() << "did not parse back: " << text << "\n" << err.what();
    }
    EXPECT_EQ(to_string(parsed), text);
    EXPECT_TRUE(equal(parsed, e)) << text;
    EXPECT_EQ(structural_hash(parsed), structural_hash(e)) << text;
}

ExprNames example_names() {
    ExprNames n;
    n.scalars = {{"cap", Type::Float}, {"window", Type::Int}};
    n.tensors = {{"bias", {DType::f32, 4}}, {"slopes", {DType::f32, 1}}, {"doc", {DType::i32, 2}},
                 {"keep", {DType::u8, 2}}};
    return n;
}

Expr parse(const std::string& text) { return parse_expr(text, example_names()); }

TEST(Parser, EveryReadyMadeModifierRoundTrips) {
    const Tensor slopes("slopes", DType::f32, 1), bias("bias", DType::bf16, 4), doc("doc_ids", DType::i64, 2),
        q_doc("q_doc", DType::i32, 2), kv_doc("kv_doc", DType::i32, 2), table("rel_table", DType::f16, 2);
    const Expr all[] = {
        mods::causal(),
        mods::causal(CausalAlign::BottomRight),
        mods::sliding_window(256),
        mods::sliding_window(int_scalar("window"), CausalAlign::BottomRight),
        mods::document_mask(doc),
        mods::document_mask(q_doc, kv_doc),
        mods::prefix_lm(int_scalar("prefix_len")),
        mods::prefix_lm(7),
        mods::softcap(30.0),
        mods::softcap(scalar("cap")),
        mods::softcap(20),
        mods::alibi(slopes),
        mods::bias(bias),
        mods::relative_position_bias(table, 64),
        mods::relative_position_bias(table, 0),
        mods::compose(mods::softcap(scalar("cap")), mods::alibi(slopes)),
        mods::compose(mods::softcap(50.0), mods::compose(mods::bias(bias), mods::alibi(slopes))),
        mods::causal() && mods::document_mask(doc),
        select(mods::causal(), score(), -infinity()),
    };
    for (const Expr& e : all) expect_round_trip(e);
}

TEST(Parser, HandWrittenTextMatchesTheCppDsl) {
    const Expr cap = scalar("cap");
    const Tensor bias("bias", DType::f32, 4);
    EXPECT_TRUE(equal(parse("cap * tanh(score / cap)"), mods::softcap(cap)));
    EXPECT_TRUE(equal(parse("kv_idx <= q_idx"), kv_idx() <= q_idx()));
    EXPECT_TRUE(equal(parse("score + bias[b, h, q_idx, kv_idx]"), mods::bias(bias)));
    EXPECT_TRUE(equal(parse("q_idx - kv_idx >= 0 && q_idx - kv_idx < window"),
                      mods::sliding_window(int_scalar("window"))));
    // Int operands next to floats promote as in C++ (score > 0 compares with 0.0).
    EXPECT_EQ(to_string(parse("score > 0")), "score > 0.0");
    EXPECT_TRUE(equal(parse("score > 0"), score() > 0));
    EXPECT_EQ(to_string(parse("q_idx + 1.5")), "float(q_idx) + 1.5");
    EXPECT_EQ(to_string(parse("exp(q_idx)")), "exp(float(q_idx))");
    EXPECT_EQ(to_string(parse("pow(q_idx, 2)")), "pow(float(q_idx), float(2))");
    EXPECT_EQ(to_string(parse("select(q_idx < 3, 1, 2.5)")), "select(q_idx < 3, 1.0, 2.5)");
    EXPECT_EQ(to_string(parse("clamp(kv_idx - q_idx, -8, 8)")), "min(max(kv_idx - q_idx, -8), 8)");
    // Redundant parentheses, whitespace and newlines are fine.
    EXPECT_EQ(to_string(parse(" ( ( score ) )*\n\t2.0 ")), "score * 2.0");
    EXPECT_EQ(to_string(parse("keep[b,h]&&!(doc[b,q_idx]!=doc[b,kv_idx])")), "keep[b, h] && !(doc[b, q_idx] != doc[b, kv_idx])");
    // Literals.
    EXPECT_TRUE(equal(parse(".5"), Expr(0.5)));
    EXPECT_TRUE(equal(parse("2."), Expr(2.0)));
    EXPECT_TRUE(equal(parse("1E3"), Expr(1000.0)));
    EXPECT_TRUE(equal(parse("true || false"), Expr(true) || Expr(false)));
    EXPECT_EQ(parse("nan").as<Const>()->type, Type::Float);
    EXPECT_TRUE(std::isnan(parse("nan").as<Const>()->f));
    EXPECT_TRUE(equal(parse("-nan"), parse("nan"))) << "one NaN, whatever its sign";
    // Int literals are int32, as on the GPU.
    EXPECT_TRUE(equal(parse("-2147483648"), Expr(std::numeric_limits<int32_t>::min())));
    EXPECT_TRUE(equal(parse("2147483647"), Expr(std::numeric_limits<int32_t>::max())));
}

TEST(Parser, NegativeLiteralAndNegatedLiteralAreDifferentTrees) {
    const Expr literal = parse("-2.0");
    ASSERT_NE(literal.as<Const>(), nullptr);
    EXPECT_EQ(literal.as<Const>()->f, -2.0);
    const Expr negated = parse("-(2.0)");
    ASSERT_NE(negated.as<Unary>(), nullptr);
    EXPECT_EQ(negated.as<Unary>()->op, UnaryOp::Neg);
    EXPECT_TRUE(equal(negated.as<Unary>()->a, Expr(2.0)));
    EXPECT_FALSE(equal(literal, negated));
    EXPECT_EQ(to_string(negated), "-(2.0)");
    // The same for ints, infinity, and a negated negative literal.
    EXPECT_TRUE(equal(parse("-3"), Expr(-3)));
    EXPECT_EQ(to_string(parse("-(3)")), "-(3)");
    EXPECT_TRUE(equal(parse("-inf"), -infinity()));
    EXPECT_EQ(to_string(parse("-(-2.0)")), "-(-2.0)");
    EXPECT_EQ(to_string(parse("- -2.0")), "-(-2.0)");
    // Only a literal folds: -score stays a negation.
    EXPECT_TRUE(equal(parse("-score"), -score()));
    // After a binary operator a '-' number is a negative literal operand.
    EXPECT_TRUE(equal(parse("score * -2.0"), score() * Expr(-2.0)));
    EXPECT_TRUE(equal(parse("score - -2.0"), score() - Expr(-2.0)));
    EXPECT_TRUE(equal(parse("score-2.0"), score() - 2.0));
}

TEST(Parser, CPrecedenceAndLeftAssociativity) {
    const Expr i = q_idx(), j = kv_idx();
    EXPECT_TRUE(equal(parse("q_idx - kv_idx - 1"), (i - j) - 1));
    EXPECT_TRUE(equal(parse("q_idx - (kv_idx - 1)"), i - (j - 1)));
    EXPECT_TRUE(equal(parse("q_idx + kv_idx * 2"), i + j * 2));
    EXPECT_TRUE(equal(parse("q_idx / kv_idx % 3"), (i / j) % 3));
    EXPECT_TRUE(equal(parse("-q_idx * kv_idx"), (-i) * j));
    EXPECT_TRUE(equal(parse("q_idx < 1 == kv_idx < 1"), (i < 1) == (j < 1)));
    EXPECT_TRUE(equal(parse("q_idx < 1 || kv_idx < 1 && q_idx > 2"), (i < 1) || ((j < 1) && (i > 2))));
    EXPECT_TRUE(equal(parse("!(q_idx < 1) && true"), !(i < 1) && Expr(true)));
    EXPECT_TRUE(equal(parse("q_idx % 4 == 0 != (kv_idx == 1)"), ((i % 4) == 0) != (j == 1)));
}

TEST(Parser, RandomExpressionsRoundTripAndCoverEveryNodeAndOp) {
    testing::RandomExprGenerator gen(20261121);
    std::set<NodeKind> kinds;
    std::set<UnaryOp> unary_ops;
    std::set<BinaryOp> binary_ops;
    std::set<Type> cast_targets;
    bool negative_literal = false, negated_literal = false, infinities = false, nan = false, int_min = false;
    for (int n = 0; n < 3000; ++n) {
        const Type t = static_cast<Type>(n % 3);
        const Expr e = gen.make(t, 1 + n % 6);
        ASSERT_EQ(e.type(), t);
        expect_round_trip(e);
        if (HasFailure()) return;  // one printed counterexample is enough
        for_each_node(e, [&](const Expr& x) {
            kinds.insert(x.kind());
            if (auto u = x.as<Unary>()) {
                unary_ops.insert(u->op);
                negated_literal |= u->op == UnaryOp::Neg && u->a.as<Const>() != nullptr;
            }
            if (auto b = x.as<Binary>()) binary_ops.insert(b->op);
            if (auto c = x.as<Cast>()) cast_targets.insert(c->type);
            if (auto c = x.as<Const>()) {
                negative_literal |= (c->type == Type::Float && c->f < 0) || (c->type == Type::Int && c->i < 0);
                infinities |= std::isinf(c->f);
                nan |= std::isnan(c->f);
                int_min |= c->type == Type::Int && c->i == std::numeric_limits<int32_t>::min();
            }
        });
    }
    EXPECT_EQ(kinds.size(), 8u) << "every node kind but Temp";
    EXPECT_EQ(unary_ops.size(), 15u);
    EXPECT_EQ(binary_ops.size(), 16u);
    EXPECT_EQ(cast_targets.size(), 2u);
    EXPECT_TRUE(negative_literal && negated_literal && infinities && nan && int_min);
}

TEST(Parser, EmbeddedExpressionsReportDocumentPositions) {
    try {
        parse_expr("score +\n  foo", example_names(), "spec.json", 7, 20);
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(e.line(), 8);
        EXPECT_EQ(e.column(), 3) << "columns after the first line are the line's own";
        EXPECT_NE(std::string(e.what()).find("spec.json:8:3: unknown name 'foo'"), std::string::npos) << e.what();
    }
    try {
        parse_expr("score + (", example_names(), "spec.json", 7, 20);
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(e.line(), 7);
        EXPECT_EQ(e.column(), 29) << "the first line is shifted by the string's column";
    }
}

TEST(Parser, MessagesShowTheLineAndACaret) {
    try {
        parse("cap * tanh(score / cap))");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(std::string(e.what()), "expr:1:24: unmatched ')': no bracket is open here\n"
                                         "    cap * tanh(score / cap))\n"
                                         "    " + std::string(23, ' ') + "^");
        EXPECT_EQ(e.reason(), "unmatched ')': no bracket is open here");
    }
}

TEST(Parser, CrlfLinesAreQuotedWithoutTheCarriageReturn) {
    try {
        parse("score\r\n  + foo\r\n");
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_EQ(std::string(e.what()).find('\r'), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("\n      + foo\n        ^"), std::string::npos) << e.what();
    }
}

TEST(Parser, NamesThatCannotBeDeclaredAreRejected) {
    ExprNames bad;
    bad.scalars["exp"] = Type::Float;
    EXPECT_THROW(parse_expr("score", bad), SpecParseError);
    ExprNames bool_scalar;
    bool_scalar.scalars["flag"] = Type::Bool;
    EXPECT_THROW(parse_expr("score", bool_scalar), SpecParseError);
}

struct BadExpression {
    const char* text;
    int line, column;
    const char* message;
};

// Each malformed expression, where it is wrong, and what the message must say.
const BadExpression kBadExpressions[] = {
    {"score $ 2.0", 1, 7, "unexpected character '$'"},
    {"score +\n\x01", 2, 1, "unexpected character 'U+0001'"},
    {"score * \xc3\xa9", 1, 9, "unexpected character '\xc3\xa9'"},
    {"score +\r\n  \xc3\xa9 1.0", 2, 3, "unexpected character '\xc3\xa9'"},
    {"score = 2.0", 1, 7, "did you mean '=='"},
    {"q_idx & kv_idx", 1, 7, "did you mean '&&'"},
    {"", 1, 1, "empty expression"},
    {"   \n  ", 2, 3, "empty expression"},
    {"score *", 1, 8, "expected an operand (a number, a name or '(') after '*', found the end of the expression"},
    {"score score", 1, 7, "expected an operator or the end of the expression, found name 'score'"},
    {"score + 1.2.3", 1, 9, "malformed number '1.2.3'"},
    {"score * 1e", 1, 9, "malformed number '1e': the exponent needs digits"},
    {"score * 2x", 1, 9, "malformed number '2x'"},
    {"q_idx + 99999999999999999999", 1, 9, "int literal 99999999999999999999 is out of range"},
    {"max(q_idx, 2147483648) > kv_idx", 1, 12, "int literal 2147483648 is out of range: ints are int32 on the GPU"},
    {"abs(-9223372036854775808)", 1, 5, "int literal -9223372036854775808 is out of range"},
    {"q_idx < -2147483649", 1, 9, "write a float such as -2147483649.0"},
    {"score * 1e999", 1, 9, "float literal 1e999 is too large"},
    {"score + foo", 1, 9, "unknown name 'foo'. The built-in names are score, b, h, kv_head, q_idx, kv_idx, q_len, kv_len"},
    {"score + windw", 1, 9, "unknown name 'windw'; did you mean 'window'?"},
    {"score + batch", 1, 9, "did you mean 'b'?"},
    {"exps(score)", 1, 1, "unknown function 'exps'; did you mean 'exp'?"},
    {"score * tanhh(score)", 1, 9, "did you mean 'tanh'?"},
    {"min(score, 1.0, 2.0)", 1, 1, "min takes 2 arguments (a, b), found 3"},
    {"select(q_idx < 1, score)", 1, 1, "select takes 3 arguments (cond, if_true, if_false), found 2"},
    {"exp()", 1, 1, "exp takes 1 argument (x), found 0"},
    {"score + bias[b, h, q_idx]", 1, 9, "tensor 'bias' has rank 4 but is indexed with 3 indices"},
    {"score + slopes", 1, 9, "tensor 'slopes' is used without indices"},
    {"score + cap[h]", 1, 12, "'cap' is a runtime scalar, not a tensor"},
    {"q_idx[0] > 1", 1, 6, "'q_idx' is a built-in int, not a tensor"},
    {"score + slopes[score]", 1, 16, "index 0 of tensor 'slopes' (score) is float; indices must be int"},
    {"score(1)", 1, 1, "'score' is a variable, not a function"},
    {"exp + 1.0", 1, 1, "'exp' is a function; call it as exp(...)"},
    {"score + (q_idx < 1)", 1, 7, "operator + needs numbers but got float and bool"},
    {"q_idx < 1 && 2", 1, 11, "&& needs two bools but got bool and int"},
    {"!score", 1, 1, "! needs a bool but got float"},
    {"-(q_idx < 1)", 1, 1, "cannot negate a bool"},
    {"score % 2.0", 1, 7, "% needs two ints but got float and float"},
    {"select(score, 1.0, 2.0)", 1, 1, "the condition must be bool but is float"},
    {"float(q_idx < 1)", 1, 1, "float(q_idx < 1) cannot convert a bool"},
    {"keep[b, h] == 1", 1, 12, "cannot compare bool with int"},
    {"cap * tanh(score / cap", 1, 23, "expected ')' to close the '(' of tanh at 1:11, found the end of the expression"},
    {"(score + 1.0, 2.0)", 1, 13, "expected ')' to close the '(' at 1:1, found ','"},
    {"bias[b, h, q_idx, kv_idx", 1, 25, "expected ']' to close the '[' of bias at 1:5"},
    {"score\n  + (1.0\n  * 2.0", 3, 8, "expected ')' to close the '(' at 2:5, found the end of the expression"},
    {"score)", 1, 6, "unmatched ')'"},
    {"score + ()", 1, 10, "expected an expression inside ( ), found ')'"},
    {"true(1)", 1, 5, "'true' is a literal, not a function or a tensor"},
    {"bool(q_idx)", 1, 1, "there is no bool(x) conversion"},
};

TEST(Parser, MalformedExpressionsAreLocated) {
    for (const auto& bad : kBadExpressions) {
        SCOPED_TRACE(bad.text);
        try {
            Expr e = parse(bad.text);
            ADD_FAILURE() << "parsed as " << e;
        } catch (const SpecParseError& e) {
            EXPECT_EQ(e.line(), bad.line) << e.what();
            EXPECT_EQ(e.column(), bad.column) << e.what();
            EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos) << e.what();
            EXPECT_EQ(std::string(e.what()).rfind("expr:" + std::to_string(bad.line) + ":" + std::to_string(bad.column) + ": ", 0), 0u)
                << e.what();
        }
    }
}

TEST(Parser, NestingIsBounded) {
    std::string deep(5000, '(');
    deep += "score" + std::string(5000, ')');
    try {
        parse(deep);
        FAIL() << "expected a SpecParseError";
    } catch (const SpecParseError& e) {
        EXPECT_NE(std::string(e.what()).find("nests deeper than"), std::string::npos) << e.what();
    }
    std::string fine(100, '(');
    fine += "score" + std::string(100, ')');
    EXPECT_TRUE(equal(parse(fine), score()));
}

// Whatever the text, the parser answers with an Expr or a SpecParseError located inside
// the text: never another exception (an InternalError would mean a type check is missing).
TEST(Parser, MutatedExpressionsParseOrFailCleanly) {
    testing::RandomExprGenerator gen(99);
    std::mt19937 rng(5);
    const std::string alphabet = "()[],+-*/%!=<>&|.e0123456789 _abqhkv";
    int errors = 0;
    for (int n = 0; n < 3000; ++n) {
        const Expr e = gen.make(static_cast<Type>(n % 3), 3);
        std::string text = to_string(e);
        for (int edits = 1 + n % 3; edits > 0 && !text.empty(); --edits) {
            const size_t at = rng() % text.size();
            const char c = alphabet[rng() % alphabet.size()];
            switch (rng() % 3) {
            case 0: text.erase(at, 1); break;
            case 1: text.insert(at, 1, c); break;
            default: text[at] = c; break;
            }
        }
        try {
            parse_expr(text, names_of(e));
        } catch (const SpecParseError& err) {
            ++errors;
            EXPECT_GE(err.line(), 1) << text;
            EXPECT_GE(err.column(), 1) << text;
            EXPECT_LE(static_cast<size_t>(err.column()), text.size() + 1) << text;
        } catch (const std::exception& other) {
            ADD_FAILURE() << "'" << text << "' threw " << other.what();
        }
    }
    EXPECT_GT(errors, 1000) << "the mutations should break most expressions";
}

}  // namespace
}  // namespace attnjit::dsl
