// The textual form: stable, C precedence, unambiguous literals.
#include <cmath>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>

#include "dsl/dsl.h"

namespace attnjit::dsl {
namespace {

std::string str(const Expr& e) { return to_string(e); }

TEST(Printer, FloatLiterals) {
    EXPECT_EQ(float_literal(30.0), "30.0");
    EXPECT_EQ(float_literal(0.5), "0.5");
    EXPECT_EQ(float_literal(0.1), "0.1");
    EXPECT_EQ(float_literal(-2.0), "-2.0");
    EXPECT_EQ(float_literal(0.0), "0.0");
    EXPECT_EQ(float_literal(-0.0), "-0.0");
    EXPECT_EQ(float_literal(1e-30), "1e-30");
    EXPECT_EQ(float_literal(1e20), "1e+20");
    EXPECT_EQ(float_literal(std::numeric_limits<double>::infinity()), "inf");
    EXPECT_EQ(float_literal(-std::numeric_limits<double>::infinity()), "-inf");
    EXPECT_EQ(float_literal(std::nan("")), "nan");
    // Round trip for values that need all 17 digits.
    for (double v : {0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, static_cast<double>(0.1f)})
        EXPECT_EQ(std::strtod(float_literal(v).c_str(), nullptr), v) << float_literal(v);
}

TEST(Printer, Literals) {
    EXPECT_EQ(str(Expr(3)), "3");
    EXPECT_EQ(str(Expr(-3)), "-3");
    EXPECT_EQ(str(Expr(true)), "true");
    EXPECT_EQ(str(Expr(false)), "false");
    EXPECT_EQ(str(Expr(2.0)), "2.0");
    EXPECT_EQ(str(Expr()), "<undefined>");
}

TEST(Printer, NegatedLiteralFoldsToANegativeLiteral) {
    EXPECT_EQ(str(-Expr(2.0)), "-2.0");
    EXPECT_TRUE(equal(-Expr(2.0), Expr(-2.0)));
    EXPECT_EQ(str(Expr(-2.0)), "-2.0");
    EXPECT_EQ(str(-Expr(2)), "-2");
    // A Neg node over a literal (only codegen builds one) stays distinguishable.
    EXPECT_EQ(str(Unary::make(UnaryOp::Neg, Expr(2.0))), "-(2.0)");
    EXPECT_EQ(str(-infinity()), "-inf");
    EXPECT_EQ(str(Expr(-std::numeric_limits<double>::infinity())), "-inf");
    EXPECT_EQ(str(-score()), "-score");
    EXPECT_EQ(str(-(-score())), "-(-score)");
    EXPECT_EQ(str(-(score() + 1)), "-(score + 1.0)");
}

TEST(Printer, VariablesScalarsTensors) {
    EXPECT_EQ(str(score()), "score");
    EXPECT_EQ(str(batch()), "b");
    EXPECT_EQ(str(head()), "h");
    EXPECT_EQ(str(kv_head()), "kv_head");
    EXPECT_EQ(str(q_idx()), "q_idx");
    EXPECT_EQ(str(kv_idx()), "kv_idx");
    EXPECT_EQ(str(q_len()), "q_len");
    EXPECT_EQ(str(kv_len()), "kv_len");
    EXPECT_EQ(str(scalar("cap")), "cap");
    Tensor bias("bias", DType::f16, 4);
    EXPECT_EQ(str(bias(batch(), head(), q_idx(), kv_idx())), "bias[b, h, q_idx, kv_idx]");
    EXPECT_EQ(str(Tensor("t", DType::f32, 1)(kv_idx() - q_idx() + 3)), "t[kv_idx - q_idx + 3]");
}

TEST(Printer, PrecedenceAndParentheses) {
    Expr i = q_idx(), j = kv_idx();
    EXPECT_EQ(str((i - j) * 2), "(q_idx - kv_idx) * 2");
    EXPECT_EQ(str(i - (j - 1)), "q_idx - (kv_idx - 1)");
    EXPECT_EQ(str(i - j - 1), "q_idx - kv_idx - 1");
    EXPECT_EQ(str(i * j + 1), "q_idx * kv_idx + 1");
    EXPECT_EQ(str(i * (j + 1)), "q_idx * (kv_idx + 1)");
    EXPECT_EQ(str(i / (j / 2)), "q_idx / (kv_idx / 2)");
    EXPECT_EQ(str(i % 4 == 0), "q_idx % 4 == 0");
    // C precedence: relational binds tighter than equality, so no parentheses are needed.
    EXPECT_EQ(str((i < 1) == (j < 1)), "(q_idx < 1) == (kv_idx < 1)");
    EXPECT_EQ(str((i == 1) == (j == 1)), "(q_idx == 1) == (kv_idx == 1)");
    EXPECT_EQ(str(i >= 0 && j < 5), "q_idx >= 0 && kv_idx < 5");
    EXPECT_EQ(str((i < 1 || j < 1) && i < 3), "(q_idx < 1 || kv_idx < 1) && q_idx < 3");
    EXPECT_EQ(str(i < 1 || (j < 1 && i < 3)), "q_idx < 1 || kv_idx < 1 && q_idx < 3");
    EXPECT_EQ(str(!(i < 3)), "!(q_idx < 3)");
}

TEST(Printer, CallsCastsSelect) {
    EXPECT_EQ(str(30.0 * tanh(score() / 30.0)), "30.0 * tanh(score / 30.0)");
    EXPECT_EQ(str(min(q_idx(), kv_idx())), "min(q_idx, kv_idx)");
    EXPECT_EQ(str(max(score(), 0.0)), "max(score, 0.0)");
    EXPECT_EQ(str(pow(score(), 2.0)), "pow(score, 2.0)");
    EXPECT_EQ(str(q_idx() + 0.5), "float(q_idx) + 0.5");
    EXPECT_EQ(str(to_int(score())), "int(score)");
    EXPECT_EQ(str(score() > 0), "score > 0.0");
    EXPECT_EQ(str(select(kv_idx() <= q_idx(), score(), -infinity())), "select(kv_idx <= q_idx, score, -inf)");
    EXPECT_EQ(str(exp(score()) * sigmoid(score())), "exp(score) * sigmoid(score)");
}

TEST(Printer, IsStableAcrossConstructions) {
    auto build = [] { return mods::compose(mods::softcap(scalar("cap")), mods::alibi(Tensor("slopes", DType::f32, 1))); };
    EXPECT_EQ(str(build()), str(build()));
    std::ostringstream os;
    os << build();
    EXPECT_EQ(os.str(), str(build()));
}

}  // namespace
}  // namespace attnjit::dsl
