// Type rules of the user-facing operators: promotion, result types, what is refused.
#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

TEST(Operators, ArithmeticResultTypes) {
    EXPECT_EQ((q_idx() + kv_idx()).type(), Type::Int);
    EXPECT_EQ((q_idx() / 2).type(), Type::Int);
    EXPECT_EQ((q_idx() % 2).type(), Type::Int);
    EXPECT_EQ((score() * 2).type(), Type::Float);
    EXPECT_EQ((q_idx() * 0.5).type(), Type::Float);
    EXPECT_EQ((-q_idx()).type(), Type::Int);
    EXPECT_EQ(abs(q_idx() - kv_idx()).type(), Type::Int);
    EXPECT_EQ(min(q_idx(), kv_idx()).type(), Type::Int);
    EXPECT_EQ(max(score(), 0).type(), Type::Float);
}

TEST(Operators, IntPromotesToFloatNextToAFloat) {
    // An int variable is cast; an int literal becomes a float literal.
    Expr e = q_idx() + 0.5;
    auto b = e.as<Binary>();
    ASSERT_NE(b, nullptr);
    ASSERT_NE(b->a.as<Cast>(), nullptr);
    EXPECT_EQ(b->a.as<Cast>()->type, Type::Float);
    Expr f = score() > 0;
    auto c = f.as<Binary>()->b.as<Const>();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->type, Type::Float);
    EXPECT_EQ(c->f, 0.0);
    Expr g = 2 * score();
    EXPECT_EQ(g.as<Binary>()->a.as<Const>()->type, Type::Float);
}

TEST(Operators, ComparisonsAndLogicGiveBool) {
    EXPECT_EQ((q_idx() < kv_idx()).type(), Type::Bool);
    EXPECT_EQ((score() >= 1).type(), Type::Bool);
    EXPECT_EQ((q_idx() == kv_idx()).type(), Type::Bool);
    EXPECT_EQ(((q_idx() < 1) == (kv_idx() < 1)).type(), Type::Bool);  // bool == bool
    EXPECT_EQ(((q_idx() < 1) && (kv_idx() < 1)).type(), Type::Bool);
    EXPECT_EQ((!(q_idx() < 1)).type(), Type::Bool);
}

TEST(Operators, FloatFunctionsCastIntArguments) {
    for (const Expr& e : {exp(q_idx()), log(kv_len()), sqrt(q_idx()), tanh(q_idx()), floor(q_idx()),
                          sigmoid(q_idx()), rsqrt(q_len()), exp2(q_idx()), log2(q_idx()), ceil(q_idx()),
                          sin(q_idx()), cos(q_idx())}) {
        EXPECT_EQ(e.type(), Type::Float) << e;
        ASSERT_NE(e.as<Unary>(), nullptr);
        EXPECT_NE(e.as<Unary>()->a.as<Cast>(), nullptr) << e;
    }
    EXPECT_EQ(pow(q_idx(), 2).type(), Type::Float);
    EXPECT_EQ(pow(score(), 2).type(), Type::Float);
}

TEST(Operators, SelectPromotesBranches) {
    Expr s = select(q_idx() < 1, 1, 2.5);
    EXPECT_EQ(s.type(), Type::Float);
    EXPECT_EQ(s.as<Select>()->t.as<Const>()->type, Type::Float);
    EXPECT_EQ(select(q_idx() < 1, 1, 2).type(), Type::Int);
    EXPECT_EQ(select(q_idx() < 1, q_idx() < 2, kv_idx() < 2).type(), Type::Bool);
}

TEST(Operators, ConversionsAndHelpers) {
    EXPECT_EQ(to_float(q_idx()).type(), Type::Float);
    EXPECT_EQ(to_int(score()).type(), Type::Int);
    Expr f = score();
    EXPECT_TRUE(to_float(f).same_as(f));  // no-op conversions add no node
    Expr i = q_idx();
    EXPECT_TRUE(to_int(i).same_as(i));
    EXPECT_EQ(clamp(q_idx(), 0, 5).type(), Type::Int);
    EXPECT_EQ(infinity().as<Const>()->f, std::numeric_limits<double>::infinity());
}

TEST(Operators, RefusedCombinationsAreUserErrors) {
    Expr cond = q_idx() < 1;
    EXPECT_THROW(cond + 1, UserError);
    EXPECT_THROW(score() % 2, UserError);
    EXPECT_THROW(q_idx() && kv_idx(), UserError);
    EXPECT_THROW(!q_idx(), UserError);
    EXPECT_THROW(-cond, UserError);
    EXPECT_THROW(exp(cond), UserError);
    EXPECT_THROW(select(score(), 1, 2), UserError);
    EXPECT_THROW(select(cond, cond, 1), UserError);
    EXPECT_THROW(cond == 1, UserError);
    EXPECT_THROW(Expr() + 1, UserError);
}

}  // namespace
}  // namespace attnjit::dsl
