// Evaluation semantics of the host interpreter (dsl/interpreter.h).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "support/error.h"

namespace attnjit::dsl {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

long long ival(const Expr& e, const Env& env = {}) { return interpret_int(e, env); }
double fval(const Expr& e, const Env& env = {}) { return interpret_float(e, env); }
bool bval(const Expr& e, const Env& env = {}) { return interpret_bool(e, env); }

TEST(Interpreter, VariablesReadTheEnvironment) {
    Env env;
    env.score = 1.25;
    env.b = 1;
    env.h = 2;
    env.kv_head = 3;
    env.q_idx = 4;
    env.kv_idx = 5;
    env.q_len = 6;
    env.kv_len = 7;
    EXPECT_EQ(fval(score(), env), 1.25);
    EXPECT_EQ(ival(batch(), env), 1);
    EXPECT_EQ(ival(head(), env), 2);
    EXPECT_EQ(ival(kv_head(), env), 3);
    EXPECT_EQ(ival(q_idx(), env), 4);
    EXPECT_EQ(ival(kv_idx(), env), 5);
    EXPECT_EQ(ival(q_len(), env), 6);
    EXPECT_EQ(ival(kv_len(), env), 7);
    Value v = interpret(q_idx() < kv_idx(), env);
    EXPECT_EQ(v.type, Type::Bool);
    EXPECT_TRUE(v.as_bool());
}

TEST(Interpreter, IntegerDivisionTruncatesLikeC) {
    EXPECT_EQ(ival(Expr(7) / 2), 3);
    EXPECT_EQ(ival(Expr(-7) / 2), -3);
    EXPECT_EQ(ival(Expr(7) / -2), -3);
    EXPECT_EQ(ival(Expr(-7) % 2), -1);
    EXPECT_EQ(ival(Expr(7) % -2), 1);
    EXPECT_EQ(ival(Expr(-8) % 4), 0);
    Env env;
    env.q_idx = -5;
    EXPECT_EQ(ival(q_idx() / 3, env), -1);
    EXPECT_THROW(ival(Expr(1) / (q_idx() + 5), env), UserError);
    EXPECT_THROW(ival(Expr(1) % (q_idx() + 5), env), UserError);
    // Overflow wraps instead of being undefined (constants are int32, so reach the 64-bit
    // edges through a variable).
    long long mn = std::numeric_limits<long long>::min();
    env.q_idx = mn;
    EXPECT_EQ(ival(q_idx() / -1, env), mn);
    EXPECT_EQ(ival(q_idx() % -1, env), 0);
    env.q_idx = std::numeric_limits<long long>::max();
    EXPECT_EQ(ival(q_idx() + 1, env), mn);
}

TEST(Interpreter, FloatArithmeticIsIeee) {
    EXPECT_EQ(fval(Expr(1.0) / 0.0), kInf);
    EXPECT_EQ(fval(Expr(-1.0) / 0.0), -kInf);
    EXPECT_TRUE(std::isnan(fval(Expr(0.0) / 0.0)));
    EXPECT_TRUE(std::isnan(fval(infinity() - infinity())));
    EXPECT_EQ(fval(exp(infinity())), kInf);
    EXPECT_EQ(fval(exp(-infinity())), 0.0);
    EXPECT_EQ(fval(log(Expr(0.0))), -kInf);
    EXPECT_TRUE(std::isnan(fval(log(Expr(-1.0)))));
    EXPECT_TRUE(std::isnan(fval(sqrt(Expr(-1.0)))));
    EXPECT_EQ(fval(tanh(infinity())), 1.0);
    EXPECT_EQ(fval(Expr(7.0) / 2), 3.5);  // float division does not truncate
    EXPECT_EQ(fval(q_idx() + 0.5), 0.5);
}

TEST(Interpreter, NanPropagatesAndComparesFalse) {
    Env env;
    env.score = std::nan("");
    EXPECT_TRUE(std::isnan(fval(score() * 0.0 + 1.0, env)));
    EXPECT_FALSE(bval(score() < 1.0, env));
    EXPECT_FALSE(bval(score() >= 1.0, env));
    EXPECT_FALSE(bval(score() == score(), env));
    EXPECT_TRUE(bval(score() != score(), env));
    // min/max do not hide a NaN (IEEE 754-2019 minimum/maximum).
    EXPECT_TRUE(std::isnan(fval(min(score(), 1.0), env)));
    EXPECT_TRUE(std::isnan(fval(max(1.0, score()), env)));
    EXPECT_EQ(fval(min(-infinity(), Expr(3.0))), -kInf);
    EXPECT_TRUE(std::signbit(fval(min(Expr(0.0), Expr(-0.0)))));
}

TEST(Interpreter, FunctionsAndCasts) {
    EXPECT_DOUBLE_EQ(fval(sigmoid(Expr(0.0))), 0.5);
    EXPECT_DOUBLE_EQ(fval(rsqrt(Expr(4.0))), 0.5);
    EXPECT_DOUBLE_EQ(fval(exp2(Expr(3.0))), 8.0);
    EXPECT_DOUBLE_EQ(fval(log2(Expr(8.0))), 3.0);
    EXPECT_DOUBLE_EQ(fval(pow(Expr(2.0), 10)), 1024.0);
    EXPECT_EQ(fval(floor(Expr(-1.5))), -2.0);
    EXPECT_EQ(fval(ceil(Expr(-1.5))), -1.0);
    EXPECT_EQ(fval(abs(Expr(-2.5))), 2.5);
    EXPECT_EQ(ival(abs(Expr(-3))), 3);
    EXPECT_EQ(ival(to_int(Expr(-2.7))), -2);  // toward zero
    EXPECT_EQ(ival(to_int(Expr(2.7))), 2);
    EXPECT_EQ(ival(to_int(Expr(std::nan("")))), 0);
    EXPECT_EQ(ival(to_int(infinity())), std::numeric_limits<long long>::max());
    EXPECT_EQ(fval(to_float(Expr(3))), 3.0);
    EXPECT_EQ(ival(clamp(Expr(9), 0, 5)), 5);
    EXPECT_EQ(ival(clamp(Expr(-9), 0, 5)), 0);
    EXPECT_EQ(ival(min(Expr(3), -4)), -4);
    EXPECT_EQ(ival(-Expr(3)), -3);
}

TEST(Interpreter, SelectAndLogicAreLazy) {
    int reads = 0;
    Env env;
    env.load = [&](const std::string&, const long long* idx, int) -> double {
        ++reads;
        EXPECT_LT(idx[0], 4) << "read out of bounds";
        return 10.0 * idx[0];
    };
    Tensor t("t", DType::f32, 1);
    Expr guarded = select(kv_idx() < 4, t(kv_idx()), Expr(-1.0));
    env.kv_idx = 2;
    EXPECT_EQ(fval(guarded, env), 20.0);
    env.kv_idx = 9;
    EXPECT_EQ(fval(guarded, env), -1.0);
    EXPECT_EQ(reads, 1);
    Expr lazy_and = kv_idx() < 4 && t(kv_idx()) > 0.0;
    EXPECT_FALSE(bval(lazy_and, env));
    Expr lazy_or = kv_idx() >= 4 || t(kv_idx()) > 0.0;
    EXPECT_TRUE(bval(lazy_or, env));
    EXPECT_EQ(reads, 1);
}

TEST(Interpreter, ScalarsAndTensors) {
    Env env;
    env.scalars = {{"cap", 30.0}, {"w", 4.0}};
    EXPECT_EQ(fval(scalar("cap") * 2, env), 60.0);
    EXPECT_EQ(ival(int_scalar("w") + 1, env), 5);
    EXPECT_THROW(fval(scalar("missing"), env), UserError);
    env.scalars["w"] = 2.5;
    EXPECT_THROW(ival(int_scalar("w"), env), UserError);
    // Tensors of each DSL type, read with the evaluated indices.
    env.h = 3;
    env.load = [](const std::string& name, const long long* idx, int rank) -> double {
        if (name == "slopes") return -0.5 * idx[0];
        if (name == "doc") return idx[0] * 10 + idx[1];
        if (name == "keep") return idx[0] % 2;
        return std::nan("");
    };
    EXPECT_EQ(fval(Tensor("slopes", DType::bf16, 1)(head()), env), -1.5);
    EXPECT_EQ(ival(Tensor("doc", DType::i32, 2)(head() + 1, 7), env), 47);
    EXPECT_TRUE(bval(Tensor("keep", DType::u8, 1)(head()), env));
    EXPECT_THROW(ival(Tensor("frac", DType::i32, 1)(0), env), UserError);  // NaN in an int tensor
    Env no_tensors;
    EXPECT_THROW(fval(Tensor("slopes", DType::f32, 1)(0), no_tensors), UserError);
}

TEST(Interpreter, IntTensorElementsAreInt32LikeTheDevice) {
    // An i64 element is truncated to int32 like a C cast, as attnjit::to_int reads it.
    Env env;
    env.load = [](const std::string&, const long long* idx, int) -> double {
        const double two32 = 4294967296.0;
        switch (idx[0]) {
        case 0: return two32 + 5;        // 5
        case 1: return 2147483648.0;     // 2^31 -> -2^31
        case 2: return -2147483649.0;    // -2^31 - 1 -> 2^31 - 1
        case 3: return -3 * two32 - 7;   // -7
        default: return 123456;          // unchanged
        }
    };
    Tensor ids("ids", DType::i64, 1);
    EXPECT_EQ(ival(ids(0), env), 5);
    EXPECT_EQ(ival(ids(1), env), -2147483648LL);
    EXPECT_EQ(ival(ids(2), env), 2147483647LL);
    EXPECT_EQ(ival(ids(3), env), -7);
    EXPECT_EQ(ival(ids(4), env), 123456);
    EXPECT_TRUE(bval(ids(0) == ids(4) - 123451, env));
    // Only the element is truncated: arithmetic on it stays 64-bit as documented.
    EXPECT_EQ(ival(ids(2) + 1, env), 2147483648LL);
    EXPECT_EQ(ival(Tensor("ids32", DType::i32, 1)(0), env), 5);
}

TEST(Interpreter, ResultTypeIsChecked) {
    EXPECT_THROW(interpret_bool(score(), {}), UserError);
    EXPECT_THROW(interpret_float(q_idx(), {}), UserError);
    EXPECT_THROW(interpret_int(q_idx() < 1, {}), UserError);
    EXPECT_THROW(interpret(Expr(), {}), UserError);
    EXPECT_EQ(interpret(Expr(2.0), {}).as_double(), 2.0);
    EXPECT_EQ(interpret(Expr(2), {}).as_double(), 2.0);
}

TEST(Interpreter, TempsComeFromTheEnvironment) {
    Expr t = Temp::make("t0", Type::Float);
    Env env;
    env.temps["t0"] = Value::of_float(4.0);
    EXPECT_EQ(fval(t * 2.0, env), 8.0);
    EXPECT_THROW(fval(Temp::make("t1", Type::Float), env), InternalError);
}

TEST(Interpreter, MatchesHandWrittenCodeOnAGrid) {
    // A mask mixing every integer operator, checked over a grid against C++.
    Expr m = (q_idx() / 3 == kv_idx() / 3 || (q_idx() - kv_idx()) % 4 == 0) && !(kv_idx() > q_len() - 2);
    Env env;
    env.q_len = 10;
    for (long long i = -6; i < 10; ++i)
        for (long long j = -6; j < 10; ++j) {
            env.q_idx = i;
            env.kv_idx = j;
            bool want = (i / 3 == j / 3 || (i - j) % 4 == 0) && !(j > 10 - 2);
            ASSERT_EQ(bval(m, env), want) << i << "," << j;
        }
}

}  // namespace
}  // namespace attnjit::dsl
