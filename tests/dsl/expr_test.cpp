// Expression construction: literals, variables, handles (same_as vs equal), as<T>().
#include <gtest/gtest.h>

#include "dsl/dsl.h"

namespace attnjit::dsl {
namespace {

TEST(Expr, LiteralsHaveTheirTypes) {
    EXPECT_EQ(Expr(1.5).type(), Type::Float);
    EXPECT_EQ(Expr(1.5f).type(), Type::Float);
    EXPECT_EQ(Expr(3).type(), Type::Int);
    EXPECT_EQ(Expr(3LL).type(), Type::Int);
    EXPECT_EQ(Expr(true).type(), Type::Bool);
    ASSERT_NE(Expr(2.5).as<Const>(), nullptr);
    EXPECT_EQ(Expr(2.5).as<Const>()->f, 2.5);
    EXPECT_EQ(Expr(-7).as<Const>()->i, -7);
    EXPECT_EQ(Expr(true).as<Const>()->i, 1);
    EXPECT_EQ(Expr(0.1f).as<Const>()->f, static_cast<double>(0.1f));  // a float literal is stored exactly
}

TEST(Expr, VariablesHaveTheirTypes) {
    EXPECT_EQ(score().type(), Type::Float);
    for (const Expr& e : {batch(), head(), kv_head(), q_idx(), kv_idx(), q_len(), kv_len()})
        EXPECT_EQ(e.type(), Type::Int) << e;
    ASSERT_NE(kv_head().as<Var>(), nullptr);
    EXPECT_EQ(kv_head().as<Var>()->var, VarKind::KvHead);
    EXPECT_EQ(scalar("cap").type(), Type::Float);
    EXPECT_EQ(int_scalar("window").type(), Type::Int);
}

TEST(Expr, TensorLoadsReadTheirDtypeAsADslType) {
    EXPECT_EQ(Tensor("bias", DType::bf16, 4)(batch(), head(), q_idx(), kv_idx()).type(), Type::Float);
    EXPECT_EQ(Tensor("doc", DType::i64, 2)(batch(), q_idx()).type(), Type::Int);
    EXPECT_EQ(Tensor("keep", DType::u8, 1)(kv_idx()).type(), Type::Bool);
    Expr load = Tensor("t", DType::f32, 2)(0, kv_idx() + 1);
    auto t = load.as<TensorLoad>();
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->name, "t");
    EXPECT_EQ(t->dtype, DType::f32);
    EXPECT_EQ(t->indices.size(), 2u);
}

TEST(Expr, UndefinedAndKinds) {
    Expr e;
    EXPECT_FALSE(e.defined());
    EXPECT_TRUE((score() + 1).defined());
    EXPECT_EQ((score() + 1).kind(), NodeKind::Binary);
    EXPECT_EQ(select(q_idx() < 1, 1, 2).kind(), NodeKind::Select);
    EXPECT_EQ((score() + 1).as<Unary>(), nullptr);
}

TEST(Expr, SameAsIsIdentityEqualIsStructure) {
    Expr a = score() * 2.0, b = score() * 2.0, c = a;
    EXPECT_TRUE(a.same_as(c));
    EXPECT_FALSE(a.same_as(b));
    EXPECT_TRUE(equal(a, b));
}

TEST(Expr, NodesAreSharedNotCopied) {
    Expr s = score() * 3.0;
    Expr e = s + s;
    auto bin = e.as<Binary>();
    ASSERT_NE(bin, nullptr);
    EXPECT_TRUE(bin->a.same_as(s));
    EXPECT_TRUE(bin->b.same_as(s));
}

}  // namespace
}  // namespace attnjit::dsl
