// The CPU reference refuses inconsistent inputs the same way the launcher does: a
// UserError naming the argument.
#include <gtest/gtest.h>

#include "dsl/dsl.h"
#include "reference/attention_reference.h"
#include "tests/common/expect_error.h"

namespace attnjit::reference {
namespace {

using namespace attnjit::dsl;

ForwardInputs inputs(DType dt = DType::f16) {
    ForwardInputs in;
    in.q = HostTensor(dt, {1, 2, 4, 32});
    in.k = HostTensor(dt, {1, 2, 5, 32});
    in.v = HostTensor(dt, {1, 2, 5, 32});
    return in;
}

AttentionSpec spec() { return AttentionSpec().dtype(DType::f16).head_dim(32); }

TEST(ReferenceErrors, DtypeDiffersFromSpec) {
    EXPECT_USER_ERROR(forward(spec(), inputs(DType::bf16)), "q has dtype bf16 but the spec's dtype is f16");
}

TEST(ReferenceErrors, HeadDimDiffersFromSpec) {
    ForwardInputs in = inputs();
    in.v = HostTensor(DType::f16, {1, 2, 5, 64});
    EXPECT_USER_ERROR(forward(spec(), in), "v f16[1, 2, 5, 64]");
}

TEST(ReferenceErrors, KeyAndValueLengthsDiffer) {
    ForwardInputs in = inputs();
    in.v = HostTensor(DType::f16, {1, 2, 6, 32});
    EXPECT_USER_ERROR(forward(spec(), in), "must have the same heads and length");
}

TEST(ReferenceErrors, MissingCapturedTensor) {
    AttentionSpec s = spec().score_mod(mods::bias(Tensor("bias", DType::f32, 4)));
    EXPECT_USER_ERROR(forward(s, inputs()), "captured tensor 'bias' is read by the spec but not given");
}

TEST(ReferenceErrors, CapturedTensorIndexOutOfBounds) {
    AttentionSpec s = spec().score_mod(mods::bias(Tensor("bias", DType::f32, 4)));
    ForwardInputs in = inputs();
    in.tensors.emplace("bias", HostTensor(DType::f32, {1, 2, 4, 4}));  // Nk is 5
    EXPECT_USER_ERROR(forward(s, in), "tensor 'bias' is read at [0, 0, 0, 4] but is f32[1, 2, 4, 4]");
}

TEST(ReferenceErrors, MissingScalar) {
    EXPECT_USER_ERROR(forward(spec().score_mod(mods::softcap(scalar("cap"))), inputs()),
                      "scalar 'cap' is read by the spec but not given");
}

TEST(ReferenceErrors, NonIntegralIntScalar) {
    ForwardInputs in = inputs();
    in.scalars["w"] = 0.5;
    EXPECT_USER_ERROR(forward(spec().mask(mods::sliding_window(int_scalar("w"))), in), "int scalar 'w' = 0.5");
}

}  // namespace
}  // namespace attnjit::reference
