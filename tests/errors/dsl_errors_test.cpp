// Bad DSL: each mistake is a UserError whose message names the offending expression,
// tensor or scalar.
#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "tests/common/expect_error.h"

namespace attnjit::dsl {
namespace {

const Tensor bias("bias", DType::f32, 4);
const Tensor slopes("slopes", DType::f32, 1);

TEST(DslErrors, MaskReadingTheScore) {
    EXPECT_USER_ERROR(AttentionSpec().mask(score() > 0).validate(), "mask score > 0.0 reads the score");
}

TEST(DslErrors, BoolInArithmetic) {
    EXPECT_USER_ERROR((q_idx() < kv_idx()) + 1, "(q_idx < kv_idx) + 1: operator + needs numbers but got bool");
}

TEST(DslErrors, BoolTimesScore) {
    EXPECT_USER_ERROR(score() * (kv_idx() <= q_idx()), "operator * needs numbers but got float and bool");
}

TEST(DslErrors, FloatIndex) {
    EXPECT_USER_ERROR(slopes(score()), "tensor 'slopes': index 0 (score) is float; indices must be int");
}

TEST(DslErrors, FloatExpressionAsIndex) {
    EXPECT_USER_ERROR(bias(batch(), head(), q_idx() * 0.5, kv_idx()), "tensor 'bias': index 2");
}

TEST(DslErrors, WrongIndexCount) {
    EXPECT_USER_ERROR(bias(batch(), head()), "tensor 'bias' has rank 4 but was indexed with 2 indices");
}

TEST(DslErrors, UndefinedIndex) { EXPECT_USER_ERROR(slopes(Expr()), "tensor 'slopes': index 0 is undefined"); }

TEST(DslErrors, InvalidTensorName) {
    EXPECT_USER_ERROR(Tensor("2bias", DType::f32, 1), "tensor name '2bias' is not usable");
}

TEST(DslErrors, ReservedTensorName) { EXPECT_USER_ERROR(Tensor("kv_idx", DType::i32, 1), "tensor name 'kv_idx'"); }

TEST(DslErrors, ReservedScalarName) { EXPECT_USER_ERROR(scalar("score"), "scalar name 'score' is not usable"); }

TEST(DslErrors, FunctionNameAsScalar) { EXPECT_USER_ERROR(scalar("tanh"), "scalar name 'tanh'"); }

TEST(DslErrors, ScalarNameWithPunctuation) { EXPECT_USER_ERROR(int_scalar("win-size"), "scalar name 'win-size'"); }

TEST(DslErrors, EmptyName) { EXPECT_USER_ERROR(scalar(""), "scalar name ''"); }

TEST(DslErrors, ImplementationPrefixName) {
    EXPECT_USER_ERROR(Tensor("attnjit_bias", DType::f32, 1), "tensor name 'attnjit_bias'");
    EXPECT_USER_ERROR(scalar("__cap"), "scalar name '__cap'");
}

TEST(DslErrors, TensorRankOutOfRange) {
    EXPECT_USER_ERROR(Tensor("big", DType::f32, 7), "tensor 'big' has rank 7; captured tensors have rank 1 to 6");
    EXPECT_USER_ERROR(Tensor("none", DType::f32, 0), "tensor 'none' has rank 0");
}

TEST(DslErrors, ModuloOnFloats) { EXPECT_USER_ERROR(score() % 2, "score % 2: % needs two ints but got float and int"); }

TEST(DslErrors, UndefinedExpr) { EXPECT_USER_ERROR(Expr() * score(), "operator * got an undefined Expr"); }

TEST(DslErrors, UndefinedSelectBranch) { EXPECT_USER_ERROR(select(q_idx() < 1, Expr(), score()), "operator select"); }

TEST(DslErrors, NameUsedAsScalarAndTensor) {
    Tensor cap("cap", DType::f32, 1);
    EXPECT_USER_ERROR(AttentionSpec().score_mod(scalar("cap") * tanh(score() / cap(head()))).validate(),
                      "'cap' is used both as");
}

TEST(DslErrors, NameUsedAsTensorInMaskAndScalarInScoreMod) {
    Tensor w("w", DType::i32, 1);
    EXPECT_USER_ERROR(AttentionSpec().score_mod(score() * scalar("w")).mask(kv_idx() < w(0)).validate(),
                      "'w' is used both as a scalar and as a tensor (in mask)");
}

TEST(DslErrors, SameTensorWithTwoDtypes) {
    Tensor b16("bias", DType::f16, 4);
    EXPECT_USER_ERROR(AttentionSpec().score_mod(mods::bias(bias) + mods::bias(b16)).validate(),
                      "tensor 'bias' is used with two different dtypes or ranks (f32/4 and f16/4");
}

TEST(DslErrors, SameTensorWithTwoRanks) {
    Tensor bias2("bias", DType::f32, 2);
    EXPECT_USER_ERROR(AttentionSpec().score_mod(mods::bias(bias)).mask(bias2(q_idx(), kv_idx()) > 0.0).validate(),
                      "tensor 'bias' is used with two different dtypes or ranks");
}

TEST(DslErrors, ScalarAsFloatAndInt) {
    EXPECT_USER_ERROR(AttentionSpec().score_mod(score() * scalar("w")).mask(kv_idx() < int_scalar("w")).validate(),
                      "scalar 'w' is used both as float and as int");
}

TEST(DslErrors, ScoreModOfTypeBool) {
    EXPECT_USER_ERROR(AttentionSpec().score_mod(kv_idx() <= q_idx()).validate(),
                      "score_mod kv_idx <= q_idx has type bool; a score_mod must produce a float score");
}

TEST(DslErrors, ScoreModOfTypeInt) {
    EXPECT_USER_ERROR(AttentionSpec().score_mod(q_idx() - kv_idx()).validate(), "score_mod q_idx - kv_idx has type int");
}

TEST(DslErrors, MaskOfTypeFloat) {
    EXPECT_USER_ERROR(AttentionSpec().mask(slopes(head())).validate(), "mask slopes[h] has type float");
}

TEST(DslErrors, NotOfANumber) { EXPECT_USER_ERROR(!q_idx(), "!(q_idx): ! needs a bool but got int"); }

TEST(DslErrors, LogicalAndOfNumbers) { EXPECT_USER_ERROR(q_idx() && kv_idx(), "&& needs two bools but got int and int"); }

TEST(DslErrors, NegatedBool) { EXPECT_USER_ERROR(-(q_idx() < 2), "cannot negate a bool"); }

TEST(DslErrors, SelectWithFloatCondition) {
    EXPECT_USER_ERROR(select(score(), 1.0, 0.0), "select(score, ...): the condition must be bool but is float");
}

TEST(DslErrors, SelectMixingBoolAndNumber) {
    EXPECT_USER_ERROR(select(q_idx() < 1, q_idx() < 2, 1.0), "branches are bool and float");
}

TEST(DslErrors, ComparingBoolWithInt) {
    EXPECT_USER_ERROR((q_idx() < 1) == 1, "cannot compare bool with int");
}

TEST(DslErrors, MathOfBool) { EXPECT_USER_ERROR(exp(kv_idx() < 1), "exp(kv_idx < 1: needs a number but got bool"); }

TEST(DslErrors, ConvertingBool) { EXPECT_USER_ERROR(to_float(q_idx() < 1), "to_float(q_idx < 1): cannot convert a bool"); }

TEST(DslErrors, SlidingWindowWithFloatWindow) {
    EXPECT_USER_ERROR(mods::sliding_window(scalar("w")), "sliding_window(window) must be an int expression");
}

TEST(DslErrors, AlibiWithIntSlopes) {
    EXPECT_USER_ERROR(mods::alibi(Tensor("slopes", DType::i32, 1)), "alibi: tensor 'slopes' has dtype i32");
}

TEST(DslErrors, BiasOfWrongRank) {
    EXPECT_USER_ERROR(mods::bias(Tensor("pair", DType::bf16, 3)), "bias: tensor 'pair' has rank 3; it must have rank 4");
}

TEST(DslErrors, DocumentMaskWithFloatIds) {
    EXPECT_USER_ERROR(mods::document_mask(Tensor("doc", DType::f32, 2)), "document_mask: tensor 'doc' has dtype f32");
}

TEST(DslErrors, RelativePositionNegativeDistance) {
    EXPECT_USER_ERROR(mods::relative_position_bias(Tensor("table", DType::f32, 2), -1), "max_distance is -1");
}

TEST(DslErrors, SoftcapOfBool) { EXPECT_USER_ERROR(mods::softcap(q_idx() < 1), "softcap(cap): cap must be a number"); }

TEST(DslErrors, ComposeWithBoolInner) {
    EXPECT_USER_ERROR(mods::compose(mods::softcap(30.0), q_idx() < 1), "inner q_idx < 1 must be a float score expression");
}

TEST(DslErrors, InterpreterMissingScalar) {
    EXPECT_USER_ERROR(interpret(mods::softcap(scalar("cap")), Env{}), "scalar 'cap' has no value");
}

TEST(DslErrors, InterpreterIntegerDivisionByZero) {
    Env env;
    env.scalars["block"] = 0;
    EXPECT_USER_ERROR(interpret(q_idx() / int_scalar("block"), env), "integer division by zero in q_idx / block");
}

TEST(DslErrors, InterpreterNonIntegralIntScalar) {
    Env env;
    env.scalars["w"] = 1.5;
    EXPECT_USER_ERROR(interpret(kv_idx() < int_scalar("w"), env), "int scalar 'w' holds 1.5");
}

}  // namespace
}  // namespace attnjit::dsl
