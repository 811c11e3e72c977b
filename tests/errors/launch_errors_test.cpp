// Bad launch arguments, caught by attnjit::check_launch_args (runtime/argument_check.cpp)
// before anything reaches a GPU: these tests need no GPU. Each starts from a valid set
// of arguments (checked to pass) and breaks one thing.
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "api/attention.h"
#include "api/attention_backward.h"
#include "tests/common/expect_error.h"

namespace attnjit {
namespace {

using namespace attnjit::dsl;

constexpr int64_t B = 2, Hq = 4, Hkv = 2, Nq = 16, Nk = 32, D = 64;

// Never dereferenced: check_launch_args looks at pointers, never at memory.
alignas(256) char g_memory[16 * 256];
void* ptr(int slot) { return g_memory + 256 * slot; }

TensorView view(int slot, DType dt, std::vector<int64_t> shape) {
    return TensorView::contiguous(ptr(slot), dt, std::move(shape));
}

struct Case {
    AttentionSpec spec;
    LaunchArgs args;
};

// softcap(cap) over a bias [B, Hq, Nq, Nk], a sliding window of int size, and LSE.
Case valid() {
    Case c;
    Tensor bias("bias", DType::f32, 4);
    c.spec.dtype(DType::f16)
        .head_dim(D)
        .score_mod(mods::compose(mods::softcap(scalar("cap")), mods::bias(bias)))
        .mask(mods::sliding_window(int_scalar("window")))
        .return_lse();
    c.args.q = view(0, DType::f16, {B, Hq, Nq, D});
    c.args.k = view(1, DType::f16, {B, Hkv, Nk, D});
    c.args.v = view(2, DType::f16, {B, Hkv, Nk, D});
    c.args.o = view(3, DType::f16, {B, Hq, Nq, D});
    c.args.lse = view(4, DType::f32, {B, Hq, Nq});
    c.args.tensors["bias"] = view(5, DType::f32, {B, Hq, Nq, Nk});
    c.args.scalars = {{"cap", 30.0}, {"window", 8}};
    return c;
}

// A minimal spec: no captured inputs, no LSE.
Case plain() {
    Case c = valid();
    c.spec = AttentionSpec().dtype(DType::f16).head_dim(D);
    c.args.lse.reset();
    c.args.tensors.clear();
    c.args.scalars.clear();
    return c;
}

TEST(LaunchErrors, ValidArgumentsPass) {
    Case c = valid();
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
    Case p = plain();
    EXPECT_NO_THROW(check_launch_args(p.spec, p.args));
}

TEST(LaunchErrors, BroadcastBiasWithStrideZeroPasses) {
    Case c = valid();
    c.args.tensors["bias"] = TensorView{ptr(5), DType::f32, {1, Hq, Nq, Nk}, {0, Nq * Nk, Nk, 1}};
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, TransposedLayoutPasses) {  // [B, N, H, D] memory viewed as [B, H, N, D]
    Case c = plain();
    c.args.q = TensorView{ptr(0), DType::f16, {B, Hq, Nq, D}, {Nq * Hq * D, D, Hq * D, 1}};
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, WrongDtypeOfQ) {
    Case c = valid();
    c.args.q.dtype = DType::bf16;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'q' has dtype bf16 but the spec was compiled for f16");
}

TEST(LaunchErrors, WrongDtypeOfO) {
    Case c = valid();
    c.args.o.dtype = DType::f32;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'o' has dtype f32");
}

TEST(LaunchErrors, RankNotFour) {
    Case c = valid();
    c.args.q = view(0, DType::f16, {Hq, Nq, D});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'q' has rank 3");
}

TEST(LaunchErrors, StrideCountDiffersFromRank) {
    Case c = valid();
    c.args.k.strides.pop_back();
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'k' has 3 strides for rank 4");
}

TEST(LaunchErrors, HeadDimMismatch) {
    Case c = valid();
    c.args.k = view(1, DType::f16, {B, Hkv, Nk, 32});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'k' has head dim 32");
}

TEST(LaunchErrors, ValueHeadDimMismatch) {
    Case c = valid();
    c.args.v = view(2, DType::f16, {B, Hkv, Nk, 128});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'v' has head dim 128");
}

TEST(LaunchErrors, BatchMismatchBetweenQAndK) {
    Case c = valid();
    c.args.k = view(1, DType::f16, {1, Hkv, Nk, D});
    c.args.v = view(2, DType::f16, {1, Hkv, Nk, D});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "batch sizes differ: q [2, 4, 16, 64], k [1, 2, 32, 64]");
}

TEST(LaunchErrors, QueryHeadsNotAMultipleOfKvHeads) {
    Case c = valid();
    c.args.k = view(1, DType::f16, {B, 3, Nk, D});
    c.args.v = view(2, DType::f16, {B, 3, Nk, D});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'q' has 4 heads and 'k' has 3");
}

TEST(LaunchErrors, HeadsDifferFromTheSpec) {
    Case c = valid();
    c.spec.heads(8, 2);
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "the spec says 8 and 2");
}

TEST(LaunchErrors, KeyAndValueLengthsDiffer) {
    Case c = valid();
    c.args.v = view(2, DType::f16, {B, Hkv, Nk - 1, D});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "arguments 'k' [2, 2, 32, 64] and 'v' [2, 2, 31, 64]");
}

TEST(LaunchErrors, NoKeys) {
    Case c = plain();
    c.args.k = view(1, DType::f16, {B, Hkv, 0, D});
    c.args.v = view(2, DType::f16, {B, Hkv, 0, D});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'k' has length 0");
}

TEST(LaunchErrors, OutputShapeWrong) {
    Case c = valid();
    c.args.o = view(3, DType::f16, {B, Hq, Nq - 1, D});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'o' has shape [2, 4, 15, 64] but must be [2, 4, 16, 64]");
}

TEST(LaunchErrors, OutputRowsOverlap) {
    Case c = plain();
    c.args.o.strides[2] = 0;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'o' has stride 0 in dimension 2");
}

TEST(LaunchErrors, NonUnitHeadDimStride) {
    Case c = valid();
    c.args.v.strides[3] = 2;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'v' has stride 2 on the head dimension");
}

TEST(LaunchErrors, NegativeStride) {
    Case c = valid();
    c.args.k.strides[2] = -D;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'k' has negative stride");
}

TEST(LaunchErrors, RowStrideNotMultipleOf16Bytes) {
    Case c = plain();
    c.args.q.strides = {Hq * Nq * 68, Nq * 68, 68, 1};  // 136-byte rows
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'q' has stride 68 in dimension 2 (136 bytes)");
}

TEST(LaunchErrors, NullDataPointer) {
    Case c = valid();
    c.args.k.data = nullptr;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'k' has a null data pointer");
}

TEST(LaunchErrors, MisalignedPointer) {
    Case c = valid();
    c.args.q.data = g_memory + 8;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "which is not 16-byte aligned");
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'q' points to");
}

TEST(LaunchErrors, MissingLse) {
    Case c = valid();
    c.args.lse.reset();
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "the spec returns LSE (return_lse()) but args.lse is empty");
}

TEST(LaunchErrors, LseWithWrongShape) {
    Case c = valid();
    c.args.lse = view(4, DType::f32, {B, Hq, Nq / 2});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'lse' has shape [2, 4, 8] but must be [2, 4, 16]");
}

TEST(LaunchErrors, LseWithWrongDtype) {
    Case c = valid();
    c.args.lse = view(4, DType::f16, {B, Hq, Nq});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'lse' has dtype f16; LSE is f32");
}

TEST(LaunchErrors, LseWithWrongRank) {
    Case c = valid();
    c.args.lse = view(4, DType::f32, {B * Hq * Nq});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'lse' has rank 1");
}

TEST(LaunchErrors, LseGivenButNotReturned) {
    Case c = plain();
    c.args.lse = view(4, DType::f32, {B, Hq, Nq});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "args.lse was given but the spec does not return LSE");
}

TEST(LaunchErrors, MissingCapturedTensor) {
    Case c = valid();
    c.args.tensors.clear();
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "the spec reads tensor 'bias' (f32, rank 4)");
}

TEST(LaunchErrors, UnknownExtraTensor) {
    Case c = valid();
    c.args.tensors["extra"] = view(6, DType::f32, {4});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument tensors['extra'] is not read by the spec");
}

TEST(LaunchErrors, MisspelledTensorName) {
    Case c = valid();
    c.args.tensors["Bias"] = c.args.tensors.at("bias");
    c.args.tensors.erase("bias");
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "tensors['Bias']");
}

TEST(LaunchErrors, CapturedTensorWithWrongDtype) {
    Case c = valid();
    c.args.tensors["bias"].dtype = DType::f16;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "tensor 'bias' has dtype f16 but the spec declared f32");
}

TEST(LaunchErrors, CapturedTensorWithWrongRank) {
    Case c = valid();
    c.args.tensors["bias"] = view(5, DType::f32, {Hq, Nq, Nk});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'bias' has rank 3");
}

TEST(LaunchErrors, CapturedTensorNullPointer) {
    Case c = valid();
    c.args.tensors["bias"].data = nullptr;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'bias' has a null data pointer");
}

TEST(LaunchErrors, CapturedTensorSizeOneWithoutStrideZero) {
    // Extent 1 over the batch but a real stride: batch 1 would read past the end.
    Case c = valid();
    c.args.tensors["bias"] = view(5, DType::f32, {1, Hq, Nq, Nk});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args),
                      "tensor 'bias' has shape [1, 4, 16, 32] but index 0 (b) ranges over [0, 1]");
}

TEST(LaunchErrors, CapturedTensorTooShortForTheKeys) {
    Case c = valid();
    c.args.tensors["bias"] = view(5, DType::f32, {B, Hq, Nq, Nk / 2});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "index 3 (kv_idx) ranges over [0, 31]");
}

TEST(LaunchErrors, RelativePositionTableTooSmall) {
    Case c = plain();
    Tensor table("table", DType::f32, 2);
    c.spec.score_mod(mods::relative_position_bias(table, 8));  // index 1 spans [0, 16]
    c.args.tensors["table"] = view(5, DType::f32, {Hq, 16});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "tensor 'table' has shape [4, 16] but index 1");
    c.args.tensors["table"] = view(5, DType::f32, {Hq, 17});
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

// Index forms the bounds analysis must see through (codegen/bounds_analysis.cpp).
Case with_table(Expr score_mod, std::vector<int64_t> shape, DType dt = DType::f32) {
    Case c = plain();
    c.spec.score_mod(score_mod);
    c.args.tensors["table"] = view(5, dt, std::move(shape));
    return c;
}

TEST(LaunchErrors, AbsoluteDistanceIndexIsBounded) {  // T5-style |i - j|
    Tensor table("table", DType::f32, 2);
    Case c = with_table(score() + table(head(), abs(q_idx() - kv_idx())), {Hq, 4});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "index 1 (abs(q_idx - kv_idx)) ranges over [0, 31]");
    c.args.tensors["table"] = view(5, DType::f32, {Hq, Nk});
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, DividedIndexIsBounded) {
    Tensor table("table", DType::f32, 2);
    Case c = with_table(score() + table(head(), q_idx() / 2), {Hq, 4});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "index 1 (q_idx / 2) ranges over [0, 7]");
}

TEST(LaunchErrors, ModuloIndexCanBeNegative) {  // C's % keeps the dividend's sign
    Tensor table("table", DType::f32, 2);
    Case c = with_table(score() + table(head(), (q_idx() - kv_idx()) % 7), {Hq, 7});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "ranges over [-6, 6]");
}

TEST(LaunchErrors, DataDependentIndexMustBeBounded) {
    Tensor table("table", DType::f32, 1), doc("doc", DType::i32, 2);
    Case c = with_table(score() + table(doc(batch(), kv_idx())), {10});
    c.args.tensors["doc"] = view(6, DType::i32, {B, Nk});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "depends on values the host cannot see");
    c.spec.score_mod(score() + table(clamp(doc(batch(), kv_idx()), 0, 9)));
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, IndexArithmeticBeyondInt32) {
    Tensor flat("table", DType::f32, 1);
    Case c = with_table(score() + flat(q_idx() * 100000 * 100000 + kv_idx()), {int64_t(1) << 40});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "beyond int32");
}

TEST(LaunchErrors, GuardedReadIsBoundedOnItsPath) {  // select(i < 8, t[i], 0) reads t only for i < 8
    Tensor table("table", DType::f32, 1);
    Case c = with_table(score() + select(q_idx() < 8, table(q_idx()), 0.0), {8});
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
    c.spec.score_mod(score() + select(q_idx() < 9, table(q_idx()), 0.0));
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "index 0 (q_idx) ranges over [0, 8]");
    // In a score_mod the right side of && is only evaluated where the left side holds.
    c.spec.score_mod(select(q_idx() < 8 && table(q_idx()) > 0.0, score(), 0.0));
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, GuardsInAMaskDoNotNarrowItsReads) {  // classify() reads masks over whole tiles
    Tensor valid("valid", DType::u8, 1);
    Case c = plain();
    c.spec.mask(kv_idx() < 4 && valid(kv_idx()));
    c.args.tensors["valid"] = view(6, DType::u8, {4});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "tensor 'valid' has shape [4] but index 0 (kv_idx)");
    c.args.tensors["valid"] = view(6, DType::u8, {Nk});
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, LseMustNotOverlapItself) {
    Case c = valid();
    c.args.lse = TensorView{ptr(4), DType::f32, {B, Hq, Nq}, {Hq * Nq, Nq, 0}};
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'lse' has stride 0 in dimension 2");
}

TEST(LaunchErrors, EmptyProblemReadsNothing) {  // Nq = 0: no index is ever formed
    Tensor table("table", DType::f32, 2);
    Case c = with_table(score() + table(head(), q_idx() - kv_idx()), {Hq, 1});
    c.args.q = view(0, DType::f16, {B, Hq, 0, D});
    c.args.o = view(3, DType::f16, {B, Hq, 0, D});
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
}

TEST(LaunchErrors, MissingScalar) {
    Case c = valid();
    c.args.scalars.erase("cap");
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "the spec reads scalar 'cap' (float)");
}

TEST(LaunchErrors, UnknownScalar) {
    Case c = valid();
    c.args.scalars["typo"] = 1.0;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument scalars['typo'] is not read by the spec");
}

TEST(LaunchErrors, IntScalarGivenANonInteger) {
    Case c = valid();
    c.args.scalars["window"] = 2.5;
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "scalar 'window' is an int scalar but got 2.5");
}

TEST(LaunchErrors, NanScalar) {
    Case c = valid();
    c.args.scalars["cap"] = std::nan("");
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "scalar 'cap' is NaN");
}

TEST(LaunchErrors, InvalidSpec) {
    Case c = plain();
    c.spec.head_dim(0);
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "head dim 0 is not positive");
}

// ---- the backward's gradient arguments (check_grad_args) ------------------------------------

GradArgs valid_grads() {
    return GradArgs{view(6, DType::f16, {B, Hq, Nq, D}), view(7, DType::f16, {B, Hq, Nq, D}),
                    view(8, DType::f16, {B, Hkv, Nk, D}), view(9, DType::f16, {B, Hkv, Nk, D})};
}

TEST(GradArgs, ValidArgumentsPass) {
    const Case c = valid();
    check_launch_args(c.spec, c.args);
    check_grad_args(c.spec, c.args, valid_grads());
}

// ---- gradients of captured tensors and scalars (check_input_grad_args) -----------------------

std::vector<codegen::InputGradOutput> valid_outputs() {
    codegen::InputGradOutput cap, bias;
    cap.name = "cap";
    cap.scalar = true;
    bias.name = "bias";
    bias.dtype = DType::f32;
    bias.rank = 4;
    bias.stored = true;
    return {cap, bias};
}

GradArgs valid_input_grads() {
    GradArgs g = valid_grads();
    g.grads["bias"] = view(10, DType::f32, {B, Hq, Nq, Nk});
    g.grads["cap"] = view(11, DType::f32, {});
    return g;
}

TEST(InputGradArgs, ValidArgumentsPass) {
    const Case c = valid();
    check_input_grad_args(c.args, valid_input_grads(), valid_outputs());
    check_input_grad_args(c.args, valid_grads(), {});  // none asked, none given
}

TEST(InputGradArgs, MissingWrongAndExtraOutputsAreUserErrors) {
    const Case c = valid();
    GradArgs g = valid_input_grads();
    g.grads.erase("bias");
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()),
                      "the gradient of tensor 'bias' is missing: GradArgs::grads[\"bias\"] must be given");
    g = valid_input_grads();
    g.grads["bias"].dtype = DType::bf16;
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()),
                      "GradArgs::grads[\"bias\"] has dtype bf16 but must have the dtype of captured tensor 'bias', f32");
    g = valid_input_grads();
    g.grads["bias"] = view(10, DType::f32, {B, Hq, Nq});
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()), "must have the shape of captured tensor 'bias'");
    g = valid_input_grads();
    g.grads["cap"] = view(11, DType::f32, {1});
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()), "must be a 0-dim f32 tensor");
    g = valid_input_grads();
    g.grads["window"] = view(12, DType::f32, {});
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()),
                      "GradArgs::grads has 'window', which this AttentionBackward was not asked for");
    EXPECT_USER_ERROR(check_input_grad_args(c.args, valid_input_grads(), {}), "GradArgs::grads has 'bias'");
    g = valid_input_grads();
    g.grads["bias"].strides[0] = 0;  // the tensor does not broadcast
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()),
                      "has stride 0 in dimension 0 where captured tensor 'bias' has stride 2048: a gradient may have "
                      "stride 0 only where its tensor broadcasts");
    g = valid_input_grads();
    g.grads["bias"].data = c.args.tensors.at("bias").data;
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()), "is the same memory as captured tensor 'bias'");
    g = valid_input_grads();
    g.grads["bias"].data = g.dq.data;
    EXPECT_USER_ERROR(check_input_grad_args(c.args, g, valid_outputs()), "is the same memory as another gradient");
}

// Nq == 0: the bias [B, Hq, Nq, Nk] and its gradient are empty, their contiguous strides 0,
// and an allocator may give them any address, even dq's: nothing is written, nothing shared.
TEST(InputGradArgs, EmptyGradientsPass) {
    Case c = valid();
    c.args.tensors["bias"] = view(5, DType::f32, {B, Hq, 0, Nk});
    GradArgs g = valid_input_grads();
    g.dq = view(6, DType::f16, {B, Hq, 0, D});
    g.grads["bias"] = view(6, DType::f32, {B, Hq, 0, Nk});
    EXPECT_NO_THROW(check_input_grad_args(c.args, g, valid_outputs()));
}

// A broadcast tensor (stride 0) takes a gradient with stride 0 there (the sum) or a real
// stride (each index's own, as autograd wants for an expanded tensor).
TEST(InputGradArgs, BroadcastTensorTakesEitherGradient) {
    Case c = valid();
    c.args.tensors["bias"].strides[0] = 0;
    GradArgs g = valid_input_grads();
    check_input_grad_args(c.args, g, valid_outputs());
    g.grads["bias"].strides[0] = 0;
    check_input_grad_args(c.args, g, valid_outputs());
}

TEST(GradArgs, ShapesDtypesAndStridesAreChecked) {
    const Case c = valid();
    GradArgs g = valid_grads();
    g.dk = view(8, DType::f16, {B, Hq, Nk, D});
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'dk' has shape [2, 4, 32, 64] but must have the shape of 'k', [2, 2, 32, 64]");
    g = valid_grads();
    g.d_o.dtype = DType::bf16;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'd_o' has dtype bf16");
    g = valid_grads();
    g.dv.strides[3] = 2;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'dv' has stride 2 on the head dimension");
    g = valid_grads();
    g.dq.strides[1] = 0;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'dq' has stride 0 in dimension 1");
}

// Nq == 0: q, o, dO, LSE and dq are empty and their contiguous strides 0. Nothing is
// written to them, so nothing overlaps; dk and dv are still written (zeros) and checked.
TEST(GradArgs, EmptyQueryRowsPass) {
    Case c = plain();
    c.spec.return_lse();
    c.args.q = view(0, DType::f16, {B, Hq, 0, D});
    c.args.o = view(3, DType::f16, {B, Hq, 0, D});
    c.args.lse = view(4, DType::f32, {B, Hq, 0});
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
    GradArgs g{view(6, DType::f16, {B, Hq, 0, D}), view(7, DType::f16, {B, Hq, 0, D}), view(8, DType::f16, {B, Hkv, Nk, D}),
               view(9, DType::f16, {B, Hkv, Nk, D})};
    EXPECT_NO_THROW(check_grad_args(c.spec, c.args, g));
    // An allocator may give an empty buffer any address, even another tensor's.
    g.dq.data = g.dk.data;
    c.args.q.data = g.dv.data;
    EXPECT_NO_THROW(check_grad_args(c.spec, c.args, g));
    g.dv.data = g.dk.data;  // the written outputs are still checked
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "arguments 'dk' and 'dv' are the same memory");
}

// Outputs in place of an input (q, k, v, o, dO, LSE or a captured tensor) or of each other.
TEST(GradArgs, GradientsAreNeverComputedInPlace) {
    const Case c = valid();
    GradArgs g = valid_grads();
    g.dq.data = c.args.q.data;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'dq' is the same memory as 'q'");
    g = valid_grads();
    g.dv.data = g.d_o.data;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'dv' is the same memory as 'd_o'");
    g = valid_grads();
    g.dk.data = c.args.tensors.at("bias").data;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "argument 'dk' is the same memory as captured tensor 'bias'");
    g = valid_grads();
    g.dv.data = g.dk.data;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "arguments 'dk' and 'dv' are the same memory");
}

// ---- attention sinks: the forward's sinks tensor and the backward's d sinks ----------------

Case with_sinks(DType sinks_dtype = DType::f32) {
    Case c = valid();
    c.spec.sinks("sinks", sinks_dtype);
    c.args.tensors["sinks"] = view(10, sinks_dtype, {Hq});
    return c;
}

TEST(LaunchErrors, SinksTensorIsCheckedLikeACapturedTensorAndMustBeHq) {
    Case c = with_sinks();
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
    c.args.tensors["sinks"].strides = {0};  // one sink shared by every head: allowed
    EXPECT_NO_THROW(check_launch_args(c.spec, c.args));
    c = with_sinks();
    c.args.tensors["sinks"] = view(10, DType::f32, {Hq + 1});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args),
                      "the sinks tensor 'sinks' has shape [5] but must be [Hq] = [4]: one sink logit per query head");
    c = with_sinks();
    c.args.tensors["sinks"] = view(10, DType::bf16, {Hq});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "tensor 'sinks' has dtype bf16 but the spec declared f32");
    c = with_sinks();
    c.args.tensors["sinks"] = view(10, DType::f32, {1, Hq});
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "argument 'sinks' has rank 2");
    c = with_sinks();
    c.args.tensors.erase("sinks");
    EXPECT_USER_ERROR(check_launch_args(c.spec, c.args), "the spec reads tensor 'sinks' (f32, rank 1)");
}

TEST(GradArgs, SinksGradientByName) {
    for (DType sd : {DType::f32, DType::bf16}) {
        const Case c = with_sinks(sd);
        GradArgs g = valid_grads();
        check_grad_args(c.spec, c.args, g);  // no entry: the sinks get no gradient
        g.grads["sinks"] = view(11, sd, {Hq});
        check_grad_args(c.spec, c.args, g);
    }
    const Case c = with_sinks();
    GradArgs g = valid_grads();
    g.grads["sinks"] = view(11, DType::f32, {Hq - 1});
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "grads['sinks'] has shape [3] but must be [Hq] = [4]");
    g.grads["sinks"] = view(11, DType::f16, {Hq});
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "has dtype f16; the gradient of the sinks has its dtype, f32");
    g.grads["sinks"] = view(11, DType::f32, {Hq});
    g.grads["sinks"].strides = {0};
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "grads['sinks'] has stride 0");
    g.grads["sinks"] = c.args.tensors.at("sinks");
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "is the same memory as captured tensor 'sinks'");
    g.grads["sinks"] = g.dq;
    g.grads["sinks"].shape = {Hq};
    g.grads["sinks"].strides = {1};
    g.grads["sinks"].dtype = DType::f32;
    EXPECT_USER_ERROR(check_grad_args(c.spec, c.args, g), "and 'dq' are the same memory");
    // Other names are check_input_grad_args's: a backward not asked for them refuses them,
    // the sinks' entry it leaves to check_grad_args.
    g = valid_grads();
    g.grads["sinks"] = view(11, DType::f32, {Hq});
    check_input_grad_args(c.args, g, {}, {"sinks"});
    const Case no_sinks = valid();
    EXPECT_USER_ERROR(check_input_grad_args(no_sinks.args, g, {}), "GradArgs::grads has 'sinks', which this");
}

}  // namespace
}  // namespace attnjit
