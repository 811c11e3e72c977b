// The ready-made mods are the documented expressions, and mean what their comments say.
#include <cmath>
#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "dsl/interpreter.h"

namespace attnjit::dsl {
namespace {

using mods::CausalAlign;

bool keep(const Expr& mask, long long i, long long j, long long nq, long long nk) {
    Env env;
    env.q_idx = i;
    env.kv_idx = j;
    env.q_len = nq;
    env.kv_len = nk;
    env.scalars = {{"prefix", 2}, {"w", 3}};
    return interpret_bool(mask, env);
}

TEST(Mods, PrintAsDocumented) {
    Tensor slopes("slopes", DType::f32, 1), bias("bias", DType::f16, 4), table("table", DType::f32, 2),
        doc("doc", DType::i32, 2), qdoc("qdoc", DType::i32, 2), kdoc("kdoc", DType::i64, 2);
    EXPECT_EQ(to_string(mods::causal()), "q_idx - kv_idx >= 0");
    EXPECT_EQ(to_string(mods::causal(CausalAlign::BottomRight)), "q_idx + (kv_len - q_len) - kv_idx >= 0");
    EXPECT_EQ(to_string(mods::sliding_window(4)), "q_idx - kv_idx >= 0 && q_idx - kv_idx < 4");
    EXPECT_EQ(to_string(mods::sliding_window(int_scalar("w"), CausalAlign::BottomRight)),
              "q_idx + (kv_len - q_len) - kv_idx >= 0 && q_idx + (kv_len - q_len) - kv_idx < w");
    EXPECT_EQ(to_string(mods::document_mask(doc)), "doc[b, q_idx] == doc[b, kv_idx]");
    EXPECT_EQ(to_string(mods::document_mask(qdoc, kdoc)), "qdoc[b, q_idx] == kdoc[b, kv_idx]");
    EXPECT_EQ(to_string(mods::prefix_lm(int_scalar("prefix"))), "kv_idx < prefix || kv_idx <= q_idx");
    EXPECT_EQ(to_string(mods::softcap(30.0)), "30.0 * tanh(score / 30.0)");
    EXPECT_EQ(to_string(mods::softcap(scalar("cap"))), "cap * tanh(score / cap)");
    EXPECT_EQ(to_string(mods::alibi(slopes)), "score + slopes[h] * float(kv_idx - q_idx)");
    EXPECT_EQ(to_string(mods::bias(bias)), "score + bias[b, h, q_idx, kv_idx]");
    EXPECT_EQ(to_string(mods::relative_position_bias(table, 8)),
              "score + table[h, min(max(kv_idx - q_idx, -8), 8) + 8]");
    EXPECT_EQ(to_string(mods::compose(mods::softcap(30.0), mods::alibi(slopes))),
              "30.0 * tanh((score + slopes[h] * float(kv_idx - q_idx)) / 30.0)");
}

TEST(Mods, TypesAreMaskBoolAndScoreModFloat) {
    for (const Expr& m : {mods::causal(), mods::sliding_window(2), mods::prefix_lm(3),
                          mods::document_mask(Tensor("doc", DType::i32, 2))})
        EXPECT_EQ(m.type(), Type::Bool) << m;
    for (const Expr& s : {mods::softcap(20), mods::alibi(Tensor("s", DType::f32, 1)),
                          mods::bias(Tensor("b4", DType::bf16, 4)),
                          mods::relative_position_bias(Tensor("t", DType::f32, 2), 4)})
        EXPECT_EQ(s.type(), Type::Float) << s;
}

TEST(Mods, CausalAlignments) {
    // Nq = 2, Nk = 4. Top-left keeps j <= i; bottom-right keeps j <= i + 2.
    for (long long i = 0; i < 2; ++i)
        for (long long j = 0; j < 4; ++j) {
            EXPECT_EQ(keep(mods::causal(), i, j, 2, 4), j <= i) << i << "," << j;
            EXPECT_EQ(keep(mods::causal(CausalAlign::BottomRight), i, j, 2, 4), j <= i + 2) << i << "," << j;
        }
}

TEST(Mods, SlidingWindowAndPrefixLm) {
    for (long long i = 0; i < 6; ++i)
        for (long long j = 0; j < 6; ++j) {
            EXPECT_EQ(keep(mods::sliding_window(1), i, j, 6, 6), i == j);
            EXPECT_EQ(keep(mods::sliding_window(int_scalar("w")), i, j, 6, 6), j <= i && i - j < 3);
            EXPECT_EQ(keep(mods::sliding_window(2, CausalAlign::BottomRight), i, j, 6, 8), j <= i + 2 && i + 2 - j < 2);
            EXPECT_EQ(keep(mods::prefix_lm(int_scalar("prefix")), i, j, 6, 6), j < 2 || j <= i);
        }
}

TEST(Mods, ScoreModsEvaluate) {
    Env env;
    env.score = 3.0;
    env.h = 1;
    env.q_idx = 5;
    env.kv_idx = 2;
    env.load = [](const std::string& name, const long long* idx, int rank) -> double {
        if (name == "slopes") return 0.5 * (idx[0] + 1);     // slopes[1] = 1.0
        if (name == "table") return 100.0 * idx[0] + idx[1];  // table[h, r]
        return 0;
    };
    EXPECT_DOUBLE_EQ(interpret_float(mods::softcap(2.0), env), 2.0 * std::tanh(1.5));
    EXPECT_DOUBLE_EQ(interpret_float(mods::alibi(Tensor("slopes", DType::f32, 1)), env), 3.0 + 1.0 * (2 - 5));
    // rel = clamp(2 - 5, -2, 2) + 2 = 0
    EXPECT_DOUBLE_EQ(interpret_float(mods::relative_position_bias(Tensor("table", DType::f32, 2), 2), env),
                     3.0 + 100.0 + 0);
    env.kv_idx = 9;  // rel = clamp(4, -2, 2) + 2 = 4
    EXPECT_DOUBLE_EQ(interpret_float(mods::relative_position_bias(Tensor("table", DType::f32, 2), 2), env),
                     3.0 + 100.0 + 4);
}

TEST(Mods, ComposeReplacesEveryScore) {
    Expr outer = score() * score();
    Expr c = mods::compose(outer, score() + 1.0);
    EXPECT_EQ(to_string(c), "(score + 1.0) * (score + 1.0)");
    Env env;
    env.score = 2.0;
    EXPECT_EQ(interpret_float(c, env), 9.0);
    // An outer expression without score() is unchanged.
    Expr constant = Expr(1.5);
    EXPECT_TRUE(mods::compose(constant, score() + 1.0).same_as(constant));
}

}  // namespace
}  // namespace attnjit::dsl
