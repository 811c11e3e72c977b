// AttentionSpec: builder, defaults, inputs it reads, validation reasons, printing.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

TEST(Spec, Defaults) {
    AttentionSpec s;
    EXPECT_EQ(s.dtype(), DType::f16);
    EXPECT_EQ(s.head_dim_qk(), 128);
    EXPECT_EQ(s.head_dim_v(), 128);
    EXPECT_EQ(s.q_heads(), 0);
    EXPECT_FALSE(s.scale().has_value());
    EXPECT_DOUBLE_EQ(s.scale_or_default(), 1 / std::sqrt(128.0));
    EXPECT_FALSE(s.score_mod().defined());
    EXPECT_FALSE(s.mask().defined());
    EXPECT_FALSE(s.returns_lse());
    EXPECT_FALSE(s.why_invalid().has_value());
    EXPECT_NO_THROW(s.validate());
}

TEST(Spec, BuilderSetsFields) {
    AttentionSpec s = AttentionSpec().dtype(DType::bf16).head_dims(192 - 96, 64).heads(32, 8).scale(0.125).return_lse();
    EXPECT_EQ(s.dtype(), DType::bf16);
    EXPECT_EQ(s.head_dim_qk(), 96);
    EXPECT_EQ(s.head_dim_v(), 64);
    EXPECT_EQ(s.q_heads(), 32);
    EXPECT_EQ(s.kv_heads(), 8);
    EXPECT_EQ(s.scale_or_default(), 0.125);
    EXPECT_TRUE(s.returns_lse());
    EXPECT_NO_THROW(s.validate());
}

TEST(Spec, EveryValidConfigurationValidates) {
    for (DType dt : {DType::f16, DType::bf16, DType::f32})
        for (int d : {32, 64, 96, 128, 256})
            for (auto [hq, hkv] : {std::pair{0, 0}, {8, 8}, {8, 2}, {8, 1}})
                EXPECT_FALSE(AttentionSpec().dtype(dt).head_dim(d).heads(hq, hkv).why_invalid().has_value())
                    << dtype_name(dt) << " d" << d << " " << hq << "/" << hkv;
}

TEST(Spec, InputsAreCollectedSortedByName) {
    Tensor bias("bias", DType::bf16, 4), doc("doc", DType::i32, 2), slopes("alibi_slopes", DType::f32, 1);
    AttentionSpec s;
    s.score_mod(mods::compose(mods::softcap(scalar("cap")), mods::bias(bias)) + slopes(head()))
        .mask(mods::document_mask(doc) && mods::sliding_window(int_scalar("window")));
    auto t = s.tensors();
    ASSERT_EQ(t.size(), 3u);
    std::vector<std::string> names;
    for (const auto& [n, info] : t) names.push_back(n);
    EXPECT_EQ(names, (std::vector<std::string>{"alibi_slopes", "bias", "doc"}));
    EXPECT_EQ(t.at("bias"), (TensorInfo{DType::bf16, 4}));
    EXPECT_EQ(t.at("doc"), (TensorInfo{DType::i32, 2}));
    auto sc = s.scalars();
    ASSERT_EQ(sc.size(), 2u);
    EXPECT_EQ(sc.at("cap"), Type::Float);
    EXPECT_EQ(sc.at("window"), Type::Int);
    EXPECT_NO_THROW(s.validate());
    EXPECT_TRUE(AttentionSpec().tensors().empty());
    EXPECT_TRUE(AttentionSpec().scalars().empty());
}

TEST(Spec, ScoreModMayBeAConstantAndMaskAConstant) {
    EXPECT_NO_THROW(AttentionSpec().score_mod(Expr(0.0)).mask(Expr(true)).validate());
    EXPECT_NO_THROW(AttentionSpec().score_mod(score() * 2).validate());
}

TEST(Spec, WhyInvalidNamesTheProblem) {
    auto why = [](const AttentionSpec& s) { return s.why_invalid().value_or("<valid>"); };
    EXPECT_NE(why(AttentionSpec().dtype(DType::i32)).find("dtype is i32"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().head_dim(0)).find("head dim 0"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().head_dims(128, -48)).find("head dim -48"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().heads(6, 4)).find("multiple of key/value heads"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().heads(8, 0)).find("give both head counts"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().heads(-8, -8)).find("heads(-8, -8)"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().scale(0)).find("scale(0"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().score_mod(q_idx() < 1)).find("score_mod"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().mask(to_float(q_idx()))).find("mask"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().mask(score() > 0)).find("reads the score"), std::string::npos);
    EXPECT_NE(why(AttentionSpec().score_mod(Temp::make("t0", Type::Float))).find("temporary"), std::string::npos);
    // validate() throws the same text.
    try {
        AttentionSpec().head_dim(0).validate();
        FAIL() << "no error";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("head dim 0"), std::string::npos);
    }
}

TEST(Spec, Prints) {
    std::ostringstream a, b;
    a << AttentionSpec();
    EXPECT_EQ(a.str(), "AttentionSpec(dtype=f16, head_dims=128x128)");
    b << AttentionSpec().dtype(DType::bf16).head_dims(64, 32).heads(8, 2).scale(0.5).score_mod(mods::softcap(30.0))
             .mask(mods::causal()).return_lse();
    EXPECT_EQ(b.str(),
              "AttentionSpec(dtype=bf16, head_dims=64x32, heads=8/2, scale=0.5, score_mod=30.0 * tanh(score / "
              "30.0), mask=q_idx - kv_idx >= 0, return_lse)");
}

}  // namespace
}  // namespace attnjit::dsl
